"""A kernel that faults in a decision body, at the engine level on the host backend (the
kernel mutant precopy_reads_unbound_idx_mapping: V1's fused precopy reads through a null
idx_mapping): every case runs, the fault is one `crash` finding with a shrunk trace, a steps view
and a picture, the campaign goes on past it (--keep-going) and exits 1. Nothing of the code
under test may run in the campaign's own process: a fault there would end it with SIGSEGV and
no report. The saved trace holds through the clean kernels.

usage: engine_decision_fault_cli_test.py MAMBACHECK WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys

from cli_checks import check, finish

MC, WORK = sys.argv[1], sys.argv[2]
MUTANT = "precopy_reads_unbound_idx_mapping"
CASES = 40


def run(args):
    return subprocess.run([MC, *args], cwd=WORK, capture_output=True, text=True, timeout=900)


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
report_path = os.path.join(WORK, "report.json")
done = run(["fuzz", "--level", "engine", "--backend", "host", "--mutant", MUTANT, "--seed", "1",
            "--cases", str(CASES), "--max-size", "30", "--keep-going", "--jobs", "2",
            "--out", os.path.join(WORK, "mc-out"), "--report", report_path])
print(done.stdout[-3000:], done.stderr[-3000:])
check(done.returncode == 1, f"campaign: exit {done.returncode}, expected 1 (a finding)")
check(os.path.exists(report_path), "campaign: no report written")
if os.path.exists(report_path):
    with open(report_path) as f:
        report = json.load(f)
    check(report["cases"] == CASES, f"campaign: {report['cases']} cases ran, expected {CASES}")
    crashes = [f for f in report["findings"] if f["difference"] == "crash"]
    check(len(crashes) == 1, f"campaign: {len(crashes)} crash findings, expected 1: "
                             f"{[f['signature'] for f in report['findings']]}")
    if crashes:
        crash = crashes[0]
        check(crash["classification"] == "backend-error",
              f"crash classified {crash['classification']}")
        # Killed by SIGSEGV, or under AddressSanitizer its report and exit 1.
        check("the backend crashed" in crash["failure"],
              f"crash text names no crash: {crash['failure']}")
        cx = crash.get("counterexample", {})
        trace = cx.get("shrunk_trace", "")
        check(trace and os.path.exists(trace), f"no shrunk trace: {trace!r}")
        check(cx.get("steps_view") and os.path.getsize(cx["steps_view"]) > 0,
              f"no steps view: {cx.get('steps_view')!r}")
        check(cx.get("picture") and os.path.exists(cx["picture"]), f"no picture: {cx.get('picture')!r}")
        if trace and os.path.exists(trace):
            clean = run(["replay", trace, "--backend", "host"])
            check(clean.returncode == 0, f"replay through the clean kernels: exit "
                                         f"{clean.returncode}: {clean.stdout[-500:]}")

finish("all checks passed")
