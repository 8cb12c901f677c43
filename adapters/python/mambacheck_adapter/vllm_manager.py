"""The `vllm` manager of the block-manager worker: vLLM's own KVCacheManager, imported from the
`vllm` package of this Python, under mambacheck's scheduler model (docs/block-manager.md).

Written against vLLM's API at upstream commit 6a391a931a92 (2026-08-18):
- `KVCacheManager(kv_cache_config=, max_model_len=, scheduler_block_size=, hash_block_size=,
  max_in_flight_tokens=, enable_caching=, use_eagle=, num_prefill_lookahead=, log_stats=,
  enable_kv_cache_events=, dcp_world_size=, pcp_world_size=, metrics_collector=, watermark=)`
  over a `KVCacheConfig` of one full-attention group and the Mamba groups
  (`MambaSpec(mamba_cache_mode=..., num_speculative_blocks=nsb)`): the hybrid coordinator, one
  shared BlockPool;
- `get_computed_blocks(request) -> (blocks, num_tokens, shared_prefix_boundary)`,
  `allocate_slots(request, num_new_tokens, num_new_computed_tokens=, new_computed_blocks=,
  num_lookahead_tokens=)` (None: preempt), `free`, `cache_blocks`, `new_step_starts`,
  `reset_prefix_cache`, `get_blocks(request_id).get_block_ids()`, and the copy-on-write copies
  of partial-hash hits as `take_kv_cache_block_copies()` drains them, group by group
  (`coordinator.single_type_managers[i].take_pending_cow_copies()`, whose order it keeps), so
  that each copy is said with its Mamba group; both ends are freed as the Scheduler's
  `_free_cow_retained_blocks` does (at once, or with defer_block_free once the step reported);
- `Request(request_id, prompt_token_ids, sampling_params, pooling_params, arrival_time=,
  block_hasher=)` with the counters the scheduler keeps (`num_computed_tokens`,
  `num_in_flight_tokens`, `num_output_placeholders`, `shared_prefix_boundary`) and
  `append_output_token_ids`;
- `Scheduler._mamba_block_aligned_split(self, request, num_new_tokens,
  num_new_local_computed_tokens, num_external_computed_tokens)`, vLLM's own split of a prefill
  chunk in align mode, called unbound with the few fields of the scheduler it reads
  (`cache_config.block_size`, `use_eagle`, `max_num_scheduled_tokens`,
  `scheduler_config.long_prefill_token_threshold`, `hash_block_size`,
  `mamba_partial_cache_hit`). Where vLLM's scheduler module does not import, the worker greets
  split=0 and says why on stderr, and mambacheck's model splits.
Hashes are vLLM's own (`get_request_block_hasher` over sha256) every `hash_block_size` tokens
as mambacheck sets it up (vLLM's `prefix_match_unit`), else at the granularity vLLM picks by
default, gcd of the attention and Mamba block sizes. Below the Mamba block, in align mode, that
turns on partial-hash hits (`coordinator.enable_partial_hash_hits`).
"""

import math
import sys
import types

from .reference_manager import CopyRetention, ManagerError

import torch  # vLLM's dtypes; only their names matter to the manager
from vllm.sampling_params import SamplingParams
from vllm.utils.hashing import sha256
from vllm.v1.core import kv_cache_utils
from vllm.v1.core.kv_cache_manager import KVCacheManager
from vllm.v1.kv_cache_interface import (FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec,
                                        MambaSpec)
from vllm.v1.request import Request

MAX_MODEL_LEN = 1 << 20

try:
    from vllm.v1.core.sched.scheduler import Scheduler
    ALIGNED_SPLIT = Scheduler._mamba_block_aligned_split
except Exception as e:  # noqa: BLE001: any failure to import the scheduler, said once
    ALIGNED_SPLIT = None
    print(f"mambacheck_adapter.vllm_manager: vLLM's Scheduler does not import here "
          f"({type(e).__name__}: {e}); prefill chunks are split by mambacheck's model",
          file=sys.stderr)


