"""Worker mode: a long-lived process that runs case directories on the kernels under test.

    python3 -m mambacheck_adapter.worker --kernels MODULE_OR_FILE [--variant NAME[,NAME2]]
            [--device cuda|host] [--results DIR] [--engine-arenas shared|device]

Protocol (one line each way per case, UTF-8, '\\n'-terminated; README.md, "Worker protocol"):
- Once started and the kernels loaded, the worker writes one greeting line:
  `mambacheck-worker 1 kinds=KIND,KIND,... device=NAME variants=0|1 engine=1 bench=1
  [forward=ssm,conv,scan]`
  (the launch kinds its kernels cover; the device they run on; variants=1: the module has
  select_variant, so --variant NAME starts its broken variants, variants=0: it has none, and
  `mambacheck gate --external` proves liveness on the adapter's test kernels instead;
  engine=1 and bench=1: it also serves the engine and bench protocols; forward=: the
  forward's state kernels the module provides, which engine runs hand the decode and prefill
  rows of every step, forward.py).
  A worker that cannot start writes the reason to stderr and exits non-zero without greeting.
- For each line on stdin naming a case directory (optionally followed by a tab and the result
  directory to write), it runs the case and answers one line:
  - the absolute path of the result directory (`case.json` + `expected/`, the format
    `mambacheck case --out` writes), or
  - `error: MESSAGE`: this case could not be run properly (the kernel raised, wrote outside
    its buffers, or the case could not be read); the worker carries on, or
  - `fatal: MESSAGE`: the device is unusable (e.g. a CUDA fault); the worker exits 1.
- A line `engine JSON` is a message of the engine protocol (engine.py; README.md, "Engine
  protocol"): a run's launches over arenas in shared memory, answered `ok`, one JSON line,
  `error: MESSAGE` or `fatal: MESSAGE` as above.
- A line `bench JSON` asks how long one launch takes (bench.py; README.md, "Bench protocol"),
  answered with one JSON line of times, `error: MESSAGE` or `fatal: MESSAGE`.
- Blank lines are ignored. End of input: the worker exits 0.
Nothing else is written to stdout (file descriptor 1 is pointed at stderr after start-up,
so prints of the kernels' libraries cannot garble the protocol).
"""

import argparse
import os
import pathlib
import sys
import traceback

from . import (PROTOCOL_VERSION, bench, casefile, devices, engine, forward, kernels, launch,
               one_line)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python3 -m mambacheck_adapter.worker",
                                description="Run mambacheck case directories on the kernels "
                                            "under test, one per stdin line")
    p.add_argument("--kernels", required=True, help="module path or .py file with the kernels")
    p.add_argument("--variant", help="call the module's select_variant(NAME); NAME,NAME2 "
                                     "calls select_variant(NAME, NAME2) (two bugs at once)")
    p.add_argument("--device", help="cuda or host (default: the module's DEVICE, else cuda)")
    p.add_argument("--results", help="write results under DIR/<case name> (default: next to "
                                     "the case, <case dir>.result)")
    p.add_argument("--engine-arenas", choices=engine.ARENA_MODES,
                   help="engine runs: kernels write the shared arenas in place (shared, the "
                        "default on the host) or device copies synced by pages (device, the "
                        "default elsewhere)")
    return p.parse_args(argv)


def result_dir_for(case_dir, results):
    case_dir = pathlib.Path(case_dir)
    if results:
        return pathlib.Path(results) / case_dir.name
    return case_dir.with_name(case_dir.name + ".result")


def device_broken(device):
    """Whether the device is still usable after an exception (a CUDA fault poisons the
    context: every later launch would fail too)."""
    try:
        device.synchronize()
        return None
    except Exception as e:  # noqa: BLE001: any failure to synchronise means unusable
        return f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"


def out_of_memory(e):
    return type(e).__name__ == "OutOfMemoryError" or "out of memory" in str(e)


def run_case(case, module, device, arenas=None):
    """launch.run_case, retried once with the device's cache released when memory ran out
    (several workers can share one GPU): memory is the machine's problem, not the kernel's."""
    for attempt in (1, 2):
        try:
            return launch.run_case(case, module, device, arenas)
        except Exception as e:  # noqa: BLE001: only out-of-memory is retried
            if not out_of_memory(e):
                raise
            if attempt == 2:
                raise DeviceUnusable(f"out of device memory: {one_line(e)[:300]}") from e
        device.release(force=True)


