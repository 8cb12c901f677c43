#!/usr/bin/env python3
"""The engine level with a KV cache manager under test, end to end: `run`, `fuzz --level engine`
and `replay` with `--block-manager` on the adapter's reference manager
(mambacheck_adapter.block_manager; docs/block-manager.md). Part PART of:
  clean     a campaign of engine cases through the reference manager holds (exit 0), as do
            `run` with drafts, EAGLE, async scheduling and a small pool, whose recorded trace
            replays held without the manager (the trace carries its tables and contract);
  variants  each broken variant of the reference manager is found by the default campaign
            (exit 1) with the finding kind it must give, shrunk to a trace that replays to the
            same finding without the manager; the report's reproduce line names the manager;
  faults    a manager that raises, dies, hangs or answers a split out of range is a
            block_manager_fault finding at the step it reached (exit 1); one that never greets,
            or greets wrongly, is exit 3 with one line; a bad --block-manager-timeout is exit 2;
  gate      `gate --block-manager` passes on the reference manager, its manager-live stage
            catching each broken variant, and fails (exit 1) at the engine stage on a variant;
  workers   the same campaign with --jobs 2 (two case workers, each starting a manager of its own)
            gives the same findings as with none;
  partial   partial-hash hits through the protocol: runs with a hash unit of 1 and 2 hold and
            record the manager's copies (format 5), which replay held without it; a campaign
            steered to hash units holds and reaches both copy features; a manager that keeps
            its copies to itself is found, one that answers a copy outside the pool is a
            block_manager_fault.

Usage: block_manager_cli_test.py MAMBACHECK PYTHON WORK_DIR PART.
"""

import json
import os
import pathlib
import shlex
import shutil
import sys

from cli_checks import expect, run

REPO = pathlib.Path(__file__).resolve().parents[2]
ADAPTER = REPO / "adapters" / "python"

# Each variant and the finding kind that names its bug.
VARIANTS = {
    "optimistic_frees": ("inconsistent_step", "in_flight_block_reused"),
    "null_gap_retirement": ("excess_retention",),
    "hit_short_at_boundary": ("wrong_prefix_hit",),
    "published_before_written": ("wrong_prefix_hit",),
    "eagle_split_unaligned": ("wrong_cached_state",),
    "lookahead_padding": ("bad_index",),
    "partial_tail_cached_again": ("wrong_prefix_hit",),
}
# A campaign steered toward what a variant needs (the default one draws hash units in a third
# of its larger align cases, and async partial tails rarely).
STEER = {"partial_tail_cached_again": ["--steer-boosts", "partial-hashes=missing"]}


def manager(python, *extra):
    return shlex.join([python, "-m", "mambacheck_adapter.block_manager", *extra])


def fuzz(mambacheck, command, work, name, cases, expected_rc, *extra):
    out = work / name
    shutil.rmtree(out, ignore_errors=True)
    report = work / f"{name}.json"
    p = run([mambacheck, "fuzz", "--level", "engine", "--cases", str(cases), "--seed", "7",
             "--out", str(out), "--report", str(report), "--block-manager", command, *extra],
            expected_rc)
    return p, json.loads(report.read_text())


def findings(report):
    level = report.get("engine", report)
    return level.get("findings", [])


def replay_finding(mambacheck, replay_line):
    args = shlex.split(replay_line)
    expect(args[:2] == ["mambacheck", "replay"], "a replay line", replay_line)
    p = run([mambacheck, *args[1:]], 1)
    line = next((l for l in p.stdout.splitlines() if l.startswith("FINDING")), "")
    expect(line, "the replay reports a finding", p.stdout)
    return line


def part_clean(mambacheck, python, work):
    p, report = fuzz(mambacheck, manager(python), work, "clean", 120, 0)
    expect(not findings(report), "no finding through the reference manager", p.stdout)
    expect("all cases held" in p.stdout, "the campaign held", p.stdout)
    trace = work / "run.jsonl"
    for flags in (["--num-spec", "2", "--async", "--eagle"], ["--pool-blocks", "10"],
                  ["--num-spec", "1", "--resets-per-million", "30000",
                   "--aborts-per-million", "30000"]):
        p = run([mambacheck, "run", "--preset", "tiny-mamba2", "--steps", "150", "--requests",
                 "16", "--seed", "3", "--block-manager", manager(python), "--record", str(trace),
                 *flags], 0)
        expect("held: oracle and host agree" in p.stdout, f"run {flags} held", p.stdout)
        header = json.loads(trace.read_text().splitlines()[0])
        expect(header["scheduler"] == {"cache_registration": "at_schedule",
                                       "attention_groups": 1, "shared_pool": True,
                                       **({"eagle": True} if "--eagle" in flags else {})},
               "the trace declares the manager's contract", json.dumps(header))
        expect(header.get("async_scheduling", False) == ("--async" in flags),
               "the trace says how it was scheduled", json.dumps(header))
        p = run([mambacheck, "replay", str(trace)], 0)
        expect("held" in p.stdout, "the recorded trace replays held without the manager",
               p.stdout)


