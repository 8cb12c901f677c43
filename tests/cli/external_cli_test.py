#!/usr/bin/env python3
"""`mambacheck fuzz --external` and `mambacheck case --external` end to end, without a GPU.

The worker is the Python adapter (adapters/python/) running the host reference kernels
(mambacheck_adapter.reference), which read states and block tables through the addresses
in the metadata as GPU kernels do. Part PART of:
  clean     a campaign of small cases through the worker agrees with the oracle (exit 0),
            over the kinds the reference kernels cover (block tables by batch row, and V1's
            fused pre-copy without idx_mapping);
  clean_slot_tables  the same with the kernels that find tables by slot (`--variant
            slot_tables`, vLLM #55506): the worker greets with those kinds, and only those run;
  VARIANT   a deliberately broken variant of the kernels is found (exit 1), shrunk to a small
            counterexample, and the printed reproduce command (naming the external command)
            fails the same way (guard_by_address, temporal_size_from_stride,
            conv_shift_not_memmove, ds_ignores_bias, table_by_batch_row);
  protocol  workers that cannot start, never greet, answer garbage or say fatal: are exit 3
            with one line; an `error:` answer is a finding (exit 1); bad option combinations
            are exit 2.
  crash     a worker that dies or times out on a case is a finding for that case (exit 1),
            and the next case runs on the worker started again: one that segfaults on its
            2nd case only is reported on case 2, shrinking runs on the restarted worker.
  worker    `mambacheck worker --backend host` as the worker: a clean campaign holds, and
            with the out-of-bounds kernel mutant table_row_from_slot the campaign reports a
            finding instead of dying.
  workers   `--workers N`: N adapter workers run the cases side by side, and the report is the
            one of a single worker, byte for byte, for a clean campaign and a broken variant;
            with --devices each adapter gets its GPU as CUDA_VISIBLE_DEVICES, worker k the k-th
            of the list round robin. A case worker that dies (here its adapter kills it) is a
            finding for its case and a fresh worker runs the next: every case the same finding,
            the same report for 1 and 2 workers.

Usage: external_cli_test.py MAMBACHECK PYTHON WORK_DIR PART. Exit 77 (skipped) without numpy
for the parts that run the Python adapter.
"""

import json
import os
import pathlib
import shlex
import shutil
import subprocess
import sys

from cli_checks import expect, has_numpy, reference_worker as worker_command, run

REPO = pathlib.Path(__file__).resolve().parents[2]
ADAPTER = REPO / "adapters" / "python"
CLEAN_CASES = 200
VARIANT_CASES = 300
MAX_SIZE = 35


def fuzz(mambacheck, external, work, name, cases, expected_rc, *extra):
    out = work / name
    shutil.rmtree(out, ignore_errors=True)
    report = work / f"{name}.json"
    level = [] if "--level" in extra else ["--level", "kernel"]
    p = run([mambacheck, "fuzz", *level, "--external", external, "--seed", "3",
             "--cases", str(cases), "--max-size", str(MAX_SIZE), "--out", str(out), "--report",
             str(report), *extra], expected_rc)
    return p, (json.loads(report.read_text()) if report.exists() else None)


def part_clean(mambacheck, python, work):
    p, report = fuzz(mambacheck, worker_command(python), work, "clean", CLEAN_CASES, 0)
    expect("all cases held" in p.stdout, "no 'all cases held'", p.stdout)
    expect(report["cases"] == CLEAN_CASES and report["backend"] == "external",
           "report: cases/backend", json.dumps(report))
    expect(set(report["cases_by_kind"]) == {"postprocess", "postprocess_align", "precopy",
                                            "preprocess_align", "batch_copy", "precopy_v1"},
           "not every kind ran", json.dumps(report))
    expect(report["copies_compared"] > 100, "too few copies compared", json.dumps(report))
    expect((work / "clean" / "external" / "worker.log").exists(), "no worker log")


