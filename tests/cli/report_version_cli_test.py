"""Reports of version 1 (before the kernel and engine reports shared one schema) are read as
the current version: for each report in DATA_DIR, written by a version-1 build with the command
below, this build runs the same command, and `mambacheck merge` of the old report must equal
`merge` of the new one, field by field. The old reports are kept as they were written, so this
test is the mapping of the old schema onto the new one, checked against real campaigns with
findings (a kernel mutant, a runner mutant) and without (both levels).

usage: report_version_cli_test.py MAMBACHECK WORK_DIR DATA_DIR
"""
import json
import os
import shutil
import subprocess
import sys

from cli_checks import check, finish

MC, WORK, DATA = sys.argv[1], sys.argv[2], sys.argv[3]

# The report file in DATA_DIR and the `fuzz` options that wrote it (with --report and --out).
CAMPAIGNS = {
    "kernel.json": ["--backend", "host", "--level", "kernel", "--seed", "2", "--cases", "60",
                    "--max-size", "40", "--mutant", "vector_tail_dropped", "--keep-going",
                    "--shrink-time", "none", "--out", "out"],
    "engine.json": ["--backend", "host", "--level", "engine", "--seed", "7", "--cases", "30",
                    "--max-size", "30", "--mutant", "postprocess_reset_dropped", "--keep-going",
                    "--shrink-time", "none", "--out", "out"],
    "both.json": ["--backend", "host", "--level", "both", "--seed", "3", "--cases", "20",
                  "--max-size", "20", "--out", "out2"],
}


def run(args):
    return subprocess.run([MC, *args], cwd=WORK, capture_output=True, text=True)


def merged(report, name):
    r = run(["merge", report, "--report", name])
    check(r.returncode in (0, 1), f"merge {report} exits {r.returncode}: {r.stderr}")
    with open(os.path.join(WORK, name)) as f:
        return json.load(f)


def levels(report):
    return [report] if "level" in report else [report[k] for k in ("kernel", "engine") if k in report]


def without_newer_features(old, new):
    """`new` with the coverage features added since version 1 left out of its coverage objects
    (`old`, the report as version 1 wrote it, has no count for them): the same campaign counts
    the same for every feature both builds know."""
    if isinstance(old, dict) and isinstance(new, dict):
        if "counts" in old and "features_reached" in old and "counts" in new:
            counts = {k: v for k, v in new["counts"].items() if k in old["counts"]}
            return {**new, "counts": counts, "features": len(counts),
                    "features_reached": sum(1 for v in counts.values() if v > 0)}
        return {k: without_newer_features(old.get(k), v) for k, v in new.items()}
    return new


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
for name, options in CAMPAIGNS.items():
    old_path = os.path.join(DATA, name)
    with open(old_path) as f:
        old = json.load(f)
    for level in levels(old):
        check("version" not in level, f"{name}: the kept report is of version 1")
    new_name = "new-" + name
    r = run(["fuzz", *options, "--report", new_name])
    check(r.returncode in (0, 1), f"{name}: fuzz exits {r.returncode}: {r.stderr}")
    with open(os.path.join(WORK, new_name)) as f:
        new = json.load(f)
    for level in levels(new):
        check(level.get("version") == 2, f"{name}: the new report's version is {level.get('version')}")
        check("result" not in level, f"{name}: the new report still says 'result'")
    # Both read through this build's catalogue; compared on the features version 1 counted.
    upgraded = without_newer_features(old, merged(old_path, "old-merged-" + name))
    current = without_newer_features(old, merged(new_name, "new-merged-" + name))
    for key in sorted(set(upgraded) | set(current)):
        check(upgraded.get(key) == current.get(key),
              f"{name}: '{key}' differs: old {json.dumps(upgraded.get(key))[:300]} "
              f"new {json.dumps(current.get(key))[:300]}")
    check(any(l["findings"] for l in levels(new)) == (name != "both.json"),
          f"{name}: findings where expected")

finish("report versions: every version-1 report reads as this build's report of the same campaign")
