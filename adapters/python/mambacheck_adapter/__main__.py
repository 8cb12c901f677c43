"""Run case directories on the kernels under test, and compare with their expected results.

    python3 -m mambacheck_adapter CASE_DIR... --kernels MODULE_OR_FILE [--variant NAME[,NAME2]]
            [--device cuda|host] [--out DIR] [--check]

Exit status: 0 every case ran (and matched, with --check); 1 a mismatch, or a kernel that
raised or wrote outside its buffers; 2 bad usage or a case directory that cannot be read;
3 the kernels or the device cannot be loaded.
"""

import argparse
import pathlib
import sys
import tempfile

from . import casefile, compare, devices, kernels, launch


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python3 -m mambacheck_adapter",
                                description="Run mambacheck case directories on external "
                                            "kernels; --check compares with expected/")
    p.add_argument("cases", nargs="+", help="case directories (mambacheck export)")
    p.add_argument("--kernels", required=True, help="module path or .py file with the kernels")
    p.add_argument("--variant", help="call the module's select_variant(NAME); NAME,NAME2 "
                                     "calls select_variant(NAME, NAME2) (two bugs at once)")
    p.add_argument("--device", help="cuda or host (default: the module's DEVICE, else cuda)")
    p.add_argument("--out", help="write each result to OUT/<case name> (mambacheck case --out "
                                 "format)")
    p.add_argument("--check", action="store_true",
                   help="compare with CASE_DIR/expected (the oracle's result); exit 1 on a "
                        "difference")
    return p.parse_args(argv)


def run_one(case_dir, module, device, out_root, check):
    """Returns 0 (ran, matched), 1 (mismatch or kernel failure); raises CaseError."""
    case = casefile.Case(case_dir)
    try:
        result = launch.run_case(case, module, device)
    except launch.LaunchError as e:
        print(f"{case_dir}: {case.kind}: ERROR {e}")
        return 1
    with tempfile.TemporaryDirectory(prefix="mambacheck-result-") as tmp:
        out = pathlib.Path(out_root) / case.dir.name if out_root else pathlib.Path(tmp)
        casefile.write_result(case, result, out)
        copies = sum(len(p) for p in result.arena_patches.values())
        print(f"{case_dir}: {case.kind} ({case.num_reqs} rows): {result.status}, "
              f"{copies} changed ranges" + (f"; result in {out}" if out_root else ""))
        if not check:
            return 0
        if not casefile.has_result(case.dir):
            raise casefile.CaseError(f"{case.dir}: --check: no expected/ result to compare with")
        expected = casefile.StoredResult(case, case.dir)
        actual = casefile.StoredResult(case, out)
        difference = compare.first_difference(case, expected, actual)
    if difference:
        print(f"MISMATCH against the stored result: {difference}")
        return 1
    print("matches the stored result exactly")
    return 0


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        module = kernels.load_kernels(args.kernels, args.variant)
        device = devices.make_device(args.device or getattr(module, "DEVICE", "cuda"))
    except Exception as e:  # noqa: BLE001: the environment: one line, exit 3
        print(f"mambacheck_adapter: unavailable: {type(e).__name__}: {e}", file=sys.stderr)
        return 3
    status = 0
    for case_dir in args.cases:
        try:
            status = max(status, run_one(case_dir, module, device, args.out, args.check))
        except casefile.CaseError as e:
            print(f"mambacheck_adapter: error: {e}", file=sys.stderr)
            return 2
    return status


if __name__ == "__main__":
    sys.exit(main())
