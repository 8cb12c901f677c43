"""SIGINT and SIGTERM stop fuzz, gate, run and replay between cases or steps: the report and
JUnit of what was done are written (valid JSON and XML, marked interrupted), the exit code is
128 + the signal, a second signal exits at once, and a campaign resumed from where it stopped
covers exactly the cases an uninterrupted campaign runs: `mambacheck merge` of the two reports
is the uninterrupted campaign's report.

usage: interrupt_cli_test.py MAMBACHECK WORK_DIR
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

from cli_checks import check, finish

MC, WORK = sys.argv[1], sys.argv[2]


def start(*args, **kwargs):
    # Its own session: the signal reaches the process group, as a terminal's Ctrl-C does.
    return subprocess.Popen([MC, *args], cwd=WORK, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, **kwargs)


def wait_for(predicate, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def interrupt(process, sig, after):
    time.sleep(after)
    check(process.poll() is None, f"{process.args[1]} still running when {sig.name} is sent")
    os.killpg(process.pid, sig)
    out, err = process.communicate(timeout=600)
    return process.returncode, out, err


def path(name):
    return os.path.join(WORK, name)


def junit_cases(file):
    root = ET.parse(path(file)).getroot()
    return {c.get("name"): c for c in root.iter("testcase")}


def no_temporaries():
    left = [f for f in os.listdir(WORK) if ".tmp-" in f]
    check(not left, f"temporary files left behind: {left}")


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)

# Kernel level, SIGINT: report and JUnit of the cases done, the resume point printed.
p = start("fuzz", "--backend", "host", "--cases", "100000", "--report", "k.json",
          "--junit", "k.xml", "--out", "k-out")
code, out, err = interrupt(p, signal.SIGINT, 3.0)
check(code == 130, f"fuzz after SIGINT exits 130, got {code}: {err}")
report = json.load(open(path("k.json")))
done = report["cases"]
check(done >= 1, "the interrupted kernel campaign ran cases")
check(report["interrupted"] == {"signal": "SIGINT", "cases_done": done, "resume_from": done},
      f"interrupted: {report.get('interrupted')}")
check(f"kernel level: interrupted by SIGINT after {done} case" in out, out)
check(f"continue with --resume-from {done}" in out, out)
check("stopping after the current case" in err, err)
cases = junit_cases("k.xml")
check(cases["kernel-interrupted"].find("skipped") is not None, "JUnit marks the interruption")
no_temporaries()

# Resumed to N cases, the two parts add up to the uninterrupted campaign of N cases.
total = done + 5
code, out, err = subprocess.run(
    [MC, "fuzz", "--backend", "host", "--cases", str(total), "--resume-from", str(done),
     "--report", "resumed.json", "--out", "k-out"], cwd=WORK, capture_output=True,
    text=True).returncode, None, None
check(code == 0, f"the resumed campaign holds, exit {code}")
resumed = json.load(open(path("resumed.json")))
check(resumed["first_case"] == done and resumed["cases"] == 5, f"resumed: {resumed['cases']}")
code = subprocess.run([MC, "fuzz", "--backend", "host", "--cases", str(total), "--report",
                       "whole.json", "--out", "k-out"], cwd=WORK, capture_output=True).returncode
whole = json.load(open(path("whole.json")))
for key in ("cases", "copies_compared", "arena_bytes_compared", "failing_cases"):
    check(report[key] + resumed[key] == whole[key], f"{key}: {report[key]} + {resumed[key]} "
          f"!= {whole[key]}")
for key in ("cases_by_kind", "cases_by_size_class"):
    merged = {k: report[key].get(k, 0) + resumed[key].get(k, 0)
              for k in set(report[key]) | set(resumed[key])}
    check(merged == whole[key], f"{key}: {merged} != {whole[key]}")



def merge_equals(parts, whole_file, what, expect_exit=0):
    """`mambacheck merge` of the parts gives the uninterrupted campaign's report."""
    r = subprocess.run([MC, "merge", *parts, "--report", "merged.json"], cwd=WORK,
                       capture_output=True, text=True)
    check(r.returncode == expect_exit, f"{what}: merge exits {r.returncode}: {r.stderr}")
    merged = json.load(open(path("merged.json")))
    whole = json.load(open(path(whole_file)))
    for key in sorted(set(merged) | set(whole)):
        check(merged.get(key) == whole.get(key), f"{what}: '{key}' differs after the merge: "
              f"{json.dumps(merged.get(key))[:200]} != {json.dumps(whole.get(key))[:200]}")


def interrupted_and_resumed(args, name, sig):
    """Runs `args` until `sig`, then resumes it from where it stopped: the two report files."""
    p = start(*args, "--report", f"{name}-1.json")
    code, out, err = interrupt(p, sig, 1.5)
    check(code == 128 + sig, f"{name}: exit {code} after {sig.name}: {err}")
    first = json.load(open(path(f"{name}-1.json")))
    resume = first["interrupted"]["resume_from"]
    r = subprocess.run([MC, *args, "--resume-from", str(resume), "--report", f"{name}-2.json"],
                       cwd=WORK, capture_output=True, text=True)
    check(r.returncode == 0, f"{name}: the continuation exits {r.returncode}: {r.stderr}")
    return [f"{name}-1.json", f"{name}-2.json"]


def whole_campaign(level, cases):
    """The uninterrupted campaign's arguments, its report written: a campaign that lasts at least
    6 s, so that it is still running when the signal comes 1.5 s in. The count grows until it
    does, since the cases per second depend on the machine and on what else runs on it."""
    while True:
        args = ["fuzz", "--level", level, "--backend", "host", "--cases", str(cases),
                "--max-size", "60", "--out", "merge-out"]
        began = time.monotonic()
        subprocess.run([MC, *args, "--report", f"{level}-whole.json"], cwd=WORK, check=True,
                       capture_output=True)
        took = time.monotonic() - began
        if took >= 6.0:
            return args
        cases = int(cases * 6.0 / max(took, 0.1)) + 1


