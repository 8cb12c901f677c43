"""Record a vLLM run's scheduler steps as a mambacheck trace (scenarios/FORMAT.md, version 4:
the header's "scheduler" says what vLLM's block manager promises beyond its tables; version 5
with partial-hash hits: the hash unit, and each step's block copies).

A vLLM user loads this module in the process that runs the model (the worker, with
tensor parallelism the rank-0 worker), makes one TraceRecorder, and calls record() once per
executed step with the step's SchedulerOutput and what was sampled for each request
(README.md in this folder shows where). Python 3 standard library only.

What the recorder has to reconstruct, and how:
- Token ids of every scheduled row: vLLM sends a request's prompt once (scheduled_new_reqs)
  and afterwards only counts. The recorder keeps each live request's tokens (prompt plus the
  tokens sampled so far) and takes the row's tokens from positions num_computed ..
  num_computed + scheduled - drafts - 1, then the drafts from scheduled_spec_decode_tokens.
  Steps are recorded in order, each once its own samples are known (the engine core's
  update_from_output has both), so step N's samples are in before step N+1 is written.
- Async scheduling (async_scheduling=True): vLLM's AsyncScheduler plans step N+1 while step N
  runs. Its scheduled_cached_reqs.num_computed_tokens then counts step N's row as if every
  draft were accepted (the scheduler advanced it by num_scheduled_tokens and rolls rejected
  drafts back only in update_from_output), and scheduled_spec_decode_tokens holds -1
  placeholders (the worker fills in the drafts). The recorder writes planned_during (the step
  before), the true count the runner starts from (the optimistic one less the rejected drafts
  of the request's row in step N) and, where they differ, the optimistic count as
  num_computed_tokens_optimistic. Placeholder drafts are taken from draft_token_ids when given;
  otherwise an accepted draft is the token sampled in its place, and a rejected one (its value
  never reaches the scheduler) a stand-in that differs from the token sampled there.
- The accepted count of a row with drafts is the number of tokens sampled for it (accepted
  drafts plus the bonus token); a row without drafts has 1.
- The header's "scheduler" object is vLLM's contract as of upstream 6a391a9: allocate_slots
  registers the boundaries of the known tokens it schedules as it plans a step
  ("cache_registration": "at_schedule"); with EAGLE or MTP drafting (use_eagle=True, vLLM's
  speculative_config.use_eagle()) the hybrid coordinator's prefix hit drops the attention
  group's last block ("eagle"); a KV connector that loads state out of step order
  (unordered_writer=True) makes vLLM defer frees, and replay then holds the trace to that.
- Only the mamba KV-cache groups belong in the trace: block ids of attention groups are
  dropped (mamba_group_indices).
- Partial-hash hits (hash_block_size below the mamba block size): the SchedulerOutput's
  kv_cache_block_copies name a source and a destination block, no group. The recorder knows
  each block's group from the tables it saw (a hit's copy lands in the new request's table, a
  producer's copy reads its own table's block) and writes the mamba groups' copies as
  [group, source, destination]; the attention groups' copies are dropped with their tables.
- Sets (resumed, preempted, finished ids) are written sorted, so a trace is deterministic.
- Finished ids of requests the recorder never saw scheduled (aborted while waiting) are
  dropped: the format only lists live requests.
- reset_prefix_cache does not travel in a SchedulerOutput: call note_reset_prefix_cache()
  when the engine's prefix cache is reset; the next recorded step carries the flag. With async
  scheduling a reset lands while a step is in flight, whose outputs vLLM then discards for the
  force-preempted requests (async_tokens_to_discard, later num_stale_output_tokens): the format
  cannot say that yet, so an async recorder refuses the reset (RecorderError).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Iterable, Mapping, Optional, Sequence

FORMAT_NAME = "mambacheck-trace"
FORMAT_VERSION = 1
FORMAT_VERSION_ASYNC = 3
FORMAT_VERSION_SCHEDULER = 4
FORMAT_VERSION_COPIES = 5
RECORDER_NAME = "mambacheck_recorder"
DERIVED_VOCAB_SIZE_DEFAULT = 32768

_MASK64 = (1 << 64) - 1


class RecorderError(RuntimeError):
    """The scheduler output cannot be written as a valid trace step."""


def splitmix64(x: int) -> int:
    """splitmix64 on unsigned 64-bit integers, as FORMAT.md "Derived prompts" defines it."""
    z = (x + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def derived_token(stream_id: int, position: int, vocab_size: int = DERIVED_VOCAB_SIZE_DEFAULT) -> int:
    """Token `position` of stream `stream_id` (FORMAT.md, "Derived prompts")."""
    return splitmix64(((stream_id & 0xFFFFFFFF) << 32) | (position & 0xFFFFFFFF)) % vocab_size


def derive_prompt(prompt_len: int, prefix_id: int, prefix_len: Optional[int] = None,
                  suffix_id: int = 0, vocab_size: int = DERIVED_VOCAB_SIZE_DEFAULT) -> list[int]:
    """The token ids a reader expands a derived prompt into."""
    if prefix_len is None:
        prefix_len = prompt_len
    return [derived_token(prefix_id if i < prefix_len else suffix_id, i, vocab_size)
            for i in range(prompt_len)]


def cache_config(*, mamba_block_size: int, attn_block_size: int, num_spec_tokens: int = 0,
                 num_spec_blocks: Optional[int] = None, mode: str = "align",
                 conv_layout: str = "SD", runner: str = "v1", tp_size: int = 1) -> dict:
    """The header's "config" object; num_spec_blocks defaults to num_spec_tokens (both modes)."""
    return {
        "mamba_block_size": int(mamba_block_size),
        "attn_block_size": int(attn_block_size),
        "num_spec_tokens": int(num_spec_tokens),
        "num_spec_blocks": int(num_spec_tokens if num_spec_blocks is None else num_spec_blocks),
        "mode": mode,
        "conv_layout": conv_layout,
        "runner": runner,
        "tp_size": int(tp_size),
    }


