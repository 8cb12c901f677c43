#!/usr/bin/env python3
"""The engine level on external kernels end to end, without a GPU: `fuzz --level engine
--external`, `run --external`, `replay --external`, the library and `gate --external`.

The worker is the Python adapter (adapters/python/) running the host reference kernels
(mambacheck_adapter.reference) on arenas this program keeps in shared memory (the engine
protocol, backends/external_engine.h). Part PART of:
  clean     a campaign of engine cases through the worker holds (exit 0); the runners drawn
            launch only the kinds the worker covers (no per-slot tables);
  device    the same with the worker's device-resident arenas (--engine-arenas device: copies
            synced by pages, the GPU's path) on the host;
  variant   ds_ignores_bias is found at the engine level (exit 1), shrunk to a trace of one
            request; the trace replays to the same difference through the worker with the
            variant, and holds through the clean one;
  crash     a worker killed by SIGKILL on a launch, or hanging past --external-timeout, is a
            finding at the step it reached (exit 1, never exit 3), in `run` and in a campaign;
            a worker without the engine protocol is exit 3 with one line;
  commands  `run --external` and `replay --library --external` hold; a run whose runner
            launches a kind the worker lacks is exit 2;
  gate      `gate --external` passes with the clean kernels (liveness: each broken variant
            caught), and exits 1 when a variant that is not broken (clean) is named as one;
  workers   the same campaign with --workers 1, 2 and 4 (a case worker each, each with an
            adapter of its own) gives the same report, byte for byte, clean and with a variant
            found and shrunk;
  gate_no_variants
            `gate --external` on a kernels module without select_variant (as vLLM's): the
            worker greets with variants=0, the liveness stage says in one line that the broken
            variants run on the adapter's test kernels (mambacheck_adapter.reference, host),
            catches each and the gate passes; a variant that cannot start is reported as
            could not run, never as passing the gate;
  forward   the worker greets with forward=ssm,conv,scan (the reference module's
            selective_state_update, causal_conv1d_update and selective_scan_fn); each broken
            forward variant is
            found by the engine campaign (a forward-kernel finding, or the kernel's own
            IndexError where it reads outside its state), shrunk, and its trace replays to the
            same difference through the variant and holds through the clean kernels.

Usage: external_engine_cli_test.py MAMBACHECK PYTHON WORK_DIR PART. Exit 77 (skipped) when
PYTHON has no numpy.
"""

import json
import os
import pathlib
import re
import shlex
import shutil
import sys

from cli_checks import expect, has_numpy, reference_worker as worker, run

REPO = pathlib.Path(__file__).resolve().parents[2]
ADAPTER = REPO / "adapters" / "python"
LIBRARY = REPO / "scenarios" / "library"


def fuzz(mambacheck, external, work, name, cases, expected_rc, *extra):
    out = work / name
    shutil.rmtree(out, ignore_errors=True)
    report = work / f"{name}.json"
    p = run([mambacheck, "fuzz", "--level", "engine", "--external", external, "--seed", "3",
             "--cases", str(cases), "--max-size", "30", "--out", str(out), "--report",
             str(report), *extra], expected_rc)
    return p, json.loads(report.read_text())


def check_clean(mambacheck, python, work, name, *worker_args):
    p, report = fuzz(mambacheck, worker(python, *worker_args), work, name, 60, 0)
    expect(report["cases"] == 60 and not report["findings"], f"{name}: not 60 clean cases",
           p.stdout)
    expect(report["backend"] == "external" and
           report["external"] == worker(python, *worker_args), f"{name}: report's backend",
           json.dumps(report)[:500])
    expect(report["steps"] > 600, f"{name}: only {report['steps']} steps", p.stdout)
    runners = report["cases_by_runner"]
    expect(not any("slot-tables" in r for r in runners),
           f"{name}: drew a runner with per-slot tables, which the worker lacks", str(runners))
    expect({"v1 precopy_v1", "v2"} <= set(runners), f"{name}: runners {runners}", p.stdout)
    print(f"{name}: {report['cases']} cases, {report['steps']} steps held ({runners})")


def part_clean(mambacheck, python, work):
    check_clean(mambacheck, python, work, "clean")