# An interrupted campaign and its --resume-from continuation (same seed, cases and options)
# merge into the report of the campaign run without interruption: every field equal.
for level, cases in (("kernel", 10000), ("engine", 600)):
    args = whole_campaign(level, cases)
    parts = interrupted_and_resumed(args, f"{level}-resumed", signal.SIGTERM)
    merge_equals(parts, f"{level}-whole.json", f"{level}: interrupted and resumed")
    # The interrupted part alone is still interrupted: the merge says so and exits 143.
    r = subprocess.run([MC, "merge", parts[0], "--report", "alone.json"], cwd=WORK,
                       capture_output=True, text=True)
    check(r.returncode == 143, f"{level}: an interrupted part merges to exit 143, "
          f"got {r.returncode}")
    alone, first = json.load(open(path("alone.json"))), json.load(open(path(parts[0])))
    check(alone["interrupted"] == first["interrupted"],
          f"{level}: merged interruption {alone.get('interrupted')}")
    # One shard interrupted and resumed, with the other shard: the whole campaign again.
    if level == "kernel":
        subprocess.run([MC, *args, "--shard", "0/2", "--report", "shard0.json"], cwd=WORK,
                       check=True, capture_output=True)
        shard1 = interrupted_and_resumed([*args, "--shard", "1/2"], "shard1", signal.SIGINT)
        merge_equals(["shard0.json", *shard1], f"{level}-whole.json", "shard 1/2 resumed")
        r = subprocess.run([MC, "merge", "shard0.json", shard1[0], "--report", "alone.json"],
                           cwd=WORK, capture_output=True, text=True)
        check(r.returncode == 130 and "continue it with --shard 1/2 --resume-from" in r.stdout,
              f"an interrupted shard: exit {r.returncode}: {r.stdout[-300:]}")

# Engine level, SIGTERM (what Slurm and Kubernetes send first).
p = start("fuzz", "--level", "engine", "--backend", "host", "--cases", "100000",
          "--report", "e.json", "--junit", "e.xml", "--out", "e-out")
code, out, err = interrupt(p, signal.SIGTERM, 3.0)
check(code == 143, f"engine fuzz after SIGTERM exits 143, got {code}: {err}")
report = json.load(open(path("e.json")))
check(report["interrupted"]["signal"] == "SIGTERM", f"{report.get('interrupted')}")
check(report["interrupted"]["cases_done"] == report["cases"] >= 1, "engine cases done")
check("engine-interrupted" in junit_cases("e.xml"), "engine JUnit marks the interruption")
check("FAILS" not in out, f"a signal that reached the isolated children is no finding: {out}")

# The gate: the stage in progress is marked interrupted, later ones not run; no verdict.
p = start("gate", "--backend", "host", "--junit", "g.xml", "--out", "g-out")
code, out, err = interrupt(p, signal.SIGINT, 3.0)
check(code == 130, f"gate after SIGINT exits 130, got {code}: {err}")
stages = junit_cases("g.xml")
check(len(stages) == 4, f"every stage in the JUnit: {list(stages)}")
skipped = [n for n, c in stages.items() if c.find("skipped") is not None]
check(len(skipped) >= 1 and "mutant-smoke" in skipped, f"skipped stages: {skipped}")
check("gate interrupted by SIGINT" in out and "gate passed" not in out, out)

# run: stops between steps and says how far it got.
p = start("run", "--preset", "nemotron-h-8b", "--layers", "2", "--steps", "100000")
code, out, err = interrupt(p, signal.SIGTERM, 3.0)
check(code == 143, f"run after SIGTERM exits 143, got {code}: {err}")
check("run: interrupted by SIGTERM after" in out and "held:" not in out, out)

# replay: a long trace, stopped once it is under way (its --steps-out has lines).
subprocess.run([MC, "run", "--preset", "tiny-mamba2", "--steps", "20000", "--requests", "3000",
                "--record", "t.jsonl"], cwd=WORK, check=True, capture_output=True)
p = start("replay", "t.jsonl", "--steps-out", "steps.jsonl", "--report", "r.json",
          "--junit", "r.xml")


def replay_under_way():
    try:
        with open(path("steps.jsonl")) as f:
            return sum(1 for _ in f) >= 10
    except FileNotFoundError:
        return False


check(wait_for(replay_under_way, 120), "the replay wrote steps")
os.killpg(p.pid, signal.SIGINT)
out, err = p.communicate(timeout=600)
check(p.returncode == 130, f"replay after SIGINT exits 130, got {p.returncode}: {err}")
replayed = json.load(open(path("r.json")))
check(replayed["result"] == "interrupted", f"replay result: {replayed['result']}")
check(replayed["steps"] < 20000, f"replay stopped early: {replayed['steps']} steps")
check(junit_cases("r.xml")["t.jsonl"].find("skipped") is not None, "replay JUnit: skipped")

# A second signal ends the process at once; no half-written report is left.
p = start("fuzz", "--backend", "host", "--cases", "100000", "--report", "twice.json")
time.sleep(1.0)
os.killpg(p.pid, signal.SIGINT)
time.sleep(0.2)
os.killpg(p.pid, signal.SIGINT)
began = time.monotonic()
p.communicate(timeout=60)
check(p.returncode == 130, f"second SIGINT: exit {p.returncode}")
if os.path.exists(path("twice.json")):
    json.load(open(path("twice.json")))  # whole, if the first signal's report got written
no_temporaries()

finish("all interrupt checks passed")
