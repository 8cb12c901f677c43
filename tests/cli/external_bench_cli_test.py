#!/usr/bin/env python3
"""`mambacheck bench --external` end to end, without a GPU: the worker is the Python adapter
running the host reference kernels. The verdicts are checked on the host's virtual clock
(MC_HOST_CLOCK=virtual, devices.py), on which each launch costs a fixed time per program and
the slow variant's delay is added, not slept: the same times on any machine under any load,
so a verdict cannot flake. The wall clock is checked for what does not depend on the machine's
speed. Part PART:
  table       the clean kernels against themselves as the baseline: one row per preset and
              batch size, the JSON report's fields, a ratio of exactly 1, every case passed
              (exit 0); on the wall clock a launch's time is measured (positive, min <= median)
  regression  a candidate that waits 20 ms per launch (the reference's slow_launches variant)
              against the clean baseline is a regression at --max-slowdown 2 (exit 1, every
              case listed); the clean kernels against the slow baseline are not (exit 0)
  refusals    option combinations that cannot run are exit 2 before any worker starts; a
              worker that does not serve the bench protocol is exit 3 in one line; kernels that
              fail a timed launch are exit 1, naming the case

Usage: external_bench_cli_test.py MAMBACHECK PYTHON WORK_DIR PART. Exit 77 (skipped) without
numpy.
"""

import json
import os
import pathlib
import shlex
import sys

from cli_checks import expect, has_numpy, reference_worker as worker, run

REPO = pathlib.Path(__file__).resolve().parents[2]
ADAPTER = REPO / "adapters" / "python"
PRESETS = ["tiny-mamba2", "tiny-mixed"]
REQUESTS = ["4", "16"]
ITERS = "9"
CLOCK = "MC_HOST_CLOCK"  # the clock the workers time launches with (devices.py)


def bench(mambacheck, work, name, external, expected_rc, *extra, presets=PRESETS,
          requests=REQUESTS, iters=ITERS):
    report = work / f"{name}.json"
    report.unlink(missing_ok=True)
    p = run([mambacheck, "bench", "--external", external, "--preset", *presets, "--requests",
             *requests, "--iters", iters, "--out", str(work / name), "--json", str(report),
             *extra], expected_rc)
    return p, (json.loads(report.read_text()) if report.exists() else None)


def rows(stdout):
    return [line for line in stdout.splitlines() if line.split()[:1] and
            line.split()[0] in PRESETS]


def part_table(mambacheck, python, work):
    os.environ[CLOCK] = "virtual"
    p, report = bench(mambacheck, work, "table", worker(python), 0, "--baseline", worker(python),
                      "--max-slowdown", "1.05")
    table = rows(p.stdout)
    expect(len(table) == len(PRESETS) * len(REQUESTS), "one row per preset and batch size",
           p.stdout)
    expect("no case slower than 1.05x the baseline" in p.stdout, "no verdict line", p.stdout)
    expect(report["passed"] is True and report["regressions"] == [], "report: passed",
           json.dumps(report))
    expect(report["launch_kind"] == "postprocess_align" and report["iters"] == int(ITERS),
           "report: kind, iters", json.dumps(report))
    expect([(c["case"], c["requests"]) for c in report["cases"]] ==
           [(p_, int(r)) for p_ in PRESETS for r in REQUESTS], "report: cases in order",
           json.dumps(report))
    for c in report["cases"]:
        expect(c["timing"] == "host virtual clock per launch", "timing", json.dumps(c))
        # Every launch of a case costs the same on the virtual clock, on either side.
        expect(0 < c["candidate_min_us"] == c["candidate_us"] == c["baseline_us"],
               "the same time every launch", json.dumps(c))
        expect(c["ratio"] == 1, "ratio", json.dumps(c))
        expect(c["crossing"] == c["requests"] and c["regression"] is False, "crossing rows",
               json.dumps(c))
        if report["gpu"] is None:  # no CUDA here: this build's kernels are not timed
            expect(c["fused_us"] is None and c["memcpy_us"] is None, "own times", json.dumps(c))
    expect(not any((work / "table").glob("tiny-*")), "case directories left behind")
    expect((work / "table" / "external-worker.log").exists() and
           (work / "table" / "baseline-worker.log").exists(), "worker logs")
    # The wall clock measures each launch; how long one takes depends on the machine.
    os.environ[CLOCK] = "wall"
    p, report = bench(mambacheck, work, "wall", worker(python), 0, presets=PRESETS[:1],
                      requests=REQUESTS[:1], iters="3")
    expect(len(report["cases"]) == 1, "one case", json.dumps(report))
    c = report["cases"][0]
    expect(c["timing"] == "host wall clock per launch", "timing", json.dumps(c))
    expect(0 < c["candidate_min_us"] <= c["candidate_us"], "min <= median", json.dumps(c))


