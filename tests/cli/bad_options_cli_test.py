"""Every option value a user can get wrong is one error line and exit 2, before any work: empty
values, negative numbers, fractions where an integer goes, nan, inf, overflow, unknown names.
No bad value may start a run, crash, hang or print more than one line.

usage: bad_options_cli_test.py MAMBACHECK WORK_DIR SOURCE_DIR
"""
import os
import shutil
import signal
import subprocess
import sys
import time

MC, WORK, SOURCE = sys.argv[1], sys.argv[2], sys.argv[3]
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
TRACE = os.path.join(SOURCE, "scenarios/library/a-decode-crossing-each-acceptance.jsonl")

COUNT = ["", "-1", "abc", "2.5", "nan", "inf", "1e400", "99999999999999999999999", "0x"]
SEED = ["", "-1", "abc", "2.5", "nan", "18446744073709551616", "99999999999999999999999"]
SECONDS = ["", "-1", "abc", "nan", "inf", "-inf", "1e400", "0"]
DURATION = ["", "-1s", "abc", "1e400s", "inf", "nan", "5 parsecs", "99999999999999999999h"]
NAME = ["", "bogus", "BOGUS", " "]

# subcommand, the arguments that make it cheap and valid, {option: bad values}
COMMANDS = [
    ("fuzz", ["--backend", "host", "--cases", "1"], {
        "--level": NAME, "--backend": NAME, "--seed": SEED, "--cases": COUNT,
        "--time-budget": DURATION, "--max-size": COUNT + ["101"], "--block-size": COUNT,
        "--token-budget": COUNT, "--mutant": NAME, "--external-timeout": SECONDS,
        "--reruns": COUNT, "--repeat": COUNT + ["0"], "--kinds": NAME, "--focus": NAME,
        "--case-timeout": SECONDS, "--resume-from": COUNT + ["1"],
        "--shrink-time": DURATION + ["0", "None"], "--mps": NAME + ["on"]}),
    ("run", ["--steps", "1"], {
        "--preset": NAME, "--steps": COUNT, "--requests": COUNT, "--seed": SEED,
        "--backend": NAME, "--runner": NAME, "--mode": NAME, "--pool-blocks": COUNT,
        "--v1-copy": NAME, "--num-spec": COUNT + ["17"], "--block-size": COUNT,
        "--layers": COUNT, "--token-budget": COUNT, "--resets-per-million": COUNT,
        "--aborts-per-million": COUNT + ["1000001"], "--step-ms": SECONDS,
        "--whole-compare-every": COUNT + ["0"], "--hash-block-size": COUNT + ["3", "8"]}),
    ("replay", [TRACE, "--steps", "1"], {
        "--backend": NAME, "--runner": NAME, "--v1-copy": NAME, "--mutant": NAME,
        "--kernel-mutant": NAME, "--runner-mutant": NAME, "--steps": COUNT, "--explain": COUNT,
        "--whole-compare-every": COUNT + ["0"]}),
    ("export", ["--cases", "1", "--out", os.path.join(WORK, "export")], {
        "--cases": COUNT, "--seed": SEED, "--kinds": NAME, "--max-size": COUNT + ["101"],
        "--focus": NAME}),
    ("gate", ["--backend", "host", "--kernel-cases", "1", "--engine-cases", "1"], {
        "--backend": NAME, "--kinds": NAME, "--kernel-cases": COUNT, "--engine-cases": COUNT,
        "--mutant-budget": DURATION}),
    ("mutants", ["--backend", "host", "--level", "kernel", "--only", "null_block_skipped",
                 "--time-budget-per-mutant", "20s"], {
        "--backend": NAME, "--level": NAME, "--time-budget-per-mutant": DURATION,
        "--seed": SEED, "--max-size": COUNT + ["101"], "--only": NAME}),
    ("show", [TRACE, "--out", os.path.join(WORK, "show.html")], {
        "--backend": NAME, "--mutant": NAME}),
    ("bench", ["--engine", "--steps", "1"], {
        "--preset": NAME, "--requests": COUNT, "--steps": COUNT, "--max-running": COUNT,
        "--token-budget": COUNT, "--pool-blocks": COUNT, "--num-spec": COUNT,
        "--layers": COUNT, "--runner": NAME, "--seed": SEED}),
]

