"""Loading the kernels under test from a module the user names.

`--kernels` takes a dotted module path (`vllm.v1.worker.mamba_utils`, importable from
sys.path) or the path of a .py file. The module provides the seed's kernels by name
(launch.FAMILY_KERNELS, launch.COPY_PLAN_KERNEL); any it lacks leaves those launch kinds out. With `--variant NAME` the
module's `select_variant(NAME)` is called and its return value provides the kernels instead
(the adapter's own test kernels use this for their deliberately broken variants). With
`--variant A,B` it is `select_variant(A, B)`: one kernels module carrying two bugs at once,
e.g. a deterministic one and a racy one; a module whose select_variant takes one name
refuses that.
"""

import importlib
import importlib.util
import inspect
import pathlib
import sys

VARIANT_NAMES_MAX = 2  # names one --variant may combine


class KernelsError(Exception):
    """The kernels module cannot be loaded or has nothing to run."""


def load_module(spec):
    if spec.endswith(".py") or "/" in spec:
        path = pathlib.Path(spec).resolve()
        if not path.is_file():
            raise KernelsError(f"--kernels: no such file {spec}")
        name = f"mambacheck_kernels_{path.stem}"
        module_spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        sys.path.insert(0, str(path.parent))  # its own imports of neighbouring files
        module_spec.loader.exec_module(module)
        return module
    try:
        return importlib.import_module(spec)
    except ImportError as e:
        raise KernelsError(f"--kernels: cannot import {spec}: {e}") from None


def variant_names(variant):
    """`--variant`'s names: one, or up to VARIANT_NAMES_MAX joined by commas."""
    names = variant.split(",")
    if any(not n.strip() for n in names) or len(names) > VARIANT_NAMES_MAX:
        raise KernelsError(f"--variant {variant}: expected NAME or up to {VARIANT_NAMES_MAX} "
                           f"names joined by commas")
    names = [n.strip() for n in names]
    if len(set(names)) != len(names):
        raise KernelsError(f"--variant {variant}: a name given twice")
    return names


def has_variants(module):
    """Whether `--variant NAME` can select broken variants of the module (select_variant)."""
    return callable(getattr(module, "select_variant", None))


def load_kernels(spec, variant=None):
    """The object whose attributes are the kernels (a module, or select_variant's result)."""
    return select_kernels(load_module(spec), spec, variant)


def select_kernels(module, spec, variant=None):
    """The kernels of a loaded module: itself, or select_variant's result for `variant`."""
    if variant is None:
        return module
    names = variant_names(variant)
    select = getattr(module, "select_variant", None)
    if select is None:
        raise KernelsError(f"--variant {variant}: {spec} has no select_variant(name)")
    if len(names) > 1:
        try:
            inspect.signature(select).bind(*names)
        except TypeError:
            raise KernelsError(f"--variant {variant}: {spec}'s select_variant takes one "
                               f"name") from None
        except ValueError:  # no signature to inspect (a builtin): let the call decide
            pass
    try:
        return select(*names)
    except (KeyError, ValueError) as e:
        raise KernelsError(f"--variant {variant}: {e}") from None