def part_clean_slot_tables(mambacheck, python, work):
    external = worker_command(python, "--variant", "slot_tables")
    p, report = fuzz(mambacheck, external, work, "clean-slot-tables", CLEAN_CASES // 2, 0)
    expect("all cases held" in p.stdout, "no 'all cases held'", p.stdout)
    expect(set(report["cases_by_kind"]) == {"postprocess", "preprocess_align", "batch_copy",
                                            "precopy_v1", "postprocess_align_slot_tables",
                                            "precopy_slot_tables"},
           "not the slot-table kinds", json.dumps(report))
    expect(report["coverage"]["counts"]["slot-table-row"] > 0,
           "no row read its table at a slot other than its batch row", json.dumps(report))


# The racy variant's program orders in part two_bugs (reference.py, MC_REFERENCE_ORDER_SEED).
TWO_BUGS_ORDER_SEED = "1"

VARIANTS = ("guard_by_address", "temporal_size_from_stride", "conv_shift_not_memmove",
            "ds_ignores_bias", "table_by_batch_row")


def part_variant(mambacheck, python, work, variant):
    external = worker_command(python, "--variant", variant)
    p, report = fuzz(mambacheck, external, work, variant, VARIANT_CASES, 1)
    cx = report["findings"][0]["counterexample"]
    # Reading the batch row's table shows only where that row is another request's.
    rows_max = 3 if variant == "table_by_batch_row" else 2
    expect(cx["requests"] <= rows_max, f"{variant}: counterexample of {cx['requests']} rows",
           p.stdout)
    reproduce = [line for line in p.stdout.splitlines() if "reproduce:" in line][0]
    expect(f"--external {shlex.quote(external)}" in reproduce,
           f"{variant}: the reproduce line does not name the external command", reproduce)
    args = shlex.split(reproduce.split("reproduce:", 1)[1])
    expect(args[0] == "mambacheck", "reproduce: not a mambacheck command", reproduce)
    again = run([mambacheck, *args[1:]], 1)
    expect("MISMATCH" in again.stdout, f"{variant}: the reproduction did not fail",
           again.stdout)
    print(f"{variant}: found after {report['cases']} cases, shrunk to {cx['requests']} "
          f"rows in {cx['shrink_steps']} steps: {cx['failure'][:160]}")


def part_protocol(mambacheck, python, work):
    greet = "echo 'mambacheck-worker 1 kinds=precopy,postprocess'"
    cases = [
        ("exit 7", 3, "exited with status 7"),
        ("echo hello; cat", 3, "greeted with \"hello\""),
        ("echo 'mambacheck-worker 1 kinds=nonsense'; cat", 3, "unknown launch kind"),
        (f"{greet}; while read l; do echo nonsense; done", 3, "answered \"nonsense\""),
        (f"{greet}; read l; echo 'fatal: device lost'", 3, "device lost"),
        ("sleep 30", 3, "gave no answer within 1 s while we waited for its greeting"),
        ("echo 'oops' >&2; exit 4", 3, "its stderr ends: \"oops\""),
    ]
    for i, (command, rc, text) in enumerate(cases):
        p, _ = fuzz(mambacheck, command, work, f"protocol-{i}", 5, rc, "--external-timeout", "1")
        lines = p.stderr.strip().splitlines()
        expect(len(lines) == 1 and text in lines[0], f"{command}: expected one line with {text!r}",
               p.stderr)
    # An error: answer is a finding about the kernels (exit 1), shrunk like a mismatch.
    p, report = fuzz(mambacheck, f"{greet}; while read l; do echo 'error: boom'; done", work,
                     "protocol-error", 5, 1)
    expect("boom" in report["findings"][0]["counterexample"]["failure"], "error: answer not reported", p.stdout)
    expect(set(report["cases_by_kind"]) <= {"precopy", "postprocess"},
           "the campaign drew kinds the worker does not cover", json.dumps(report))
    run([mambacheck, "fuzz", "--external", "x", "--backend", "host"], 2)
    # The engine level needs a worker that serves the engine protocol (engine=1).
    p, _ = fuzz(mambacheck, f"{greet}; cat", work, "protocol-engine", 1, 3, "--level", "engine")
    lines = p.stderr.strip().splitlines()
    expect(len(lines) == 1 and "does not serve the engine protocol" in lines[0],
           "engine level on a kernel-only worker: expected one line, exit 3", p.stderr)
    run([mambacheck, "fuzz", "--external", "x", "--external-timeout", "0"], 2)


# Forwards the protocol to the worker command after the marker path; the first instance (no
# marker yet) kills itself with SIGSEGV when its 2nd case comes.
SEGV_ON_SECOND_CASE = """
import os, signal, subprocess, sys
marker, command = sys.argv[1], sys.argv[2:]
worker = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
print(worker.stdout.readline(), end="", flush=True)
for n, line in enumerate(sys.stdin, start=1):
    if n == 2 and not os.path.exists(marker):
        open(marker, "w").close()
        os.kill(os.getpid(), signal.SIGSEGV)
    worker.stdin.write(line)
    worker.stdin.flush()
    print(worker.stdout.readline(), end="", flush=True)
"""


def part_crash(mambacheck, python, work):
    greet = "echo 'mambacheck-worker 1 kinds=precopy,postprocess'"
    # Every start of these workers fails its first case: found on case 1, shrunk on restarts.
    for name, command, text in [
        ("crash-timeout", f"{greet}; while read l; do sleep 30; done",
         "the worker exceeded 0.2 s on this case; killed"),
        ("crash-exit", f"{greet}; read l; echo 'oops' >&2; exit 4",
         "the worker died on this case: exited with status 4; its stderr ends: \"oops\""),
    ]:
        p, report = fuzz(mambacheck, command, work, name, 5, 1, "--external-timeout", "0.2")
        failure = report["findings"][0]["counterexample"]["failure"]
        expect(text in failure, f"{name}: expected {text!r} in the failure", failure)
        expect(report["cases"] == 1, f"{name}: not found on the first case", json.dumps(report))

    proxy = work / "segv_on_second_case.py"
    proxy.write_text(SEGV_ON_SECOND_CASE)
    marker = work / "segv-crashed"
    marker.unlink(missing_ok=True)
    # exec: the proxy is the worker process itself, so its death is the signal, not a shell's
    # exit status 139.
    command = "exec " + shlex.join([python, str(proxy), str(marker), mambacheck, "worker",
                                    "--backend", "host"])
    p, report = fuzz(mambacheck, command, work, "crash-segv", 5, 1)
    cx = report["findings"][0]["counterexample"]
    expect(report["cases"] == 2, "the crash was not reported on case 2", json.dumps(report))
    expect(cx["failure"] == "the backend failed: the worker died on this case: killed by "
                           "SIGSEGV (invalid memory reference)", "crash-segv: failure", p.stdout)
    # Shrinking reran candidates on the restarted worker, which holds on all of them.
    expect(cx["shrink_candidates_tried"] > 0 and cx["shrink_steps"] == 0, "crash-segv: shrinking",
           json.dumps(cx))
    log = (work / "crash-segv" / "external" / "worker.log").read_text()
    expect(log == "", "crash-segv: the worker wrote to stderr", log)


def part_worker(mambacheck, python, work):
    worker = shlex.join([mambacheck, "worker", "--backend", "host"])
    p, report = fuzz(mambacheck, worker, work, "worker-clean", CLEAN_CASES, 0)
    expect("all cases held" in p.stdout, "no 'all cases held'", p.stdout)
    expect(set(report["cases_by_kind"]) == {"postprocess", "postprocess_align", "precopy",
                                            "preprocess_align", "batch_copy", "precopy_v1",
                                            "postprocess_align_slot_tables",
                                            "precopy_slot_tables"},
           "not every kind ran", json.dumps(report))
    mutated = shlex.join([mambacheck, "worker", "--backend", "host", "--mutant",
                          "table_row_from_slot"])
    p, report = fuzz(mambacheck, mutated, work, "worker-oob", VARIANT_CASES, 1)
    cx = report["findings"][0]["counterexample"]
    # The first kill is a crash (a row reads another's table row and finds a pad there); the
    # smallest case the shrinker reaches that still crashes keeps 7 rows at seed 3.
    expect(cx["requests"] <= 8, f"worker-oob: counterexample of {cx['requests']} rows", p.stdout)
    expect(cx["failure"].startswith("the backend failed: killed by SIGSEGV"),
           f"worker-oob: {cx['failure']}", p.stdout)
    print(f"worker-oob: found after {report['cases']} cases, shrunk to {cx['requests']} rows: "
          f"{cx['failure'][:300]}")


def part_workers(mambacheck, python, work):
    for name, external, cases, rc in [
            ("workers-clean", worker_command(python), CLEAN_CASES, 0),
            ("workers-variant", worker_command(python, "--variant", "ds_ignores_bias"),
             VARIANT_CASES, 1)]:
        reports = {}
        for workers in (1, 3):
            p, report = fuzz(mambacheck, external, work, f"{name}-{workers}", cases, rc,
                             "--workers", str(workers))
            # The counterexample directories are named after the campaign's --out.
            reports[workers] = json.dumps(report).replace(f"{name}-{workers}", name)
            for k in range(workers):
                log = work / f"{name}-{workers}" / "external" / f"worker-{k}" / "worker.log"
                expect(log.exists(), f"{name}: no log of adapter worker {k}", p.stdout)
        expect(reports[3] == reports[1], f"{name}: the report of --workers 3 differs from 1",
               reports[3] + "\n" + reports[1])
    # Each adapter worker sees the GPU it was given; the campaign's own adapter (reruns and
    # shrinking) runs with the campaign's environment.
    seen = work / "workers-devices.txt"
    seen.unlink(missing_ok=True)
    recording = (f"echo \"${{MC_CASE_WORKER:--}} ${{CUDA_VISIBLE_DEVICES:--}}\" >> {seen}; exec "
                 + worker_command(python))
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    out = work / "workers-devices"
    shutil.rmtree(out, ignore_errors=True)
    run([mambacheck, "fuzz", "--external", recording, "--workers", "3", "--devices", "1,0",
         "--cases", "30", "--max-size", "20", "--out", str(out)], 0, env=env)
    lines = sorted(seen.read_text().splitlines())
    expect(lines == ["- -", "0 1", "1 0", "2 1"], f"workers-devices: {lines}")
    # In a case worker (MC_CASE_WORKER set) this adapter kills the worker on its first case; the
    # campaign's own adapter, which reruns and shrinks the finding, answers every case with an
    # error.
    greet = "echo 'mambacheck-worker 1 kinds=precopy'"
    killer = (f"{greet}; read l; if [ -n \"$MC_CASE_WORKER\" ]; then kill -ABRT $PPID; "
              "sleep 30; fi; while true; do echo 'error: boom'; read l; done")
    reports = {}
    for workers in (1, 2):
        p, report = fuzz(mambacheck, killer, work, f"workers-killed-{workers}", 5, 1,
                         "--workers", str(workers), "--reruns", "0", "--keep-going")
        expect(report["cases"] == 5, f"workers-killed: {report['cases']} cases", p.stdout)
        first = report["findings"][0]
        expect(first["failure"] == "the backend crashed: killed by SIGABRT (aborted)" and
               first["difference"] == "crash" and first["cases"] == 5,
               f"workers-killed --workers {workers}: {json.dumps(report['findings'])}", p.stdout)
        reports[workers] = json.dumps(report).replace(f"workers-killed-{workers}", "killed")
    expect(reports[1] == reports[2], "workers-killed: the reports of 1 and 2 workers differ",
           reports[1] + "\n" + reports[2])


def part_two_bugs(mambacheck, python, work):
    """One kernels module with a deterministic bug (precopy compares blocks, not columns) and a
    racy one (postprocess_align resets num_accepted in place while the row's other programs,
    run in a random order, still read it): one --keep-going campaign reports both, each with
    its own counterexample, the racy one nondeterministic, saved only where it reproduces.

    The programs' orders come from a fixed seed (reference.py, MC_REFERENCE_ORDER_SEED) and only
    the candidate count bounds the shrinks: the worker is given the same launches in the same
    order every run, draws the same orders, and the verdict is the same every run."""
    external = worker_command(python, "--variant", "guard_by_address,racy_reset")
    os.environ["MC_REFERENCE_ORDER_SEED"] = TWO_BUGS_ORDER_SEED
    p, report = fuzz(mambacheck, external, work, "two-bugs", 150, 1, "--keep-going",
                     "--shrink-time", "none")
    expect(report["cases"] == 150, "the campaign stopped before its cases ran", p.stdout)
    findings = report["findings"]
    rates = {r["signature"]: r for r in report["measured"]["rates"]}
    deterministic = [f for f in findings
                     if f["signature"].startswith("kernel:precopy:deterministic:")]
    racy = [f for f in findings
            if f["signature"].startswith("kernel:postprocess_align:nondeterministic:")]
    expect(deterministic, "no deterministic precopy finding", p.stdout)
    expect(racy, "no nondeterministic postprocess_align finding", p.stdout)
    dirs = {f["counterexample"]["shrunk_dir"] for f in findings}
    expect(len(dirs) == len(findings), "two findings share a counterexample", json.dumps(findings))
    for f in racy:
        r = rates[f["signature"]]
        expect(0 < r["failed_runs"] <= r["runs"], f"{f['signature']}: rate", json.dumps(r))
        expect(2 * r["saved_case_failed_runs"] >= r["saved_case_runs"] or
               not f["counterexample"]["shrunk"],
               f"{f['signature']}: saved a case that fails on under half its reruns",
               json.dumps(r))
        expect("run 1:" in p.stdout, "a nondeterministic finding without its runs", p.stdout)
    for f in deterministic:
        r = rates[f["signature"]]
        expect(r["failed_runs"] == r["runs"], f"{f['signature']}: not every run failed",
               json.dumps(r))
    print(f"two-bugs: {len(findings)} signatures: " +
          ", ".join(f"{f['signature']} ({rates[f['signature']]['failed_runs']}/"
                    f"{rates[f['signature']]['runs']})" for f in findings))


def main(argv):
    if len(argv) != 5:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    mambacheck, python, work, part = argv[1], argv[2], pathlib.Path(argv[3]), argv[4]
    needs_adapter = part not in ("protocol", "crash", "worker")
    if needs_adapter and not has_numpy(python):
        print(f"{python} has no numpy: skipped")
        return 77
    work.mkdir(parents=True, exist_ok=True)
    os.environ["PYTHONPATH"] = str(ADAPTER)  # the worker's mambacheck_adapter
    if part in VARIANTS:
        part_variant(mambacheck, python, work, part)
    else:
        parts = {"clean": part_clean, "clean_slot_tables": part_clean_slot_tables,
                 "protocol": part_protocol, "crash": part_crash, "worker": part_worker,
                 "workers": part_workers, "two_bugs": part_two_bugs}
        parts[part](mambacheck, python, work)
    print(f"external {part}: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