def part_regression(mambacheck, python, work):
    os.environ[CLOCK] = "virtual"
    slow = worker(python, "--variant", "slow_launches")
    p, report = bench(mambacheck, work, "slow", slow, 1, "--baseline", worker(python),
                      "--max-slowdown", "2")
    cases = len(PRESETS) * len(REQUESTS)
    expect(f"REGRESSION: {cases} of {cases} cases slower than 2x the baseline" in p.stdout,
           "no regression verdict", p.stdout)
    expect(sum("REGRESSION (max 2)" in line for line in rows(p.stdout)) == cases,
           "every row marked", p.stdout)
    expect(report["passed"] is False and len(report["regressions"]) == cases and
           all(c["ratio"] > 2 for c in report["cases"]), "report: regressions",
           json.dumps(report))
    expect(all(c["candidate_min_us"] == c["candidate_us"] == c["baseline_us"] + 20000
               for c in report["cases"]),
           "the slow variant not exactly 20 ms a launch slower", json.dumps(report))
    p, report = bench(mambacheck, work, "faster", worker(python), 0, "--baseline", slow,
                      "--max-slowdown", "1.05")
    expect(report["passed"] is True and all(c["ratio"] < 1 for c in report["cases"]),
           "faster than the baseline", json.dumps(report))


def one_line_error(p, rc, needle):
    lines = p.stderr.strip().splitlines()
    expect(len(lines) == 1 and needle in lines[0], f"exit {rc}: expected one line with "
           f"{needle!r}", p.stderr)


def part_refusals(mambacheck, python, work):
    clean = worker(python)
    for extra, needle in ((["--baseline", clean], "--baseline"),
                          (["--max-slowdown", "1.05"], "--max-slowdown")):
        p = run([mambacheck, "bench", *extra], 2)
        one_line_error(p, 2, needle)
    for extra, needle in ((["--baseline", clean, "--max-slowdown", "0.5"], "--max-slowdown"),
                          (["--baseline", clean, "--max-slowdown", "nan"], "--max-slowdown"),
                          (["--engine"], "--engine"), (["--iters", "0"], "--iters"),
                          (["--preset", "no-such-preset"], "no-such-preset"),
                          (["--external-timeout", "0"], "--external-timeout")):
        p = run([mambacheck, "bench", "--external", clean, *extra], 2)
        one_line_error(p, 2, needle)
    no_bench = shlex.join([mambacheck, "worker", "--backend", "host"])
    p = run([mambacheck, "bench", "--external", no_bench, "--preset", "tiny-mamba2",
             "--requests", "4", "--iters", "2", "--out", str(work / "no-bench")], 3)
    one_line_error(p, 3, "does not serve the bench protocol")
    p = run([mambacheck, "bench", "--external", clean, "--baseline", no_bench, "--preset",
             "tiny-mamba2", "--requests", "4", "--iters", "2", "--out", str(work / "no-bench")], 3)
    one_line_error(p, 3, "--baseline worker does not serve the bench protocol")
    raises = work / "raising_kernels.py"
    raises.write_text("from mambacheck_adapter.reference import *\n"
                      "def postprocess_mamba_fused_kernel_body(*args, **flags):\n"
                      "    raise ValueError('deliberately broken')\n"
                      "class Raising:\n"
                      "    def __getitem__(self, grid):\n"
                      "        return postprocess_mamba_fused_kernel_body\n"
                      "postprocess_mamba_fused_kernel = Raising()\n")
    broken = shlex.join([python, "-m", "mambacheck_adapter.worker", "--kernels", str(raises)])
    p = run([mambacheck, "bench", "--external", broken, "--preset", "tiny-mamba2", "--requests",
             "4", "--iters", "2", "--out", str(work / "raises")], 1)
    one_line_error(p, 1, "the --external kernels failed on bench case tiny-mamba2 with 4 "
                         "requests: the kernel raised ValueError: deliberately broken")


def main(argv):
    if len(argv) != 5:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    mambacheck, python, work, part = argv[1], argv[2], pathlib.Path(argv[3]), argv[4]
    if not has_numpy(python):
        print(f"{python} has no numpy: skipped")
        return 77
    work.mkdir(parents=True, exist_ok=True)
    os.environ["PYTHONPATH"] = str(ADAPTER)
    {"table": part_table, "regression": part_regression,
     "refusals": part_refusals}[part](mambacheck, python, work)
    print(f"external bench {part}: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
