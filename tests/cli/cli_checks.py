"""What the Python CLI tests share: running mambacheck with an expected exit code, a check that
fails with the output it concerns, checks that are counted and reported at the end, and the
adapter's worker on the host reference kernels."""

import shlex
import subprocess
import sys


def run(args, expected_rc, timeout=900, env=None):
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env)
    if p.returncode != expected_rc:
        raise AssertionError(f"{shlex.join(args)}: exit {p.returncode}, expected {expected_rc}\n"
                             f"--- stdout\n{p.stdout}\n--- stderr\n{p.stderr}")
    return p


def expect(condition, what, output=""):
    if not condition:
        raise AssertionError(f"{what}\n{output}")


def reference_worker(python, *extra):
    """The adapter's worker on its host reference kernels (mambacheck_adapter.reference)."""
    return shlex.join([python, "-m", "mambacheck_adapter.worker", "--kernels",
                       "mambacheck_adapter.reference", *extra])


def has_numpy(python):
    """Whether `python` imports numpy (the adapter's one dependency): the tests that run the
    adapter report skipped (exit 77) without it."""
    return subprocess.run([python, "-c", "import numpy"], capture_output=True).returncode == 0


# The checks a test has failed so far: a failed check is printed and the test goes on, so one run
# names every failure; finish() then exits 1 if there was any.
failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what)


def finish(passed_line):
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
    print(passed_line)
