#!/usr/bin/env python3
"""Runs the adapter's numpy-only tests: run_tests.py MAMBACHECK. Exit 77 (skipped) where
numpy is missing; else unittest's verdict (0 passed, 1 failed)."""

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
    suite = unittest.defaultTestLoader.discover(str(here), pattern="test_*.py")
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    sys.exit(0 if result.wasSuccessful() else 1)