class VllmManager:
    SPLITS = ALIGNED_SPLIT is not None

    @staticmethod
    def refuses(setup):
        """Sizes whose hash unit vLLM derives below the Mamba block outside align mode (an
        attention block that does not hold a whole Mamba block in all mode): vLLM turns on no
        partial-hash hits there, and mambacheck's model has no such hashing."""
        B = setup["block_size"]
        A = setup.get("attention_block_size", B)
        if not setup.get("hash_block_size") and math.gcd(A, B) < B:
            return (f"attention block {A} and Mamba block {B}: vLLM hashes by {math.gcd(A, B)} "
                    f"tokens in {setup.get('mode', 'align')} mode, which mambacheck's model "
                    f"does not")
        return None

    def __init__(self, setup):
        self.B = setup["block_size"]
        self.A = setup.get("attention_block_size", self.B)
        self.nsb = setup.get("num_spec_blocks", 0)
        self.eagle = bool(setup.get("eagle", False))
        self.num_mamba = setup["mamba_groups"]
        hash_block = setup.get("hash_block_size") or math.gcd(self.A, self.B)
        kv_cache_utils.init_none_hash(sha256)
        self.hasher = kv_cache_utils.get_request_block_hasher(hash_block, sha256)
        groups = [KVCacheGroupSpec(["attn.0"], FullAttentionSpec(
            block_size=self.A, num_kv_heads=1, head_size=8, dtype=torch.float16))]
        for g in range(self.num_mamba):
            groups.append(KVCacheGroupSpec([f"mamba.{g}"], MambaSpec(
                block_size=self.B, shapes=((3, 8), (2, 2, 2)),
                dtypes=(torch.float16, torch.float32),
                mamba_cache_mode=setup.get("mode", "align"), num_speculative_blocks=self.nsb)))
        self.kvm = KVCacheManager(
            kv_cache_config=KVCacheConfig(num_blocks=setup["num_blocks"], kv_cache_tensors=[],
                                          kv_cache_groups=groups),
            max_model_len=MAX_MODEL_LEN, scheduler_block_size=math.lcm(self.A, self.B),
            hash_block_size=hash_block, max_in_flight_tokens=None, enable_caching=True,
            use_eagle=self.eagle, num_prefill_lookahead=1 if self.eagle else 0,
            log_stats=False, enable_kv_cache_events=False, dcp_world_size=1, pcp_world_size=1,
            metrics_collector=None, watermark=0.0)
        self.requests = {}
        self.hits = {}
        self.partial = (setup.get("mode", "align") == "align" and hash_block < self.B and
                        self.kvm.coordinator.enable_partial_hash_hits)
        self.hash_block = hash_block
        self.retention = CopyRetention(bool(setup.get("defer_block_free", False)),
                                       self.kvm.block_pool.free_blocks)
        # The scheduler fields vLLM's split reads (Scheduler.__init__ at 6a391a931a92).
        self.scheduler_view = types.SimpleNamespace(
            cache_config=types.SimpleNamespace(block_size=self.B), use_eagle=self.eagle,
            max_num_scheduled_tokens=setup.get("max_num_scheduled_tokens", 0),
            scheduler_config=types.SimpleNamespace(long_prefill_token_threshold=0),
            hash_block_size=hash_block, mamba_partial_cache_hit=self.partial)

    def contract(self):
        return {"registration": "at_schedule", "eagle": self.eagle, "attention_groups": 1,
                "shared_pool": True, "unordered_writer": False,
                "hash_block_size": self.hash_block if self.partial else 0}

    def request(self, message):
        req_id = message["id"]
        tokens = message.get("tokens", [])
        r = self.requests.get(req_id)
        if r is None:
            r = Request(request_id=req_id, prompt_token_ids=list(tokens),
                        sampling_params=SamplingParams(max_tokens=MAX_MODEL_LEN),
                        pooling_params=None, arrival_time=float(len(self.requests)),
                        block_hasher=self.hasher)
            self.requests[req_id] = r
        else:
            for t in tokens:
                r.append_output_token_ids(t)
        if r.num_tokens != message["num_tokens"]:
            raise ManagerError(f"request {req_id}: {r.num_tokens} tokens known, num_tokens says "
                               f"{message['num_tokens']}")
        r.num_computed_tokens = message["num_computed"]
        r.num_in_flight_tokens = message.get("num_in_flight", 0)
        r.num_output_placeholders = message.get("placeholders", 0)
        return r

    def new_step_starts(self):
        self.retention.step_planned()
        self.kvm.new_step_starts()

    def take_copies(self):
        """take_kv_cache_block_copies, each copy with its group: the Mamba groups' said as
        [group, source, destination], the attention group's (the runner copies its KV, which
        mambacheck does not hold) only freed."""
        copies, retained = [], []
        for i, mgr in enumerate(self.kvm.coordinator.single_type_managers):
            for src, dst in mgr.take_pending_cow_copies():
                retained += [src, dst]
                if i >= 1:
                    copies.append([i - 1, src.block_id, dst.block_id])
        self.retention.taken(retained)
        return copies

    def get_computed_blocks(self, r):
        blocks, num_tokens, r.shared_prefix_boundary = self.kvm.get_computed_blocks(r)
        self.hits[r.request_id] = blocks
        return num_tokens

    def aligned_split(self, r, num_new, num_new_computed):
        return ALIGNED_SPLIT(self.scheduler_view, r, num_new, num_new_computed, 0)

    def split(self, groups):
        groups = [list(g) for g in groups]
        return groups[1:], groups[:1]

    def allocate_slots(self, r, num_new, num_new_computed, lookahead):
        hit = self.hits.pop(r.request_id, None) if num_new_computed > 0 else None
        got = self.kvm.allocate_slots(
            r, num_new, num_new_computed_tokens=num_new_computed,
            new_computed_blocks=hit if hit is not None else self.kvm.empty_kv_cache_blocks,
            num_lookahead_tokens=lookahead)
        if got is None:
            return None
        fresh = r.num_computed_tokens == 0
        table = self.kvm.get_blocks(r.request_id).get_block_ids()
        return self.split(table if fresh else got.get_block_ids())

    def cache_blocks(self, r, num_tokens):
        self.kvm.cache_blocks(r, num_tokens)

    def free(self, req_id):
        r = self.requests.get(req_id)
        if r is not None:
            self.kvm.free(r)
        self.hits.pop(req_id, None)

    def output_processed(self):
        self.retention.output_processed()

    def reset_prefix_cache(self):
        return self.kvm.reset_prefix_cache()

    def tables(self, req_id):
        return self.split(self.kvm.get_blocks(req_id).get_block_ids())

    def pool_state(self):
        pool = self.kvm.block_pool
        return {"free": [b.block_id for b in pool.free_block_queue.get_all_free_blocks()],
                "refs": {str(b.block_id): b.ref_cnt for b in pool.blocks if b.ref_cnt > 0},
                "hashed": [b.block_id for b in pool.blocks if b.block_hash is not None]}
