"""--jobs N: cases run N at a time, each in a forked child, and the report is the same for any N
(byte for byte: counts, coverage, findings and their shrunk counterexamples, with --repeat too);
the JUnit file differs only in its times. Under a time budget the cases run are a prefix of the
campaign. On a terminal the progress line shows cases/s, findings so far and the time left.
Values that cannot run are one line, exit 2.

usage: jobs_cli_test.py MAMBACHECK WORK_DIR
"""
import json
import os
import pty
import re
import shutil
import subprocess
import sys

MC, WORK = sys.argv[1], sys.argv[2]
failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what)


def path(name):
    return os.path.join(WORK, name)


def run(args):
    return subprocess.run([MC, *args], cwd=WORK, capture_output=True, text=True, timeout=600)


def read(name):
    with open(path(name), "rb") as f:
        return f.read()


def junit_without_times(name):
    return re.sub(r' time="[0-9.]+"', "", read(name).decode())


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)

campaigns = {
    "kernel": ["fuzz", "--backend", "host", "--cases", "80", "--max-size", "40"],
    "kernel-mutant": ["fuzz", "--backend", "host", "--cases", "60", "--max-size", "30",
                      "--mutant", "reset_races_other_programs", "--keep-going", "--repeat", "2"],
    "engine": ["fuzz", "--level", "engine", "--backend", "host", "--cases", "60",
               "--max-size", "40"],
    "engine-mutant": ["fuzz", "--level", "engine", "--backend", "host", "--cases", "40",
                      "--max-size", "20", "--mutant", "skip_cleanup_of_resumed", "--keep-going",
                      "--repeat", "2"],
}
for name, args in campaigns.items():
    codes = set()
    for jobs in (1, 2, 3):
        r = run([*args, "--jobs", str(jobs), "--out", f"{name}-out", "--report",
                 f"{name}-{jobs}.json", "--junit", f"{name}-{jobs}.xml"])
        codes.add(r.returncode)
        check(r.returncode in (0, 1), f"{name} --jobs {jobs}: exit {r.returncode}: {r.stderr}")
        check((f", {jobs} jobs:" in r.stdout) == (jobs > 1), f"{name} --jobs {jobs}: {r.stdout[:200]}")
    check(len(codes) == 1, f"{name}: exit codes {codes}")
    for jobs in (2, 3):
        check(read(f"{name}-{jobs}.json") == read(f"{name}-1.json"),
              f"{name}: the report of --jobs {jobs} differs from --jobs 1")
        check(junit_without_times(f"{name}-{jobs}.xml") == junit_without_times(f"{name}-1.xml"),
              f"{name}: the JUnit of --jobs {jobs} differs from --jobs 1")
    report = json.load(open(path(f"{name}-1.json")))
    if name.endswith("mutant"):
        check(len(report["findings"]) >= 2, f"{name}: findings {report['findings']}")

# Under a time budget the cases that ran are the campaign's first: the same report as --cases N.
r = run(["fuzz", "--backend", "host", "--max-size", "40", "--time-budget", "3s", "--jobs", "2",
         "--report", "budget.json", "--out", "budget-out"])
check(r.returncode == 0, f"--time-budget with --jobs: exit {r.returncode}: {r.stderr}")
budget = json.load(open(path("budget.json")))
done = budget["cases"]
check(done > 0, "the budgeted campaign ran cases")
# (a budgeted campaign keeps going after a finding)
r = run(["fuzz", "--backend", "host", "--cases", str(done), "--max-size", "40", "--jobs", "1",
         "--keep-going",
         "--report", "prefix.json", "--out", "budget-out"])
prefix = json.load(open(path("prefix.json")))
for key in sorted((set(budget) | set(prefix)) - {"cases_max"}):
    check(budget.get(key) == prefix.get(key), f"budget vs its first {done} cases: '{key}' differs")

# The progress line, on a terminal: cases/s, findings so far, time left of the budget.
master, slave = pty.openpty()
p = subprocess.Popen([MC, "fuzz", "--backend", "host", "--max-size", "30", "--time-budget", "4s",
                      "--mutant", "reset_races_other_programs", "--out", "progress-out"],
                     cwd=WORK, stdout=subprocess.DEVNULL, stderr=slave)
os.close(slave)
seen = b""
while True:
    try:
        chunk = os.read(master, 4096)
    except OSError:
        break
    if not chunk:
        break
    seen += chunk
p.wait(timeout=120)
os.close(master)
text = seen.decode(errors="replace")
check(re.search(r"fuzz kernel: \d+ \([0-9.]+/s, [0-9.]+ s, \d+ findings?, \d s left\)", text)
      is not None, f"progress line: {text[-400:]!r}")


# --- Values that cannot run: one line, exit 2.
def refused(args, expect):
    r = run(["fuzz", "--cases", "3", "--report", "refused.json", *args])
    lines = r.stderr.strip().splitlines()
    check(r.returncode == 2, f"{args}: exit {r.returncode}: {r.stderr}")
    check(len(lines) == 1 and expect in r.stderr, f"{args}: one line with '{expect}': {r.stderr}")
    check(not os.path.exists(path("refused.json")), f"{args}: nothing ran")


refused(["--backend", "host", "--jobs", "0"], "--jobs: expected 1..1024, got 0")
refused(["--backend", "host", "--jobs", "1025"], "--jobs: expected 1..1024, got 1025")
refused(["--backend", "host", "--jobs", "2", "--no-isolate"], "--no-isolate runs one case at a time")
refused(["--external", "cat", "--jobs", "2"], "--external runs one case at a time")
r = run(["fuzz", "--backend", "host", "--cases", "5", "--max-size", "5", "--no-isolate"])
check(r.returncode == 0 and "jobs" not in r.stdout, f"--no-isolate runs one at a time: {r.stdout}")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("all jobs checks passed")
