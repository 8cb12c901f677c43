"""Every option value a user can get wrong is one error line and exit 2, before any work: empty
values, negative numbers, fractions where an integer goes, nan, inf, overflow, unknown names.
No bad value may start a run, crash, hang or print more than one line.

usage: bad_options_cli_test.py MAMBACHECK WORK_DIR SOURCE_DIR
"""
import os
import shutil
import subprocess
import sys

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
        "--whole-compare-every": COUNT + ["0"]}),
    ("replay", [TRACE, "--steps", "1"], {
        "--backend": NAME, "--runner": NAME, "--v1-copy": NAME, "--kernel-mutant": NAME,
        "--runner-mutant": NAME, "--steps": COUNT, "--explain": COUNT,
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

for failure in failures:
    print("FAIL:", failure)
print(f"{tried} bad option values and combinations, {len(failures)} not refused with one line and exit 2")
sys.exit(1 if failures else 0)