def part_variants(mambacheck, python, work):
    for variant, kinds in VARIANTS.items():
        p, report = fuzz(mambacheck, manager(python, "--variant", variant), work, variant, 400, 1,
                         *STEER.get(variant, []))
        found = findings(report)
        expect(len(found) == 1, f"{variant}: one finding", p.stdout)
        cx = found[0]["counterexample"]
        kind = cx["failure_kind"].removeprefix("finding:")
        expect(kind in kinds, f"{variant}: a finding of {kinds}", json.dumps(cx))
        expect(f"--variant {variant}" in cx["reproduce"],
               f"{variant}: reproduce names the manager", cx["reproduce"])
        line = replay_finding(mambacheck, cx["replay"])
        expect(f"FINDING at step {cx['first_difference']['step']} " in line and kind in line,
               f"{variant}: the shrunk trace replays to the same {kind}", line)


def patched_reference(python, patch):
    """The reference manager's worker with `patch` (Python source, `rm` the reference_manager
    module) applied before it starts."""
    return shlex.join([python, "-c",
                       "import sys\nfrom mambacheck_adapter import block_manager, "
                       f"reference_manager as rm\n{patch}\nsys.exit(block_manager.main())"])


def expect_fault(mambacheck, command, texts, what, *extra):
    """A 20-step run through `command` is a block_manager_fault whose output says each of
    `texts`."""
    p = run([mambacheck, "run", "--preset", "tiny-mamba2", "--steps", "20", "--block-manager",
             command, *extra], 1)
    expect("block_manager_fault" in p.stdout and all(t in p.stdout for t in texts), what,
           p.stdout)


def part_faults(mambacheck, python, work):
    dies = shlex.join([python, "-c",
                       "import sys\nprint('mambacheck-block-manager 1 attention_groups=0', "
                       "flush=True)\nsys.stdin.readline()\nprint('{\"contract\": "
                       "{\"registration\": \"at_schedule\"}}', flush=True)\n"
                       "sys.stdin.readline()\nsys.exit(3)"])
    expect_fault(mambacheck, dies, ["exited with code 3"],
                 "a manager that dies is a finding naming how it ended")
    raises = shlex.join([python, "-c",
                         "import sys\nprint('mambacheck-block-manager 1', flush=True)\n"
                         "sys.stdin.readline()\nprint('{\"contract\": {\"registration\": "
                         "\"at_schedule\"}}', flush=True)\nsys.stdin.readline()\n"
                         "print('error: KeyError: boom', flush=True)\nsys.stdin.read()"])
    expect_fault(mambacheck, raises, ["raised: KeyError: boom"],
                 "a manager that raises is a finding with its message")
    hangs = shlex.join([python, "-c",
                        "import sys, time\nprint('mambacheck-block-manager 1', flush=True)\n"
                        "sys.stdin.readline()\ntime.sleep(60)"])
    expect_fault(mambacheck, hangs, ["no answer within 1 s"], "a manager that hangs is a finding",
                 "--block-manager-timeout", "1")
    # A split that keeps more tokens than the request could schedule.
    overlong = patched_reference(
        python, "rm.ReferenceManager.aligned_split = lambda self, r, n, hit: n + 1")
    expect_fault(mambacheck, overlong, ["_mamba_block_aligned_split kept", "(0 .. "],
                 "a split past what the request could schedule is a finding")
    # A manager that forgets a finished request's tables without giving its blocks back: the
    # tables never show it (the shadow frees what they drop); its own pool does at the end.
    leaks = patched_reference(python, "def leaky_free(self, req_id):\n"
                                      "    for g in self.attention + self.mamba:\n"
                                      "        g.free(req_id)\n"
                                      "    self.hits.pop(req_id, None)\n"
                                      "rm.ReferenceManager.free = leaky_free")
    p = run([mambacheck, "run", "--preset", "tiny-mamba2", "--steps", "400", "--requests", "3",
             "--seed", "1", "--block-manager", leaks], 1)
    expect("FINDING: block_accounting: step 21: every request has finished, but the block "
           "manager's pool still counts 48 blocks as referenced: block 1 (1 references)" in p.stdout,
           "a manager that leaks blocks is a finding once every request finished", p.stdout)
    p = run([mambacheck, "run", "--preset", "tiny-mamba2", "--steps", "400", "--requests", "3",
             "--seed", "1", "--block-manager", manager(python)], 0)
    expect("held" in p.stdout, "the reference manager's pool is whole at the end", p.stdout)
    p = run([mambacheck, "run", "--preset", "tiny-mamba2", "--block-manager", "echo hello"], 3)
    expect(p.stderr.count("\n") == 1 and "greeted \"hello\"" in p.stderr,
           "a manager that greets wrongly: one line, exit 3", p.stderr)
    p = run([mambacheck, "run", "--preset", "tiny-mamba2", "--block-manager", "true"], 3)
    expect(p.stderr.count("\n") == 1 and "without a greeting" in p.stderr,
           "a manager that never greets: one line, exit 3", p.stderr)
    p = run([mambacheck, "run", "--preset", "tiny-mamba2", "--block-manager", manager(python),
             "--block-manager-timeout", "0"], 2)
    expect(p.stderr.count("\n") == 1 and "--block-manager-timeout" in p.stderr,
           "a bad timeout: one line, exit 2", p.stderr)