class DeviceUnusable(Exception):
    pass


def answer_case(line, module, device, results):
    case_path, _, result_path = line.partition("\t")

    def call():
        case = casefile.Case(case_path)
        result = run_case(case, module, device)
        out = pathlib.Path(result_path) if result_path else result_dir_for(case_path, results)
        casefile.write_result(case, result, out)
        device.release()
        return str(out.resolve())
    return answer_guarded(call, device, (casefile.CaseError, launch.LaunchError))


def answer_guarded(call, device, errors):
    """call()'s answer line; a failure of one of `errors` (the message could not be acted on,
    or the kernel failed) is `error:`, one that leaves the device unusable `fatal:`."""
    try:
        return call()
    except DeviceUnusable as e:
        return f"fatal: {e}"
    except errors as e:
        broken = device_broken(device)
        if broken:
            return f"fatal: {e} (the device is unusable: {broken})"
        return f"error: {e}"
    except Exception as e:  # noqa: BLE001: an adapter bug, reported, the worker carries on
        traceback.print_exc(file=sys.stderr)
        broken = device_broken(device)
        if broken:
            return f"fatal: {type(e).__name__}: {e} (the device is unusable: {broken})"
        return f"error: adapter failure {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def answer_engine(text, state):
    """The answer to one engine message (engine.py), as answer_case answers a case."""
    def call():
        try:
            return state.answer(text)
        except OSError as e:  # the shared arenas cannot be mapped: nothing will run
            raise DeviceUnusable(f"engine: cannot map the shared arenas: {e}") from e
    return answer_guarded(call, state.device, (engine.EngineError, launch.LaunchError))


def answer_bench(text, module, device):
    """The answer to one bench message (bench.py): one JSON line of times."""
    return answer_guarded(lambda: bench.answer(text, module, device), device,
                          (bench.BenchError, casefile.CaseError, launch.LaunchError))


def serve(stdin, stdout, module, device, results, arena_mode=None):
    state = engine.Engine(module, device, arena_mode or
                          ("shared" if device.name == "host" else "device"), run_case)
    for raw in stdin:
        line = raw.rstrip("\n").rstrip("\r")
        if not line.strip():
            continue
        if line == "quit":
            return 0
        if line.startswith("engine "):
            reply = one_line(answer_engine(line[len("engine "):], state))
        elif line.startswith("bench "):
            reply = one_line(answer_bench(line[len("bench "):], module, device))
        else:
            reply = one_line(answer_case(line, module, device, results))
        stdout.write(reply + "\n")
        stdout.flush()
        if reply.startswith("fatal:"):
            return 1
    return 0


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # The protocol owns the real stdout; everything else printed goes to stderr.
    protocol_out = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        loaded = kernels.load_module(args.kernels)
        module = kernels.select_kernels(loaded, args.kernels, args.variant)
        device = devices.make_device(args.device or getattr(module, "DEVICE", "cuda"))
        kinds = launch.supported_kinds(module)
        if args.engine_arenas == "shared" and device.name != "host":
            raise ValueError("--engine-arenas shared: the kernels write host memory in place, "
                             "which needs --device host")
    except Exception as e:  # noqa: BLE001: any start-up failure: one line, exit 1
        print(f"mambacheck_adapter.worker: cannot start: {type(e).__name__}: {e}",
              file=sys.stderr)
        return 1
    if not kinds:
        print(f"mambacheck_adapter.worker: {args.kernels} provides none of the kernels "
              f"{sorted({*launch.FAMILY_KERNELS.values(), launch.COPY_PLAN_KERNEL})}", file=sys.stderr)
        return 1
    forward_kernels = forward.supported(module)
    protocol_out.write(f"mambacheck-worker {PROTOCOL_VERSION} kinds={','.join(kinds)} "
                       f"device={device.name} variants={int(kernels.has_variants(loaded))} "
                       f"engine=1 bench=1"
                       + (f" forward={','.join(forward_kernels)}" if forward_kernels else "")
                       + "\n")
    protocol_out.flush()
    return serve(sys.stdin, protocol_out, module, device, args.results, args.engine_arenas)


if __name__ == "__main__":
    sys.exit(main())
