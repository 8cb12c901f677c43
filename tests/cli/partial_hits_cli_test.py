"""Partial-hash hits end to end: a run with a hash unit below the block size records its block
copies (trace format 5) and replays clean; the same trace without its copies is a finding, the
producer's missing copy a write into its registered block, a hit's missing copy a read of a state
nothing wrote; impossible units are one error line and exit 2.

usage: partial_hits_cli_test.py MAMBACHECK WORK_DIR
"""
import json
import os
import shutil
import sys

from cli_checks import expect, run

MC, WORK = sys.argv[1], sys.argv[2]
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)


def path(name):
    return os.path.join(WORK, name)


trace = path("unit1.jsonl")
r = run([MC, "run", "--preset", "tiny-mamba2", "--steps", "400", "--hash-block-size", "1",
         "--record", trace], 0)
expect("held: oracle and host agree on every step" in r.stdout, "the run holds", r.stdout)
lines = open(trace).read().splitlines()
header = json.loads(lines[0])
expect(header["version"] == 5, f"format version {header['version']}")
expect(header["scheduler"]["hash_block_size"] == 1, f"scheduler {header['scheduler']}")
steps = [json.loads(l) for l in lines[1:]]
copies = [s for s in steps if "block_copies" in s]


def hit_blocks(s):
    """The blocks at the hit column of the step's hits that end mid-block (B = 4), group 0."""
    admitted = [(n["num_computed_tokens"], n["block_ids"]) for n in s.get("new_requests", [])
                if "num_computed_tokens" in n]
    admitted += [(c["num_computed_tokens"], c["new_block_ids"])
                 for c in s.get("cached_requests", []) if c.get("resumed")]
    return {table[0][(n + 3) // 4 - 1] for n, table in admitted if n % 4}


hits = [s for s in copies if hit_blocks(s)]
expect(len(copies) >= 20 and hits, f"{len(copies)} steps with copies, {len(hits)} with a hit's")
r = run([MC, "replay", trace], 0)
expect(r.stdout.count("held:") == 1, "the replay holds", r.stdout)
# A runner that drops the copies: the first copy's destination differs, and says it is one.
r = run([MC, "replay", trace, "--mutant", "block_copies_skipped"], 1)
expect("MISMATCH at step" in r.stdout and "the destination of the step's block copy" in r.stdout,
       "block_copies_skipped: the copy's destination differs", r.stdout)


def without(name, drop):
    """The trace less the copies `drop(step, copy)` says to leave out."""
    out = [lines[0]]
    for s in steps:
        s = dict(s)
        if "block_copies" in s:
            s["block_copies"] = [c for c in s["block_copies"] if not drop(s, c)]
            if not s["block_copies"]:
                del s["block_copies"]
        out.append(json.dumps(s))
    open(path(name), "w").write("\n".join(out) + "\n")
    return path(name)


# Every copy left out: the first one is a producer's, which then writes its registered block.
r = run([MC, "replay", without("none.jsonl", lambda s, c: True)], 1)
expect("bad_write" in r.stdout and "registered in the prefix cache" in r.stdout,
       "no copies: the producer writes its registered block", r.stdout)
# Only the first hit's copy left out: the hit reads a block nothing copied into.
first = hits[0]["index"]


def first_hits_copy(s, c):
    return s["index"] == first and c[2] in hit_blocks(s)


r = run([MC, "replay", without("nohit.jsonl", first_hits_copy)], 1)
expect(f"FINDING at step {first}" in r.stdout and "wrong_read" in r.stdout,
       f"the hit of step {first} without its copy", r.stdout)

for args, part in ((["--hash-block-size", "3"], "must divide mamba_block_size 4"),
                   (["--hash-block-size", "2", "--mode", "all"], "needs align mode"),
                   (["--hash-block-size", "2", "--eagle"], "EAGLE")):
    r = run([MC, "run", "--preset", "tiny-mamba2", "--steps", "5", *args], 2)
    err = r.stderr.strip().splitlines()
    expect(len(err) == 1 and part in err[0], f"{args}: one line saying '{part}'", r.stderr)
print("partial hits: all checks held")