def part_device(mambacheck, python, work):
    check_clean(mambacheck, python, work, "device", "--engine-arenas", "device")
    p, report = fuzz(mambacheck, worker(python, "--engine-arenas", "device", "--variant",
                                        "conv_shift_not_memmove"), work, "device-variant", 60, 1)
    expect(report["findings"][0]["signature"].startswith("engine:"), "device: no engine finding",
           p.stdout)
    # The cases ran in case workers, each through an adapter of its own.
    log = "".join(f.read_text() for f in (work / "device" / "external").glob("worker-*/engine-worker.log"))
    expect("bytes uploaded" in log, "device: the worker did not report its page syncs", log)


def part_variant(mambacheck, python, work):
    external = worker(python, "--variant", "ds_ignores_bias")
    p, report = fuzz(mambacheck, external, work, "variant", 200, 1)
    finding = report["findings"][0]
    cx = finding["counterexample"]
    expect(finding["signature"].startswith("engine:step:deterministic:arena"),
           f"variant: signature {finding['signature']}", p.stdout)
    expect(cx["requests"] == 1, f"variant: shrunk to {cx['requests']} requests", p.stdout)
    replay_line = [line for line in p.stdout.splitlines() if "replay the trace:" in line][0]
    expect(f"--external {shlex.quote(external)}" in replay_line,
           "variant: the replay line does not name the external command", replay_line)
    args = shlex.split(replay_line.split("replay the trace:", 1)[1])
    again = run([mambacheck, *args[1:]], 1)
    # The same difference, step and bytes, through the worker.
    diff = cx["first_difference"]
    expect(diff["kind"] == "arena" and f"MISMATCH at step {diff['step']} " in again.stdout and
           diff["text"].split(": ", 1)[1] in again.stdout,
           f"variant: the trace did not replay to {diff['text']!r}", again.stdout)
    trace = args[2]
    run([mambacheck, "replay", trace, "--external", worker(python)], 0)
    print(f"variant: found on case {report['cases']}, shrunk to {cx['steps']} steps: "
          f"{diff['text']}")


def part_workers(mambacheck, python, work):
    for name, external, cases, rc in (
            ("workers-clean", worker(python), 40, 0),
            ("workers-variant", worker(python, "--variant", "ds_ignores_bias"), 120, 1)):
        reports = {}
        for n in (1, 2, 4):
            p, report = fuzz(mambacheck, external, work, f"{name}-{n}", cases, rc, "--workers",
                             str(n), "--keep-going")
            # Counterexample paths name the campaign's own --out: the same file names under it.
            text = json.dumps(report, sort_keys=True).replace(str(work / f"{name}-{n}"), "OUT")
            reports[n] = text
            expect(report["cases"] == cases, f"{name} --workers {n}: {report['cases']} cases",
                   p.stdout)
            expect(bool(report["findings"]) == (rc == 1),
                   f"{name} --workers {n}: findings {len(report['findings'])}", p.stdout)
            expect((work / f"{name}-{n}" / "external" / "worker-0" / "engine-worker.log").exists(),
                   f"{name} --workers {n}: no log of case worker 0's adapter", p.stdout)
        for n in (2, 4):
            expect(reports[n] == reports[1], f"{name}: --workers {n} gave another report than 1",
                   reports[n][:2000] + "\n---\n" + reports[1][:2000])
        print(f"{name}: the same report with 1, 2 and 4 workers")


# A kernels module: the reference kernels, but the process dies (SIGKILL) or hangs when the
# Nth precopy launch comes (MC_TEST_FAIL=kill:N or hang:N).
FAILING_KERNELS = """
import os, signal, time
from mambacheck_adapter import reference

how, _, n = os.environ["MC_TEST_FAIL"].partition(":")
calls = [0]

class _Precopy:
    def __getitem__(self, grid):
        calls[0] += 1
        if calls[0] == int(n):
            if how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(60)
        return reference.precopy_mamba_align_fused_kernel[grid]

postprocess_mamba_fused_kernel = reference.postprocess_mamba_fused_kernel
preprocess_mamba_align_fused_kernel = reference.preprocess_mamba_align_fused_kernel
batch_memcpy = reference.batch_memcpy
precopy_mamba_align_fused_kernel = _Precopy()
PRECOPY_HAS_IDX_MAPPING = True
DEVICE = "host"
"""


