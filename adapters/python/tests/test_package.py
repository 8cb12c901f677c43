"""Tests of the package as pip installs it (pyproject.toml): its console entry points name
functions that exist, its version is the mambacheck binary's, and a wheel built offline with the
system's setuptools holds the adapter and the recorder and nothing else.

The wheel test needs pip, setuptools >= 61 and wheel (Debian: python3-pip, python3-setuptools,
python3-wheel; scripts/setup installs them) and fails without them, rather than pass having
checked nothing; it builds from a copy, so the tree stays clean.
"""

import configparser
import importlib
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile

HERE = pathlib.Path(__file__).resolve().parent
PACKAGE_ROOT = HERE.parent
sys.path.insert(0, str(PACKAGE_ROOT))

import mambacheck_adapter  # noqa: E402

MAMBACHECK = os.environ.get("MAMBACHECK") or shutil.which("mambacheck") or ""
SCRIPTS = {"mambacheck-worker": "mambacheck_adapter.worker:main",
           "mambacheck-adapter": "mambacheck_adapter.__main__:main"}


def pyproject():
    try:
        import tomllib
    except ImportError:
        raise unittest.SkipTest("no tomllib (Python < 3.11): pyproject.toml not read")
    with open(PACKAGE_ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


def wheel_tools_missing():
    """Why a wheel cannot be built offline here, or None."""
    probe = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True)
    if probe.returncode != 0:
        return f"{sys.executable} has no pip"
    try:
        import setuptools
        import wheel  # noqa: F401
    except ImportError as e:
        return f"{sys.executable} lacks {e.name}"
    if int(setuptools.__version__.split(".")[0]) < 61:
        return f"setuptools {setuptools.__version__} predates pyproject.toml metadata (61)"
    return None


class Metadata(unittest.TestCase):
    def test_entry_points_name_functions(self):
        project = pyproject()["project"]
        self.assertEqual(project["scripts"], SCRIPTS)
        for target in SCRIPTS.values():
            module, function = target.split(":")
            self.assertTrue(callable(getattr(importlib.import_module(module), function)), target)

    def test_version_is_the_binarys(self):
        if not MAMBACHECK:
            self.skipTest("no mambacheck binary: set MAMBACHECK or put it on PATH")
        out = subprocess.run([MAMBACHECK, "--version"], capture_output=True, text=True,
                             check=True).stdout
        self.assertEqual(out.strip(), f"mambacheck {mambacheck_adapter.__version__}")


class Wheel(unittest.TestCase):
    def test_offline_wheel_holds_adapter_and_recorder(self):
        missing = wheel_tools_missing()
        if missing:
            self.fail(f"{missing}: no wheel can be built offline (scripts/setup installs "
                      f"python3-pip, python3-setuptools and python3-wheel)")
        with tempfile.TemporaryDirectory(prefix="mc-wheel-test-") as tmp:
            source = pathlib.Path(tmp) / "src"
            shutil.copytree(PACKAGE_ROOT, source,
                            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
            out = pathlib.Path(tmp) / "dist"
            build = subprocess.run(
                [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps",
                 "--no-index", "--wheel-dir", str(out), str(source)],
                capture_output=True, text=True)
            self.assertEqual(build.returncode, 0, build.stdout + build.stderr)
            wheels = list(out.glob("*.whl"))
            self.assertEqual([w.name for w in wheels],
                             [f"mambacheck_adapter-{mambacheck_adapter.__version__}-py3-none-any.whl"])
            with zipfile.ZipFile(wheels[0]) as z:
                names = set(z.namelist())
                dist_info = f"mambacheck_adapter-{mambacheck_adapter.__version__}.dist-info"
                entry_points = z.read(f"{dist_info}/entry_points.txt").decode()
        code = {n for n in names if not n.startswith(dist_info + "/")}
        expected = {f"mambacheck_adapter/{p.name}"
                    for p in (PACKAGE_ROOT / "mambacheck_adapter").glob("*.py")}
        expected.add("mambacheck_recorder.py")
        self.assertEqual(code, expected)
        parser = configparser.ConfigParser()
        parser.read_string(entry_points)
        self.assertEqual(dict(parser["console_scripts"]), SCRIPTS)


if __name__ == "__main__":
    unittest.main(verbosity=2)