def part_gate(mambacheck, python, work):
    # The stages the manager changes; the rest of the gate is cli.gate_coverage's.
    gate = [mambacheck, "gate", "--backend", "host", "--kernel-cases", "5",
            "--require-coverage", "none", "--mutant-budget", "5s"]
    library = work / "library"  # one scenario: the library stage does not involve the manager
    shutil.rmtree(library, ignore_errors=True)
    library.mkdir()
    first = sorted((REPO / "scenarios" / "library").glob("*.jsonl"))[0]
    shutil.copy(first, library / first.name)
    gate += ["--library", str(library)]
    p = run([*gate, "--engine-cases", "5", "--out", str(work / "gate"), "--block-manager",
             manager(python)], 0)
    expect("6 of 6 broken variants caught" in p.stdout and "gate passed" in p.stdout,
           "the gate passes and is live on the reference manager", p.stdout)
    p = run([*gate, "--engine-cases", "40", "--out", str(work / "gate-variant"),
             "--block-manager", manager(python, "--variant", "null_gap_retirement")], 1)
    engine = next((l for l in p.stdout.splitlines() if l.startswith("  engine-fuzz")), "")
    expect("FAIL" in engine and "excess_retention" in engine,
           "the gate fails at the engine stage on a broken manager", p.stdout)


def part_workers(mambacheck, python, work):
    command = manager(python, "--variant", "null_gap_retirement")
    _, alone = fuzz(mambacheck, command, work, "alone", 60, 1, "--keep-going", "--jobs", "1",
                    "--no-isolate")
    _, workers = fuzz(mambacheck, command, work, "workers", 60, 1, "--keep-going",
                      "--jobs", "2")
    key = lambda r: sorted((f["signature"], f["counterexample"]["case_seed"])
                           for f in findings(r))
    expect(key(alone) == key(workers) and key(alone),
           "the same findings with case workers, each with its own manager",
           json.dumps([key(alone), key(workers)]))


def part_partial(mambacheck, python, work):
    trace = work / "partial.jsonl"
    for unit in ("1", "2"):
        p = run([mambacheck, "run", "--preset", "tiny-mamba2", "--steps", "400",
                 "--hash-block-size", unit, "--block-manager", manager(python), "--record",
                 str(trace)], 0)
        expect("held: oracle and host agree" in p.stdout, f"unit {unit}: the run held", p.stdout)
        lines = trace.read_text().splitlines()
        header = json.loads(lines[0])
        expect(header["version"] == 5 and header["scheduler"]["hash_block_size"] == int(unit),
               f"unit {unit}: a format 5 trace with the manager's hash unit", lines[0])
        copies = [c for line in lines[1:] for c in json.loads(line).get("block_copies", [])]
        expect(copies and all(len(c) == 3 and c[0] == 0 for c in copies),
               f"unit {unit}: the manager's copies are recorded with their group", str(copies))
        p = run([mambacheck, "replay", str(trace)], 0)
        expect("held" in p.stdout, f"unit {unit}: the trace replays held", p.stdout)
    p, report = fuzz(mambacheck, manager(python), work, "partial", 120, 0,
                     "--steer-boosts", "partial-hashes=missing")
    counts = report["coverage"]["counts"]
    expect(not findings(report) and counts["partial-hit-with-copy"] > 0 and
           counts["partial-tail-copy"] > 0,
           "a campaign steered to hash units holds and copies both ways", p.stdout)
    silent = patched_reference(python, "orig = rm.ReferenceManager.take_copies\n"
                                       "rm.ReferenceManager.take_copies = "
                                       "lambda self: (orig(self), [])[1]")
    p = run([mambacheck, "run", "--preset", "tiny-mamba2", "--steps", "400",
             "--hash-block-size", "1", "--block-manager", silent], 1)
    expect("FINDING: bad_write" in p.stdout, "copies the manager does not say are found",
           p.stdout)
    expect_fault(mambacheck, patched_reference(
        python, "rm.ReferenceManager.take_copies = lambda self: [[3, 1, 2]]"),
        ["block_copies: group 3 of a copy is not a group of the layout"],
        "a copy of no group is the manager's fault", "--hash-block-size", "1")


def main(argv):
    if len(argv) != 5:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    mambacheck, python, work, part = argv[1], argv[2], pathlib.Path(argv[3]), argv[4]
    work.mkdir(parents=True, exist_ok=True)
    os.environ["PYTHONPATH"] = str(ADAPTER)
    parts = {"clean": part_clean, "variants": part_variants, "faults": part_faults,
             "gate": part_gate, "workers": part_workers, "partial": part_partial}
    parts[part](mambacheck, python, work)
    print(f"block manager {part}: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
