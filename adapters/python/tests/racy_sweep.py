#!/usr/bin/env python3
"""Reruns case directories on kernel variants and counts the runs whose result differs from
the stored one: how often a racy variant's race shows on a case, and that the clean kernels
never differ. One process for every case and variant, so torch and triton load once (a
worker per run costs seconds each).

    python3 racy_sweep.py --kernels MODULE_OR_FILE --variant racy_reset \\
        --variant clean@2 --runs 8 CASE_DIR...

A variant is NAME or NAME,NAME2 (two bugs at once), with @RUNS for a count of its own.

Prints one line per case and variant: `CASE_DIR VARIANT failed F of R (ROWS rows, TENSORS
tensors)`, then the first difference of the first failing run, indented. Exit 0 when every
line was printed (what the counts mean is the caller's), 2 on bad usage, 3 when the kernels
or the device cannot be loaded.
"""

import argparse
import pathlib
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from mambacheck_adapter import casefile, compare, devices, kernels, launch  # noqa: E402

RUNS_MAX = 10000


def parse_args(argv):
    p = argparse.ArgumentParser(prog="racy_sweep.py", description=__doc__.splitlines()[0])
    p.add_argument("cases", nargs="+", help="case directories (mambacheck export)")
    p.add_argument("--kernels", required=True, help="module path or .py file with the kernels")
    p.add_argument("--variant", action="append", required=True,
                   help="a variant (NAME or NAME,NAME2, optionally @RUNS) to rerun; repeat "
                        "for several")
    p.add_argument("--runs", type=int, default=8, help="runs per case and variant (default 8)")
    p.add_argument("--device", help="cuda or host (default: the module's DEVICE, else cuda)")
    args = p.parse_args(argv)
    args.plan = []
    for spec in args.variant:
        name, _, count = spec.partition("@")
        runs = args.runs
        if count:
            try:
                runs = int(count)
            except ValueError:
                p.error(f"--variant {spec}: RUNS after @ is not a number")
        if not 1 <= runs <= RUNS_MAX:
            p.error(f"--variant {spec}: runs expected 1..{RUNS_MAX}, got {runs}")
        args.plan.append((name, runs))
    return args


def failing_runs(case, module, device, runs, scratch):
    """(runs that differ from the stored result, the first difference or None)."""
    expected = casefile.StoredResult(case, case.dir)
    failed, first = 0, None
    for run in range(runs):
        out = pathlib.Path(scratch) / f"run-{run}"
        try:
            result = launch.run_case(case, module, device)
        except launch.LaunchError as e:
            failed += 1
            first = first or f"ERROR {e}"
            continue
        casefile.write_result(case, result, out)
        difference = compare.first_difference(case, expected, casefile.StoredResult(case, out))
        device.release()
        if difference:
            failed += 1
            first = first or difference
    return failed, first


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        modules = [(v, runs, kernels.load_kernels(args.kernels, v)) for v, runs in args.plan]
        device = devices.make_device(args.device or getattr(modules[0][2], "DEVICE", "cuda"))
    except Exception as e:  # noqa: BLE001: the environment: one line, exit 3
        print(f"racy_sweep: unavailable: {type(e).__name__}: {e}", file=sys.stderr)
        return 3
    for case_dir in args.cases:
        try:
            case = casefile.Case(case_dir)
        except casefile.CaseError as e:
            print(f"racy_sweep: error: {e}", file=sys.stderr)
            return 2
        for variant, runs, module in modules:
            with tempfile.TemporaryDirectory(prefix="racy-sweep-") as scratch:
                failed, first = failing_runs(case, module, device, runs, scratch)
            print(f"{case_dir} {variant} failed {failed} of {runs} ({case.num_reqs} rows, "
                  f"{len(case.tensors)} tensors)", flush=True)
            if first:
                print(f"  {first[:300]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
