"""--jobs N: cases run N at a time in case workers (processes of mambacheck of their own), and the
report is the same for any N (byte for byte: counts, coverage, findings and their shrunk
counterexamples, with --repeat too) and the same as with --no-isolate (every case in the
campaign's process); the JUnit file differs only in its times. A kernel that crashes its worker
is a finding and a fresh worker runs the next cases; a case past --case-timeout is a finding and
its worker is replaced. Under a time budget the cases run are a prefix of the campaign. On a
terminal the progress line shows cases/s, findings so far and the time left. Values that cannot
run (--jobs, --devices, --workers) are one line, exit 2.

usage: jobs_cli_test.py MAMBACHECK WORK_DIR
"""
import json
import os
import pty
import re
import shutil
import subprocess
import sys

from cli_checks import check, finish

MC, WORK = sys.argv[1], sys.argv[2]


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

# The mutant campaigns shrink with no time bound: a shrink cut by the clock stops at a point that
# depends on the machine's load, and the reports must be equal on any machine.
campaigns = {
    "kernel": ["fuzz", "--backend", "host", "--cases", "80", "--max-size", "40"],
    "kernel-mutant": ["fuzz", "--backend", "host", "--cases", "60", "--max-size", "30",
                      "--mutant", "reset_races_other_programs", "--keep-going", "--repeat", "2",
                      "--shrink-time", "none"],
    "engine": ["fuzz", "--level", "engine", "--backend", "host", "--cases", "60",
               "--max-size", "40"],
    "engine-mutant": ["fuzz", "--level", "engine", "--backend", "host", "--cases", "40",
                      "--max-size", "20", "--mutant", "skip_cleanup_of_resumed", "--keep-going",
                      "--repeat", "2", "--shrink-time", "none"],
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

# The cases in workers are the cases in the campaign's process: --no-isolate gives the same report.
for name in ("kernel", "engine"):
    r = run([*campaigns[name], "--no-isolate", "--out", f"{name}-out", "--report",
             f"{name}-here.json"])
    check(r.returncode == 0, f"{name} --no-isolate: exit {r.returncode}: {r.stderr}")
    check(read(f"{name}-here.json") == read(f"{name}-1.json"),
          f"{name}: the report of --no-isolate differs from the workers'")

# A kernel that reads out of bounds kills its worker: a finding, and a fresh worker runs the
# cases after it. Whether a read past a table faults depends on what is mapped beside it, which
# depends on what the worker ran before: which cases crash (and so the findings and the coverage
# of the crashed cases) may differ between runs; the cases run may not.
crash_args = ["fuzz", "--backend", "host", "--cases", "40", "--max-size", "20", "--mutant",
              "table_row_from_slot", "--keep-going", "--reruns", "1"]
crash = {}
for jobs in (1, 2):
    r = run([*crash_args, "--jobs", str(jobs), "--out", f"crash-{jobs}-out", "--report",
             f"crash-{jobs}.json"])
    check(r.returncode == 1, f"crash --jobs {jobs}: exit {r.returncode}: {r.stderr}")
    crash[jobs] = json.load(open(path(f"crash-{jobs}.json")))
for jobs in (1, 2):
    report = crash[jobs]
    check(report["cases"] == 40, f"crash --jobs {jobs}: {report['cases']} cases, not 40")
    check(report["findings"], f"crash --jobs {jobs}: no finding")
    for f in report["findings"]:
        if f["difference"] != "crash":
            continue
        check(re.fullmatch(r"the backend crashed: killed by SIG(SEGV|BUS) \([a-z :]+\) at address "
                           r"0x[0-9a-f]+ \(.+\)", f["failure"]) is not None,
              f"crash --jobs {jobs}: failure {f['failure']!r}")
        check(":backend-error:crash:" in f["signature"], f"crash: signature {f['signature']}")
for key in ("cases_by_kind", "cases_by_size_class"):
    check(crash[1][key] == crash[2][key], f"crash: '{key}' differs between --jobs 1 and 2")

# A case past --case-timeout: its worker is killed and replaced, the campaign goes on. Sizes 90 to
# 99 hold grid cases of up to 16 MiB of arenas, far past 2 ms; which of them pass is timing.
r = run(["fuzz", "--backend", "host", "--cases", "100", "--resume-from", "90", "--jobs", "2",
         "--case-timeout", "0.002", "--keep-going", "--reruns", "0", "--out", "timeout-out",
         "--report", "timeout.json"])
check(r.returncode == 1, f"--case-timeout: exit {r.returncode}: {r.stderr}")
timeouts = json.load(open(path("timeout.json")))
check(timeouts["cases"] == 10, f"--case-timeout: {timeouts['cases']} cases, not 10")
timed_out = [f for f in timeouts["findings"] if f["difference"] == "timeout"]
check(timed_out and all(f["failure"] == "the backend crashed: exceeded 0.002 s; killed"
                        for f in timed_out), f"--case-timeout: {timeouts['findings']}")

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
refused(["--backend", "host", "--jobs", "2", "--no-isolate"],
        "--jobs 2: --no-isolate runs one case at a time in this process")
refused(["--backend", "host", "--workers", "2"],
        "--workers: starts adapter workers for --external; the host and cuda backends take --jobs N")
refused(["--external", "cat", "--workers", "0"], "--workers: expected 1..1024, got 0")
refused(["--external", "cat", "--jobs", "2", "--workers", "3"],
        "--jobs 2 and --workers 3: with --external both count the adapter workers; give one")
refused(["--backend", "host", "--devices", "0"],
        "--devices: the host backend runs on the CPU; --devices picks the GPUs of --backend cuda "
        "and --external")
refused(["--external", "cat", "--devices", "0,x"],
        "--devices: expected all or device indices like 0,1, got '0,x'")
refused(["--external", "cat", "--devices", "0,0"], "--devices: device 0 is listed twice in '0,0'")
refused(["--external", "cat", "--devices", "0,"],
        "--devices: expected all or device indices like 0,1, got '0,'")
# A build without CUDA cannot count the GPUs; one with CUDA counts them (parallel_option_test
# checks indices against a count) and, where it sees some, goes on to start `cat`, which never
# greets: exit 3.
r = run(["fuzz", "--cases", "3", "--external", "cat", "--external-timeout", "1", "--devices",
         "all", "--out", "devices-out"])
check(r.returncode in (2, 3), f"--devices all: exit {r.returncode}: {r.stderr}")
if r.returncode == 2:
    check(r.stderr.strip() in (
        "mambacheck: error: --devices all: this build has no CUDA and cannot count the GPUs; "
        "list them (--devices 0,1)",
        "mambacheck: error: --devices all: this process sees no CUDA device"),
        f"--devices all: {r.stderr}")
refused(["--external", "cat", "--no-isolate", "--devices", "0"],
        "--devices: needs case workers; --no-isolate runs every case in this process")
refused(["--external", "cat", "--no-isolate", "--workers", "2"],
        "--workers: needs case workers; --no-isolate runs every case in this process")
r = run(["fuzz", "--backend", "host", "--cases", "5", "--max-size", "5", "--no-isolate"])
check(r.returncode == 0 and "jobs" not in r.stdout, f"--no-isolate runs one at a time: {r.stdout}")

finish("all jobs checks passed")
