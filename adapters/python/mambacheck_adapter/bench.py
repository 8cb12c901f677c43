"""Bench mode of the worker: the time one launch of the kernels under test takes, for
`mambacheck bench --external` (README.md, "Bench protocol").

A message `bench {"cases": [CASE_DIR, ...], "iters": N}` names case directories of one launch
kind that differ only in their block tables and per-request arrays: input sets over disjoint
blocks of the same arenas, rotated between timed launches so that no launch finds the one
before it in L2. The first case's arenas are built once and shared by every set. Before each
timed launch the set's per-request arrays are restored from a pristine copy (a kernel may
update them in place, and the next launch must decide as the first did), outside the timed
span. The answer is one JSON line:
`{"median_us": F, "min_us": F, "iters": N, "sets": K, "timing": "...", "device": "cuda"}`.
"""

import json
import statistics

from . import casefile, launch

WARMUP_LAUNCHES = 3  # per set: Triton compiles on the first launch
ITERS_MAX = 100000
SETS_MAX = 16


class BenchError(Exception):
    """A message this worker cannot act on (malformed, cases that do not fit together)."""


class TimedSet:
    """One input set: a Launch over shared arenas and pristine copies of its arrays."""

    def __init__(self, case, device, arenas):
        self.launch = launch.Launch(case, device, arenas)
        self.pristine = {name: device.clone(a.buf) for name, a in self.launch.arrays.items()}

    def restore(self, device):
        for name, a in self.launch.arrays.items():
            device.copy(a.buf, self.pristine[name])


def parse(text):
    try:
        message = json.loads(text)
    except json.JSONDecodeError as e:
        raise BenchError(f"bench: not JSON: {e}") from e
    if not isinstance(message, dict):
        raise BenchError("bench: expected a JSON object")
    cases, iters = message.get("cases"), message.get("iters")
    if not isinstance(cases, list) or not 1 <= len(cases) <= SETS_MAX or \
            not all(isinstance(c, str) for c in cases):
        raise BenchError(f"bench: cases: expected 1 to {SETS_MAX} case directories")
    if not isinstance(iters, int) or isinstance(iters, bool) or not 1 <= iters <= ITERS_MAX:
        raise BenchError(f"bench: iters: expected an integer in 1..{ITERS_MAX}")
    return cases, iters


def answer(text, kernels, device):
    cases, iters = parse(text)
    loaded = [casefile.Case(path) for path in cases]
    first = loaded[0]
    for path, case in zip(cases[1:], loaded[1:]):
        if case.kind != first.kind or case.arena_specs != first.arena_specs:
            raise BenchError(f"bench: {path}: not an input set of {cases[0]} (its kind or "
                             f"arenas differ)")
    arenas = [launch.DeviceArena(device, first, i) for i in range(len(first.arena_specs))]
    sets = [TimedSet(case, device, arenas) for case in loaded]
    try:
        for timed in sets:
            for _ in range(WARMUP_LAUNCHES):
                timed.restore(device)
                timed.launch.run(kernels)
        device.synchronize()
        times, timing = device.time_launches(
            lambda i: sets[i % len(sets)].launch.run(kernels),
            lambda i: sets[i % len(sets)].restore(device), iters)
    except launch.LaunchError:
        raise
    except Exception as e:  # the kernel under test raised
        raise launch.LaunchError(f"the kernel raised {type(e).__name__}: "
                                 f"{str(e).strip().splitlines()[0] if str(e).strip() else ''}") \
            from e
    finally:
        del sets, arenas
        device.release(force=True)
    return json.dumps({"median_us": statistics.median(times), "min_us": min(times),
                       "iters": iters, "sets": len(cases), "timing": timing,
                       "device": device.name})