def _field(obj: Any, name: str, default: Any = None) -> Any:
    return getattr(obj, name, default) if obj is not None else default


@dataclasses.dataclass
class _Request:
    """What the recorder keeps of a live request: its tokens so far, and its last row (the step,
    the true count it started from, its scheduled tokens and the tokens it committed)."""

    tokens: list[int]
    last_step: int = -1
    last_start: int = 0
    last_scheduled: int = 0
    last_committed: int = 0


class TraceRecorder:
    """Writes one trace file: the header now, one flushed line per record() call."""

    def __init__(self, path: str | os.PathLike, *, config: Mapping[str, Any],
                 layout: Mapping[str, Any], num_mamba_groups: int,
                 mamba_group_indices: Optional[Sequence[int]] = None,
                 block_pool_sizes: Optional[Sequence[int]] = None,
                 source: Optional[Mapping[str, Any]] = None,
                 num_spec_tokens: Optional[int] = None, async_scheduling: bool = False,
                 use_eagle: bool = False, unordered_writer: bool = False,
                 attention_group_indices: Optional[Sequence[int]] = None,
                 scheduler: Optional[Mapping[str, Any]] = None,
                 hash_block_size: Optional[int] = None):
        """`layout`: {"preset": NAME[, "num_blocks": N]} or an inline spec (FORMAT.md).
        `mamba_group_indices`: which KV-cache groups of a block_ids tuple are mamba groups,
        in trace group order (default: 0..num_mamba_groups-1, every group is a mamba group).
        `async_scheduling`: vLLM's scheduler_config.async_scheduling (one step in flight).
        `use_eagle`: vLLM's speculative_config.use_eagle() (EAGLE, EAGLE-3, MTP).
        `unordered_writer`: a KV connector loads state blocks out of step order.
        `attention_group_indices`: the full-attention KV-cache groups of a block_ids tuple;
        their tables are recorded too (attention_block_ids), and the header says that every
        group shares one pool (layout num_blocks: kv_cache_config.num_blocks).
        `scheduler`: the header's "scheduler" object as given, instead of vLLM's contract
        built from the two above ({} writes none: mambacheck's own engine's defaults).
        `hash_block_size`: vLLM's hash_block_size (cache_config.prefix_match_unit, or the gcd
        of the groups' block sizes); below the mamba block size (align mode: partial-hash
        hits) the header says it and each step carries its kv_cache_block_copies.
        """
        self._groups = list(range(num_mamba_groups) if mamba_group_indices is None
                            else mamba_group_indices)
        if len(self._groups) != num_mamba_groups or num_mamba_groups < 1:
            raise ValueError("mamba_group_indices must name num_mamba_groups >= 1 groups")
        self._attention = [int(g) for g in attention_group_indices or ()]
        self._num_spec_tokens = int(config["num_spec_tokens"] if num_spec_tokens is None
                                    else num_spec_tokens)
        self._requests: dict[str, _Request] = {}
        self._index = 0
        self._reset_pending = False
        self._async = bool(async_scheduling)
        # block id -> (the KV-cache group it was last seen in, the step that showed it)
        self._group_of: dict[int, tuple[int, int]] = {}
        mamba_block_size = int(config.get("mamba_block_size", 0))
        partial = bool(hash_block_size) and int(hash_block_size) < mamba_block_size
        self._copies = partial or bool(scheduler and scheduler.get("hash_block_size"))
        if scheduler is None:
            scheduler = {"cache_registration": "at_schedule", "eagle": bool(use_eagle),
                         "unordered_writer": bool(unordered_writer),
                         "attention_groups": len(self._attention),
                         "shared_pool": bool(self._attention),
                         "hash_block_size": int(hash_block_size) if partial else 0}
            scheduler = {key: value for key, value in scheduler.items() if value}
        version = (FORMAT_VERSION_COPIES if self._copies
                   else FORMAT_VERSION_SCHEDULER if scheduler
                   else FORMAT_VERSION_ASYNC if self._async else FORMAT_VERSION)
        header: dict[str, Any] = {"format": FORMAT_NAME, "version": version,
                                  "config": dict(config), "layout": dict(layout)}
        if block_pool_sizes is not None:
            header["block_pool_sizes"] = [int(n) for n in block_pool_sizes]
        if self._async:
            header["async_scheduling"] = True
        if scheduler:
            header["scheduler"] = dict(scheduler)
        header["source"] = {"recorder": f"{RECORDER_NAME} {version}", **(source or {})}
        self._file = open(path, "w", encoding="utf-8", newline="\n")
        self._put(header)

    # -- public -------------------------------------------------------------------------

    def note_reset_prefix_cache(self) -> None:
        """The prefix cache was reset: the next recorded step carries reset_prefix_cache."""
        if self._async:
            raise RecorderError(
                "reset_prefix_cache with async scheduling: the step in flight's outputs of the "
                "force-preempted requests are discarded by vLLM, which a trace cannot say yet")
        self._reset_pending = True

    def record(self, scheduler_output: Any, sampled_token_ids: Mapping[str, Sequence[int]],
               batch_order: Optional[Sequence[str]] = None,
               draft_token_ids: Optional[Mapping[str, Sequence[int]]] = None,
               planned_during_previous: Optional[bool] = None,
               held_tables: Optional[Mapping[str, Any]] = None) -> dict:
        """Writes one step and returns it (as the dict written).

        `sampled_token_ids`: req_id -> the tokens sampled for it this step (accepted drafts
        plus the bonus token; empty for a partial prefill chunk). `batch_order`: the runner's
        row order (e.g. input_batch.req_ids); default: the order of num_scheduled_tokens.
        `draft_token_ids`: req_id -> the drafts the worker verified, where the scheduler
        output holds -1 placeholders (async scheduling); default: reconstructed (module doc).
        `planned_during_previous`: whether the scheduler planned this step while the step
        recorded before it ran; default: with async scheduling every step after the first.
        `held_tables`: req_id -> its whole table per KV-cache group as the block manager holds
        it once this step was planned (KVCacheManager.get_blocks(req_id), taken where the
        scheduler made this output): written for running requests as held_block_ids, so that a
        replay sees the blocks the manager kept and can judge what it should have freed.
        """
        finished = sorted(r for r in (_field(scheduler_output, "finished_req_ids") or ())
                          if r in self._requests)
        for req_id in finished:
            del self._requests[req_id]
        if planned_during_previous is None:
            planned_during_previous = self._async and self._index > 0
        if planned_during_previous and not self._async:
            raise RecorderError("a step planned during another needs async_scheduling=True")
        planned_during = self._index - 1 if planned_during_previous and self._index > 0 else None
        computed: dict[str, int] = {}
        step: dict[str, Any] = {"index": self._index}
        if planned_during is not None:
            step["planned_during"] = planned_during
        new_requests = self._new_requests(scheduler_output, computed)
        cached_requests = self._cached_requests(scheduler_output, computed, planned_during)
        for entry in cached_requests:
            held = (held_tables or {}).get(entry["req_id"])
            if held is not None and not entry.get("resumed"):
                self._note_groups(held)
                entry["held_block_ids"] = self._mamba_rows(held)
        copies = self._block_copies(scheduler_output)
        scheduled = self._scheduled_rows(scheduler_output, computed, sampled_token_ids,
                                         batch_order, draft_token_ids or {})
        preempted = sorted(_field(scheduler_output, "preempted_req_ids") or ())
        for key, value in (("new_requests", new_requests), ("cached_requests", cached_requests),
                           ("scheduled", scheduled), ("preempted_req_ids", preempted),
                           ("finished_req_ids", finished), ("block_copies", copies)):
            if value:
                step[key] = value
        if self._reset_pending:
            step["reset_prefix_cache"] = True
            self._reset_pending = False
        self._put(step)
        self._index += 1
        return step

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> "TraceRecorder":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- one step -----------------------------------------------------------------------

    def _mamba_rows(self, block_ids: Any, groups: Optional[Sequence[int]] = None
                    ) -> list[list[int]]:
        """The mamba groups' rows of a per-KV-cache-group tuple (None: nothing new), or those
        of `groups`."""
        groups = self._groups if groups is None else groups
        if block_ids is None:
            return [[] for _ in groups]
        rows = list(block_ids)
        try:
            return [[int(b) for b in rows[g]] for g in groups]
        except IndexError:
            raise RecorderError(f"block ids have {len(rows)} groups, the recorder expects "
                                f"groups {list(groups)}") from None

    def _note_groups(self, block_ids: Any) -> None:
        """Remembers the KV-cache group of every block of a per-group tuple."""
        for g, row in enumerate(block_ids or ()):
            for b in row or ():
                self._group_of[int(b)] = (g, self._index)

    def _block_copies(self, out: Any) -> list[list[int]]:
        """The step's kv_cache_block_copies as [group, source, destination] of the mamba
        groups. vLLM's copies name blocks only: a hit's copy is in this step's new table of its
        group, a producer's source in its own table (its destination, fresh, is in none: a
        table that showed it before held it as another block); the attention groups' copies
        (their KV, which a trace does not hold) are dropped."""
        copies = []
        for c in _field(out, "kv_cache_block_copies") or ():
            src = int(_field(c, "src_block_id", c[0] if isinstance(c, (tuple, list)) else None))
            dst = int(_field(c, "dst_block_id", c[1] if isinstance(c, (tuple, list)) else None))
            g, seen = self._group_of.get(dst, (None, -1))
            if seen != self._index:
                g, _ = self._group_of.get(src, (None, -1))
            if g in self._attention:
                continue
            if g not in self._groups:
                raise RecorderError(f"block copy {src} -> {dst}: neither block is in a table "
                                    f"the recorder saw")
            if not self._copies:
                raise RecorderError("block copies (partial-hash hits) need the recorder made "
                                    "with hash_block_size below the mamba block size")
            copies.append([self._groups.index(g), src, dst])
        return copies

    def _new_requests(self, out: Any, computed: dict[str, int]) -> list[dict]:
        entries = []
        for req in _field(out, "scheduled_new_reqs") or ():
            req_id = str(req.req_id)
            prompt = list(req.prompt_token_ids or ())
            if not prompt:
                raise RecorderError(f"new request {req_id!r} has no prompt token ids "
                                    "(prompt embeddings cannot be recorded)")
            self._requests[req_id] = _Request([int(t) for t in prompt])
            computed[req_id] = int(req.num_computed_tokens)
            self._note_groups(req.block_ids)
            entry: dict[str, Any] = {"req_id": req_id, "prompt_token_ids": [int(t) for t in prompt]}
            if computed[req_id]:
                entry["num_computed_tokens"] = computed[req_id]
            entry["block_ids"] = self._mamba_rows(req.block_ids)
            if self._attention:
                entry["attention_block_ids"] = self._mamba_rows(req.block_ids, self._attention)
            entries.append(entry)
        return entries

    def _true_count(self, req_id: str, scheduled_count: int,
                    planned_during: Optional[int]) -> tuple[int, Optional[int]]:
        """The count the runner starts from and the optimistic one (None: equal) of a running
        request whose scheduler output says `scheduled_count`."""
        request = self._requests[req_id]
        if planned_during is None or request.last_step != planned_during:
            return scheduled_count, None
        optimistic = request.last_start + request.last_scheduled
        true = request.last_start + request.last_committed
        if scheduled_count != optimistic:
            raise RecorderError(
                f"cached request {req_id!r}: num_computed_tokens {scheduled_count}, but a step "
                f"planned during step {planned_during} counts its row there as computed: "
                f"{optimistic} (pass planned_during_previous=False for a step planned after "
                f"the one before it completed)")
        return true, (optimistic if optimistic != true else None)

    def _cached_requests(self, out: Any, computed: dict[str, int],
                         planned_during: Optional[int]) -> list[dict]:
        cached = _field(out, "scheduled_cached_reqs")
        req_ids = list(_field(cached, "req_ids") or ())
        resumed_ids = set(_field(cached, "resumed_req_ids") or ())
        # Older vLLM: one bool per cached request instead of a set of ids.
        resumed_flags = list(_field(cached, "resumed_from_preemption") or ())
        new_block_ids = list(_field(cached, "new_block_ids") or [None] * len(req_ids))
        num_computed = list(_field(cached, "num_computed_tokens") or ())
        entries = []
        for i, req_id in enumerate(req_ids):
            req_id = str(req_id)
            if req_id not in self._requests:
                raise RecorderError(f"cached request {req_id!r} was never recorded as new")
            resumed = req_id in resumed_ids or (i < len(resumed_flags) and bool(resumed_flags[i]))
            # A resumed request starts over from the count its scheduler output says.
            computed[req_id], optimistic = self._true_count(
                req_id, int(num_computed[i]), None if resumed else planned_during)
            entry: dict[str, Any] = {"req_id": req_id}
            if resumed:
                entry["resumed"] = True
            self._note_groups(new_block_ids[i])
            rows = self._mamba_rows(new_block_ids[i])
            if resumed or any(rows):
                entry["new_block_ids"] = rows
            entry["num_computed_tokens"] = computed[req_id]
            if optimistic is not None:
                entry["num_computed_tokens_optimistic"] = optimistic
            if self._attention:
                attention = self._mamba_rows(new_block_ids[i], self._attention)
                if any(attention):
                    entry["attention_block_ids"] = attention
            entries.append(entry)
        return entries

    def _scheduled_rows(self, out: Any, computed: Mapping[str, int],
                        sampled: Mapping[str, Sequence[int]],
                        batch_order: Optional[Sequence[str]],
                        draft_ids: Mapping[str, Sequence[int]]) -> list[dict]:
        counts: Mapping[str, int] = _field(out, "num_scheduled_tokens") or {}
        drafts_by_id: Mapping[str, Sequence[int]] = _field(out, "scheduled_spec_decode_tokens") or {}
        order = list(batch_order) if batch_order is not None else list(counts)
        if sorted(order) != sorted(counts):
            raise RecorderError("batch_order does not list exactly the scheduled requests")
        rows = []
        for req_id in order:
            if req_id not in computed:
                raise RecorderError(f"request {req_id!r} is scheduled but neither new nor cached")
            rows.append(self._row(str(req_id), int(counts[req_id]), computed[req_id],
                                  [int(t) for t in drafts_by_id.get(req_id, ())],
                                  [int(t) for t in sampled.get(req_id, ())],
                                  draft_ids.get(req_id)))
        return rows

    def _drafts(self, req_id: str, drafts: list[int], sampled: list[int],
                given: Optional[Sequence[int]]) -> list[int]:
        """The draft ids of a row, placeholders (-1, async scheduling) filled in."""
        if not any(t < 0 for t in drafts):
            return drafts
        # Synchronous scheduling writes -1 drafts where it pads a 1-token prompt tail to a
        # decode's 1 + num_spec tokens (pad_spec_decode): the rejection sampler rejects them all.
        if given is not None:
            given = [int(t) for t in given]
            if len(given) != len(drafts) or any(t < 0 for t in given):
                raise RecorderError(f"request {req_id!r}: draft_token_ids {given} for "
                                    f"{len(drafts)} scheduled drafts")
            return given
        if not sampled:
            raise RecorderError(f"request {req_id!r}: placeholder drafts and nothing sampled")
        accepted = len(sampled) - 1
        # An accepted draft is the token sampled in its place; a rejected one was not, and its
        # own value never reaches the scheduler: any other token stands for it.
        stand_in = (sampled[min(accepted, len(sampled) - 1)] + 1) % (1 << 31)
        return [sampled[j] if j < accepted else stand_in for j in range(len(drafts))]

    def _row(self, req_id: str, num_scheduled: int, num_computed: int, drafts: list[int],
             sampled: list[int], given_drafts: Optional[Sequence[int]]) -> dict:
        request = self._requests[req_id]
        num_known = num_scheduled - len(drafts)
        end = num_computed + num_known
        if end > len(request.tokens):
            raise RecorderError(
                f"request {req_id!r}: tokens up to position {end} are scheduled but only "
                f"{len(request.tokens)} are known (a step recorded before the step it was "
                f"planned after?)")
        drafts = self._drafts(req_id, drafts, sampled, given_drafts)
        row: dict[str, Any] = {"req_id": req_id, "num_scheduled_tokens": num_scheduled}
        if drafts:
            row["num_draft_tokens"] = len(drafts)
        row["token_ids"] = request.tokens[num_computed:end] + drafts
        accepted = len(sampled) if drafts else 1
        if drafts and not 1 <= accepted <= 1 + len(drafts):
            raise RecorderError(f"request {req_id!r}: {accepted} tokens sampled for "
                                f"{len(drafts)} drafts (expected 1..{1 + len(drafts)})")
        if accepted != 1:
            row["num_accepted_tokens"] = accepted
        if end == len(request.tokens):  # the row reached the end: what it sampled is kept
            request.tokens.extend(int(t) for t in sampled)
        request.last_step = self._index
        request.last_start = num_computed
        request.last_scheduled = num_scheduled
        request.last_committed = accepted if drafts else num_scheduled
        return row

    def _put(self, obj: Mapping[str, Any]) -> None:
        self._file.write(json.dumps(obj, separators=(",", ":")))
        self._file.write("\n")
        self._file.flush()


def sampled_by_request(req_ids: Sequence[str],
                       sampled_token_ids: Iterable[Sequence[int]]) -> dict[str, list[int]]:
    """Zips a ModelRunnerOutput's req_ids and sampled_token_ids into record()'s mapping."""
    return {str(r): [int(t) for t in s] for r, s in zip(req_ids, sampled_token_ids)}
