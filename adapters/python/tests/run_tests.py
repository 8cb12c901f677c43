#!/usr/bin/env python3
"""Runs the package's tests (adapter and recorder; numpy only): run_tests.py MAMBACHECK.

Under pytest where this python has it, else plainly with unittest: the same test files either
way. Exit 77 (skipped) where numpy is missing; else the verdict (0 passed, 1 failed)."""

import os
import pathlib
import sys
import unittest

if __name__ == "__main__":
    try:
        import numpy  # noqa: F401
    except ImportError:
        print(f"{sys.executable} has no numpy: skipped")
        sys.exit(77)
    if len(sys.argv) != 2:
        print("usage: run_tests.py MAMBACHECK", file=sys.stderr)
        sys.exit(2)
    os.environ["MAMBACHECK"] = sys.argv[1]
    here = pathlib.Path(__file__).resolve().parent
    try:
        import pytest
    except ImportError:
        pytest = None
    if pytest is not None:
        print(f"running under pytest {pytest.__version__}", flush=True)
        # No cache directory written into the tree; 0 passed, anything else failed.
        status = pytest.main(["-v", "-p", "no:cacheprovider", str(here)])
        sys.exit(0 if status == 0 else 1)
    print("pytest not found: running under unittest", flush=True)
    suite = unittest.defaultTestLoader.discover(str(here), pattern="test_*.py")
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    sys.exit(0 if result.wasSuccessful() else 1)