def part_crash(mambacheck, python, work):
    kernels = work / "failing_kernels.py"
    kernels.write_text(FAILING_KERNELS)
    base = shlex.join([python, "-m", "mambacheck_adapter.worker", "--kernels", str(kernels)])
    for how, text in (("kill", "the worker died on this case: killed by SIGKILL"),
                      ("hang", "the worker exceeded 2 s on this case; killed")):
        command = f"MC_TEST_FAIL={how}:3 exec {base}"
        p = run([mambacheck, "run", "--steps", "200", "--requests", "16", "--external", command,
                 "--external-timeout", "2"], 1)
        line = [x for x in p.stdout.splitlines() if x.startswith("MISMATCH")]
        expect(line and "the kernels under test failed" in line[0] and text in line[0],
               f"run, {how}: expected a finding naming {text!r}", p.stdout + p.stderr)
        expect(not p.stderr.strip().startswith("mambacheck: "), f"run, {how}: an abort",
               p.stderr)
    # In a campaign: the 3rd precopy of the worker's life kills it; it is started again.
    p, report = fuzz(mambacheck, f"MC_TEST_FAIL=kill:3 exec {base}", work, "crash", 20, 1)
    finding = report["findings"][0]
    expect(finding["signature"].split(":")[3] == "crash", f"crash: {finding['signature']}",
           p.stdout)
    diff = finding["counterexample"]["first_difference"]
    expect(report["cases"] < 20 and diff["kind"] == "crash" and
           diff["text"].startswith(f"step {diff['step']}: the kernels under test failed: the "
                                   f"worker died"),
           "crash: not a finding at a step", json.dumps(report)[:3000])
    greet = "echo 'mambacheck-worker 1 kinds=precopy,postprocess'; cat"
    p = run([mambacheck, "run", "--external", greet], 3)
    lines = p.stderr.strip().splitlines()
    expect(len(lines) == 1 and "does not serve the engine protocol" in lines[0],
           "a worker without engine=1: expected one line, exit 3", p.stderr)
    print("crash: a killed or hung worker is a finding at its step")


def part_commands(mambacheck, python, work):
    w = worker(python)
    for runner in ("v1", "v2"):
        p = run([mambacheck, "run", "--steps", "300", "--requests", "24", "--runner", runner,
                 "--external", w], 0)
        expect("held: oracle and external agree on every step" in p.stdout, f"run {runner}",
               p.stdout)
    p = run([mambacheck, "replay", "--library", str(LIBRARY), "--external", w], 0)
    expect("skip" not in p.stdout and "FAIL" not in p.stdout, "library: skipped or failed",
           p.stdout)
    # The slot-table kernels lack the batch-row kinds: those scenarios are skipped, not failed.
    p = run([mambacheck, "replay", "--library", str(LIBRARY), "--v2-tables", "slot",
             "--external", w], 0)
    # Kernels that find tables by slot: the V2 scenarios run on that convention, the V1 ones
    # on V1's fused pre-copy without idx_mapping (they lack the identity-mapped precopy).
    p = run([mambacheck, "replay", "--library", str(LIBRARY), "--external",
             worker(python, "--variant", "slot_tables")], 0)
    expect("skip" not in p.stdout and re.search(r"launch-precopy_slot_tables +\d", p.stdout)
           and re.search(r"launch-precopy_v1 +\d", p.stdout), "library on slot-table kernels",
           p.stdout)
    # Kernels without batch_memcpy: the scenarios recorded on batch_copy are skipped.
    no_batch = work / "no_batch_copy.py"
    no_batch.write_text("from mambacheck_adapter.reference import *\n"
                        "del batch_memcpy\n")
    p = run([mambacheck, "replay", "--library", str(LIBRARY), "--external",
             shlex.join([python, "-m", "mambacheck_adapter.worker", "--kernels", str(no_batch)])],
            0)
    skipped = sorted(x.split()[1] for x in p.stdout.splitlines() if x.startswith("skip "))
    expect(skipped == ["a-decode-crossing-each-acceptance", "p-b2048-v1-batch-copy",
                       "p-b560-v1-batch-copy"] and "do not cover batch_copy" in p.stdout,
           f"library without batch_copy: skipped {skipped}", p.stdout)
    p = run([mambacheck, "run", "--runner", "v2", "--v2-tables", "slot", "--external", w], 2)
    expect("do not cover precopy_slot_tables" in p.stderr, "uncovered kind: exit 2", p.stderr)
    run([mambacheck, "run", "--external", w, "--backend", "cuda"], 2)
    run([mambacheck, "replay", str(LIBRARY / "d-same-block-conv-shift.jsonl"), "--external", w,
         "--kernel-mutant", "overlap_copied_backwards"], 2)
    print("commands: run, replay and the library on external kernels")