# Options that contradict each other or the level they are given at.
CONFLICTS = [
    ["fuzz", "--backend", "host", "--cases", "1", "--keep-going", "--stop-at-first"],
    ["fuzz", "--backend", "host", "--cases", "1", "--level", "kernel", "--block-size", "4"],
    ["fuzz", "--backend", "host", "--cases", "1", "--level", "engine", "--kinds", "precopy"],
    ["fuzz", "--cases", "1", "--external", "true", "--backend", "host"],
    ["fuzz", "--backend", "host", "--cases", "5", "--resume-from", "5"],
    ["run", "--steps", "1", "--step-ms", "5"],
    ["run", "--steps", "1", "--hash-block-tokens", "4"],
    ["run", "--steps", "1", "--runner", "v2", "--v1-copy", "precopy"],
    ["run", "--steps", "1", "--mode", "all", "--num-spec", "2", "--preset", "tiny-kda"],
    ["bench", "--engine", "--iters", "3"],
    ["replay", TRACE, "--library", os.path.join(SOURCE, "scenarios/library")],
    ["export", "--cases", "1"],
]

# Values past what the option's type holds, with the line they must give: a signed count stops
# at 2^63 - 1 (CLI11 would saturate it to that and run), an unsigned seed at 2^64 - 1.
OUT_OF_RANGE = [
    (["replay", TRACE, "--steps", "9223372036854775808"],
     "--steps: '9223372036854775808' is out of range: at most 9223372036854775807"),
    (["run", "--steps", "9223372036854775808"],
     "--steps: '9223372036854775808' is out of range: at most 9223372036854775807"),
    (["fuzz", "--backend", "host", "--cases", "1", "--seed", "18446744073709551616"],
     "--seed: '18446744073709551616' is out of range: at most 18446744073709551615"),
]

# Huge counts are run as the cases come, nothing is set aside for all of them up front: the
# campaign starts, and a SIGINT ends it with the report of what ran (exit 130).
HUGE_COUNTS = [
    ["gate", "--backend", "host", "--kernel-cases", "4294967296", "--engine-cases", "1",
     "--out", os.path.join(WORK, "gate-huge")],
    ["fuzz", "--backend", "host", "--cases", "4294967296", "--out", os.path.join(WORK, "fuzz-huge")],
]

failures = []
tried = 0
for command, base, options in COMMANDS:
    for option, values in options.items():
        for value in values:
            # The option under test replaces its cheap value: given twice it would be refused
            # for that alone.
            kept = []
            i = 0
            while i < len(base):
                if base[i] == option:
                    i += 2
                    continue
                kept.append(base[i])
                i += 1
            args = [MC, command, *kept, option, value]
            tried += 1
            try:
                done = subprocess.run(args, cwd=WORK, capture_output=True, text=True, timeout=60)
            except subprocess.TimeoutExpired:
                failures.append(f"{' '.join(args[1:])!r}: still running after 60 s")
                continue
            lines = [l for l in done.stderr.splitlines() if l.strip()]
            if done.returncode != 2 or len(lines) != 1:
                failures.append(f"{' '.join(args[1:])!r}: exit {done.returncode}, "
                                f"{len(lines)} error lines: {done.stderr.strip()[:300]!r}")

for conflict in CONFLICTS:
    tried += 1
    done = subprocess.run([MC, *conflict], cwd=WORK, capture_output=True, text=True, timeout=60)
    lines = [l for l in done.stderr.splitlines() if l.strip()]
    if done.returncode != 2 or len(lines) != 1:
        failures.append(f"{' '.join(conflict)!r}: exit {done.returncode}, {len(lines)} error "
                        f"lines: {done.stderr.strip()[:300]!r}")

for args, needle in OUT_OF_RANGE:
    tried += 1
    done = subprocess.run([MC, *args], cwd=WORK, capture_output=True, text=True, timeout=60)
    lines = done.stderr.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if done.returncode != 2 or len(lines) != 1 or needle not in lines[0]:
        failures.append(f"{' '.join(args)!r}: exit {done.returncode}, expected 2 and one line "
                        f"with {needle!r}: {done.stderr.strip()[:300]!r}")

for args in HUGE_COUNTS:
    tried += 1
    started = subprocess.Popen([MC, *args], cwd=WORK, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    time.sleep(5)
    started.send_signal(signal.SIGINT)
    try:
        stdout, stderr = started.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        started.kill()
        stdout, stderr = started.communicate()
        failures.append(f"{' '.join(args)!r}: still running 120 s after SIGINT")
        continue
    if started.returncode != 130 or "interrupted" not in stdout or "bad_alloc" in stderr:
        failures.append(f"{' '.join(args)!r}: exit {started.returncode} after SIGINT, expected "
                        f"130 and an interrupted run: {stdout[-300:]!r} {stderr[-300:]!r}")

for failure in failures:
    print("FAIL:", failure)
print(f"{tried} bad option values and combinations, {len(failures)} not refused with one line and exit 2")
sys.exit(1 if failures else 0)
