"""Block-manager worker: the KV cache manager under test, driven by mambacheck's scheduler model.

    python3 -m mambacheck_adapter.block_manager [--manager reference|vllm] [--variant NAME[,NAME]]

`mambacheck run|fuzz --level engine|gate|bench --engine --block-manager 'COMMAND'` starts it
once per case worker and makes, through it, every call vLLM's Scheduler makes on its
KVCacheManager (docs/block-manager.md). Protocol: one JSON object per line each way.
- Once the manager is loaded the worker writes one greeting line:
  `mambacheck-block-manager 1 manager=NAME attention_groups=N split=0|1 variants=NAME,...`:
  its full-attention groups, whose blocks come from the pool too (mambacheck sizes the pool for
  them), whether it answers the aligned split (else mambacheck's model splits), and the broken
  variants it knows.
- Each request line is an object with "op"; the answer is one JSON object, `error: MESSAGE`
  (the manager raised: a finding against it) or `fatal: MESSAGE` (the worker cannot go on).
  Requests carry a request's counters as {"id", "tokens" (ids not sent before), "num_tokens",
  "num_prompt", "num_computed", "num_in_flight", "placeholders"}.
  - setup {block_size, attention_block_size, num_spec_blocks, mode (align|all), mamba_groups,
    num_blocks, eagle, async, defer_block_free, max_model_len, max_num_scheduled_tokens,
    hash_block_size (0: the block size)}:
    a fresh manager for one run; answers {"contract": {...}}, the promises a replay holds the
    tables to (scenarios/FORMAT.md, the header's `scheduler`), or {"refused": REASON} for
    sizes it cannot serve (the run is refused with exit 2; a campaign skips the case).
  - step: new_step_starts(); {}.
  - copies (set up with a hash_block_size below block_size, once a step is planned):
    take_kv_cache_block_copies(); {"copies": [[group, source, destination], ...]}, group a
    Mamba group (0 first); the manager releases both ends of each once the step ran.
  - split {req, num_new, num_new_computed}: Scheduler._mamba_block_aligned_split for a prefill
    chunk in align mode (num_new_computed: an admitted request's hit); {"tokens": N}.
  - hit {req}: get_computed_blocks(); {"tokens": N}.
  - allocate {req, num_new, num_new_computed, lookahead}: allocate_slots(); {"ok": false}
    (None: preempt), or {"ok": true, "new": [...], "attention_new": [...], "held": [...],
    "attention_held": [...]}: per group, the blocks appended and the whole table held now.
  - free {id, req} (req's num_in_flight: tokens of its rows a step not completed still runs);
    cache {req, num_tokens}; reset: {"ok": bool}; pool: {"free", "refs", "hashed"}.
  - output: the output of the step in flight was processed (async); {}.
- End of input: the worker exits 0.
"""

import argparse
import json
import os
import sys
import traceback

from . import one_line, reference_manager

PROTOCOL_VERSION = 1
MANAGERS = ("reference", "vllm")
# Both managers are a hybrid coordinator: one full-attention group before the Mamba groups.
ATTENTION_GROUPS = 1


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python3 -m mambacheck_adapter.block_manager",
                                description="Serve a KV cache manager to mambacheck's "
                                            "scheduler model, one JSON request per line")
    p.add_argument("--manager", choices=MANAGERS, default="reference",
                   help="reference: this adapter's manager; vllm: vLLM's KVCacheManager from "
                        "the installed vllm package (vllm_manager.py)")
    p.add_argument("--variant", default="",
                   help="broken variants of the reference manager, comma-separated")
    return p.parse_args(argv)


class Session:
    def __init__(self, make_manager):
        self.make_manager = make_manager
        self.manager = None

    def answer(self, message):
        op = message.get("op")
        if op == "setup":
            self.manager = None
            refused = getattr(self.make_manager, "refuses", lambda setup: None)(message)
            if refused:
                return {"refused": refused}
            self.manager = self.make_manager(dict(message, attention_groups=ATTENTION_GROUPS))
            return {"contract": self.manager.contract()}
        m = self.manager
        if m is None:
            raise reference_manager.ManagerError(f"{op!r} before setup")
        if op == "step":
            m.new_step_starts()
            return {}
        if op == "copies":
            return {"copies": m.take_copies()}
        if op == "hit":
            return {"tokens": m.get_computed_blocks(m.request(message["req"]))}
        if op == "split":
            return {"tokens": m.aligned_split(m.request(message["req"]), message["num_new"],
                                              message.get("num_new_computed", 0))}
        if op == "allocate":
            req = m.request(message["req"])
            got = m.allocate_slots(req, message["num_new"], message.get("num_new_computed", 0),
                                   message.get("lookahead", 0))
            if got is None:
                return {"ok": False}
            new_mamba, new_attention = got
            held_mamba, held_attention = m.tables(message["req"]["id"])
            return {"ok": True, "new": new_mamba, "attention_new": new_attention,
                    "held": held_mamba, "attention_held": held_attention}
        if op == "free":
            if "req" in message:
                m.request(message["req"])
            m.free(message["id"])
            return {}
        if op == "cache":
            m.cache_blocks(m.request(message["req"]), message["num_tokens"])
            return {}
        if op == "output":
            m.output_processed()
            return {}
        if op == "reset":
            return {"ok": bool(m.reset_prefix_cache())}
        if op == "pool":
            return m.pool_state()
        raise reference_manager.ManagerError(f"unknown op {op!r}")


def make_factory(args):
    variants = tuple(v for v in args.variant.split(",") if v)
    if args.manager == "reference":
        return lambda setup: reference_manager.ReferenceManager(setup, variants)
    from . import vllm_manager  # imports vllm: only when asked for
    if variants:
        raise ValueError("--variant: the vllm manager has no variants")
    return vllm_manager.VllmManager


def serve(stdin, stdout, session):
    for raw in stdin:
        line = raw.strip()
        if not line:
            continue
        try:
            message = json.loads(line)
            reply = json.dumps(session.answer(message), separators=(",", ":"))
        except (reference_manager.ManagerError, KeyError, TypeError, ValueError) as e:
            reply = f"error: {type(e).__name__}: {one_line(e)}"
        except Exception as e:  # noqa: BLE001: the manager's own failure is a finding
            traceback.print_exc(file=sys.stderr)
            reply = f"error: {type(e).__name__}: {one_line(e)}"
        stdout.write(reply + "\n")
        stdout.flush()
    return 0


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    protocol_out = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        factory = make_factory(args)
        if args.manager == "reference":  # an unknown variant is refused here, not at setup
            factory({"block_size": 16, "num_blocks": 8, "mamba_groups": 1})
    except Exception as e:  # noqa: BLE001: any start-up failure: one line, exit 1
        print(f"mambacheck_adapter.block_manager: cannot start: {type(e).__name__}: {e}",
              file=sys.stderr)
        return 1
    known = ",".join(reference_manager.VARIANTS) if args.manager == "reference" else ""
    splits = getattr(factory, "SPLITS", True)
    protocol_out.write(f"mambacheck-block-manager {PROTOCOL_VERSION} manager={args.manager} "
                       f"attention_groups={ATTENTION_GROUPS} split={int(bool(splits))} "
                       f"variants={known}\n")
    protocol_out.flush()
    return serve(sys.stdin, protocol_out, Session(factory))


if __name__ == "__main__":
    sys.exit(main())