def part_gate(mambacheck, python, work):
    w = worker(python)
    small = ["--kernel-cases", "20", "--engine-cases", "10", "--require-coverage", "none"]
    out = work / "gate"
    shutil.rmtree(out, ignore_errors=True)
    p = run([mambacheck, "gate", "--external", w, "--out", str(out), *small], 0)
    live = [x for x in p.stdout.splitlines() if x.strip().startswith("liveness")]
    expect(live and "9 of 9 broken variants caught" in live[0], "gate: liveness", p.stdout)
    stages = [x.split()[0] for x in p.stdout.splitlines() if x.startswith("  ")]
    expect(stages == ["kernel-fuzz", "engine-fuzz", "library", "liveness"],
           f"gate: stages {stages}", p.stdout)
    # A "variant" that is the clean kernels passes the gate: the gate is not live on it.
    p = run([mambacheck, "gate", "--external", w, "--out", str(out), *small, "--variants",
             "ds_ignores_bias,clean"], 1)
    expect("PASSED THE GATE: clean" in p.stdout, "gate: a clean variant not reported", p.stdout)
    # The broken kernels themselves fail the gate at its first stage.
    p = run([mambacheck, "gate", "--external", worker(python, "--variant", "ds_ignores_bias"),
             "--out", str(out), *small, "--variants", "ds_ignores_bias"], 1)
    expect("kernel-fuzz" in p.stdout and "FAIL" in p.stdout, "gate: broken kernels passed",
           p.stdout)
    run([mambacheck, "gate", "--external", w, "--backend", "host"], 2)
    run([mambacheck, "gate", "--variants", "clean"], 2)
    print("gate: passes on the clean kernels, live on each variant")


# The gate's default liveness variants (cli/gate_cmd.cpp, kLivenessVariants).
LIVENESS_VARIANTS = ["guard_by_address", "temporal_size_from_stride", "conv_shift_not_memmove",
                     "ds_ignores_bias", "table_by_batch_row", "null_block_not_skipped",
                     "drafts_into_one_column", "accepted_bound_wrong_stride", "no_accepted_bound"]

# The reference kernels under another name, without select_variant: a module with no broken
# variants of its own, as vLLM's mamba_utils.
PLAIN_KERNELS = '''from mambacheck_adapter.reference import (  # noqa: F401
    BLOCK_TABLE_ROWS, DEVICE, PRECOPY_HAS_IDX_MAPPING, batch_memcpy, causal_conv1d_update,
    postprocess_mamba_fused_kernel, precopy_mamba_align_fused_kernel,
    preprocess_mamba_align_fused_kernel, selective_scan_fn, selective_state_update)
'''


def part_gate_no_variants(mambacheck, python, work):
    module = work / "plain_kernels.py"
    module.write_text(PLAIN_KERNELS)
    w = shlex.join([python, "-m", "mambacheck_adapter.worker", "--kernels", str(module)])
    small = ["--kernel-cases", "20", "--engine-cases", "10", "--require-coverage", "none"]
    out = work / "gate-no-variants"
    shutil.rmtree(out, ignore_errors=True)
    p = run([mambacheck, "gate", "--external", w, "--out", str(out), *small], 0)
    expect("device=host variants=0" in p.stdout, "gate: the greeting has no variants=0", p.stdout)
    note = [x for x in p.stdout.splitlines() if x.startswith("liveness:")]
    expect(note == [f"liveness: {module} has no select_variant; the broken variants run on the "
                    f"adapter's test kernels (mambacheck_adapter.reference, host)"],
           f"gate: the line naming the test kernels: {note}", p.stdout)
    live = [x for x in p.stdout.splitlines() if x.startswith("  liveness")]
    expect(len(live) == 1 and " pass " in live[0] and
           f"{len(LIVENESS_VARIANTS)} of {len(LIVENESS_VARIANTS)} broken variants caught" in live[0],
           "gate: liveness on the test kernels", p.stdout)
    for variant in LIVENESS_VARIANTS:
        expect(re.search(rf"\b{variant} by (kernel-fuzz|engine-fuzz|library)\b", live[0]),
               f"gate: {variant} not caught", live[0])
    # One variant that cannot start: could not run, the gate fails, and nothing "passed" it.
    library = work / "one-scenario"
    shutil.rmtree(library, ignore_errors=True)
    library.mkdir()
    shutil.copy(LIBRARY / "a-accepted-after-preemption.jsonl", library)
    p = run([mambacheck, "gate", "--external", w, "--out", str(out), *small, "--library",
             str(library), "--variants", "ds_ignores_bias,no_such_variant"], 1)
    live = [x for x in p.stdout.splitlines() if x.startswith("  liveness")]
    expect(len(live) == 1 and " FAIL " in live[0] and "COULD NOT RUN: no_such_variant (" in live[0]
           and "PASSED THE GATE" not in live[0] and "caught: ds_ignores_bias by" in live[0],
           "gate: a variant that could not run", p.stdout)
    print("gate_no_variants: liveness on the adapter's test kernels, 9 of 9 caught; a variant "
          "that cannot start is could not run")


FORWARD_VARIANTS = {  # the variant: the finding's kind and words of its text
    "reads_column_a": ("kernel-error", "outside"),
    "null_block_not_skipped": ("forward-kernel", "(the null block)"),
    "drafts_into_one_column": ("forward-kernel", "after 2 tokens; expected"),
    "scan_ignores_initial_state": ("forward-kernel", "selective_scan_fn wrote block"),
    "final_state_to_initial_block": ("forward-kernel", "selective_scan_fn"),
    "accepted_bound_wrong_stride": ("forward-kernel", "selective_state_update never wrote"),
    # Found by the probe of the count's bound: a wild read of another row's entry, or, with
    # one row, an IndexError (a kernel error) past the table.
    "no_accepted_bound": (("forward-kernel", "kernel-error"), "given row 0's num_accepted as"),
}


def part_forward(mambacheck, python, work):
    p = run([mambacheck, "run", "--steps", "4", "--external",
             worker(python)], 0)
    expect("forward=ssm,conv,scan" in p.stdout, "forward: the greeting has no forward=ssm,conv,scan",
           p.stdout)
    for variant, (kind, words) in FORWARD_VARIANTS.items():
        external = worker(python, "--variant", variant)
        p, report = fuzz(mambacheck, external, work, f"forward-{variant}", 200, 1)
        cx = report["findings"][0]["counterexample"]
        diff = cx["first_difference"]
        expect(diff["kind"] in ((kind,) if isinstance(kind, str) else kind)
               and words in diff["text"],
               f"forward {variant}: found as {diff['kind']}: {diff['text']}", p.stdout)
        expect(cx["requests"] <= 3 and cx["steps"] <= 4,
               f"forward {variant}: shrunk to {cx['steps']} steps, {cx['requests']} requests",
               p.stdout)
        replay_line = [line for line in p.stdout.splitlines() if "replay the trace:" in line][0]
        args = shlex.split(replay_line.split("replay the trace:", 1)[1])
        again = run([mambacheck, *args[1:]], 1)
        expect(f"MISMATCH at step {diff['step']} " in again.stdout and
               diff["text"].split(": ", 1)[1][:120] in again.stdout,
               f"forward {variant}: the trace did not replay to {diff['text']!r}", again.stdout)
        clean_args = [a if a != external else worker(python) for a in args[1:]]
        run([mambacheck, *clean_args], 0)
        print(f"forward {variant}: found on case {report['cases']}, shrunk to {cx['steps']} "
              f"steps and {cx['requests']} requests: {diff['text']}")


def main(argv):
    if len(argv) != 5:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    mambacheck, python, work, part = argv[1], argv[2], pathlib.Path(argv[3]), argv[4]
    if not has_numpy(python):
        print(f"{python} has no numpy: skipped")
        return 77
    work.mkdir(parents=True, exist_ok=True)
    os.environ["PYTHONPATH"] = str(ADAPTER)  # the worker's mambacheck_adapter
    parts = {"clean": part_clean, "device": part_device, "variant": part_variant,
             "crash": part_crash, "commands": part_commands, "gate": part_gate,
             "gate_no_variants": part_gate_no_variants, "forward": part_forward,
             "workers": part_workers}
    parts[part](mambacheck, python, work)
    print(f"external engine {part}: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
