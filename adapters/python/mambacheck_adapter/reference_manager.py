"""The reference KV cache manager: a hybrid model's block manager (full-attention groups and
Mamba groups in align mode on one shared pool), with the API vLLM's scheduler calls, written
here from the facts of vLLM's KVCacheManager at upstream 6a391a931a92 (2026-08-18) with the
fixes merged since (docs/block-manager.md). It lets `mambacheck fuzz --block-manager` test its
own protocol in CI without vLLM, and its broken variants are the block-manager bugs of 2026:

- optimistic_frees (#47728): stale blocks are freed from the optimistic computed count, which
  under async scheduling counts the tokens of the step still in flight;
- null_gap_retirement (#55450): retirement walks down from the threshold and stops at the
  first null, keeping every older state beyond a null gap until the request ends;
- hit_short_at_boundary (#50409): a prompt whose cacheable length ends exactly on a block
  boundary gets a hit one block shorter than the cache holds;
- published_before_written (#56525): a hash registered by this planning is offered to a request
  admitted in the same planning, before the step that writes its state ran (the same-step
  guard is missing);
- eagle_split_unaligned (#43559, the split before its fix #51113, upstream c56f169d9): chunk
  ends are kept on block boundaries only below the last cacheable position, which EAGLE backs
  off by one block, and a chunk starting mid-block stops at the next boundary only below it
  too; so a chunk past it but short of the prompt's last boundary ends mid-block, and the next
  one runs across the boundary of that block, which is then registered holding the state of
  the mid-block end.
- lookahead_padding (#57605): the Mamba tables are laid out for the scheduled tokens plus the
  drafter's lookahead, so where those reach the next page the running block sits one column
  past the one the worker writes, which holds a null.
- partial_tail_cached_again (vLLM at 6a391a9, found by mambacheck): with a hash unit below the
  block, a prompt's partial tail is cached by every cache_blocks call whose count is the tail,
  the async output of the chunk that computed it too, after the next planning's copy-on-write
  moved the entry away: it is cached again on the producer's block, which the row in flight
  overwrites, and copied again from there.

The aligned split (`aligned_split`) is vLLM's Scheduler._mamba_block_aligned_split, which the
worker answers for the scheduler model: where a prefill chunk ends decides where align mode
keeps states.

Everything is deterministic: ids come off a free queue whose order the calls fix.
"""

import math
from collections import Counter, OrderedDict

NULL = 0

VARIANTS = ("optimistic_frees", "null_gap_retirement", "hit_short_at_boundary",
            "published_before_written", "eagle_split_unaligned", "lookahead_padding",
            "partial_tail_cached_again")


class ManagerError(Exception):
    """A call the manager cannot serve (an unknown request, a double allocation)."""


def cdiv(a, b):
    return -(-a // b)


class Pool:
    """One pool of block ids for every group (id 0 is the null block, never handed out).

    Free blocks wait in one queue: a freed block without a hash goes to its head (it is taken
    first), one with a hash to its tail, where it stays findable until it is taken (then its
    hash is evicted)."""

    def __init__(self, num_blocks):
        self.num_blocks = num_blocks
        self.ref = [0] * num_blocks
        self.key_of = [None] * num_blocks
        # Partial-hash entries beside a block's own key (vLLM keeps every key of a block).
        self.partial_of = [()] * num_blocks
        self.cached = {}
        self.free = OrderedDict((b, None) for b in range(1, num_blocks))
        # Frees deferred until the step in flight reported, per block: a block they will give
        # back for good is not offered as a hit meanwhile (one still held elsewhere is).
        self.pending = Counter()

    def num_free(self):
        return len(self.free)

    def take(self, n):
        if n > len(self.free):
            raise ManagerError(f"{n} blocks asked for, {len(self.free)} free")
        out = []
        for _ in range(n):
            b, _ = self.free.popitem(last=False)
            self._evict(b)
            self.ref[b] = 1
            out.append(b)
        return out

    def _evict(self, b):
        for key in self.keys(b):
            holders = self.cached[key]
            holders.remove(b)
            if not holders:
                del self.cached[key]
        self.key_of[b] = None
        self.partial_of[b] = ()

    def keys(self, b):
        return ((self.key_of[b],) if self.key_of[b] is not None else ()) + self.partial_of[b]

    def touch(self, blocks):
        for b in blocks:
            if b == NULL:
                continue
            if self.ref[b] == 0:
                del self.free[b]
            self.ref[b] += 1

    def release(self, blocks):
        head = []
        for b in blocks:
            if b == NULL:
                continue
            if self.ref[b] <= 0:
                raise ManagerError(f"block {b} freed with no reference held")
            self.ref[b] -= 1
            if self.ref[b] == 0:
                if not self.keys(b):
                    head.append(b)
                else:
                    self.free[b] = None
        for b in reversed(head):
            self.free[b] = None
            self.free.move_to_end(b, last=False)

    def register(self, b, key):
        if b == NULL or self.key_of[b] is not None:
            return False
        self.key_of[b] = key
        self.cached.setdefault(key, []).append(b)
        return True

    def register_partial(self, b, key):
        """A partial-hash entry on block b (vLLM's BlockPool.cache_partial_block): True when b
        holds it now, registered by this call or before."""
        if b == NULL:
            return False
        if key not in self.keys(b):
            self.partial_of[b] += (key,)
            self.cached.setdefault(key, []).append(b)
        return True

    def move(self, src, dst):
        """Every key of src now names dst (vLLM's BlockPool.move_block_hashes): dst is about
        to receive src's state by a copy, and src is about to be overwritten."""
        keys, partial = self.key_of[src], self.partial_of[src]
        self._evict(src)
        self.key_of[dst], self.partial_of[dst] = keys, partial
        for key in self.keys(dst):
            self.cached.setdefault(key, []).append(dst)

    def lookup(self, key):
        holders = [b for b in self.cached.get(key, ())
                   if not self.pending[b] or self.ref[b] > self.pending[b]]
        return holders[0] if holders else None

    def reset(self):
        if any(self.ref[b] > 0 for b in range(1, self.num_blocks)):
            return False
        self.key_of = [None] * self.num_blocks
        self.partial_of = [()] * self.num_blocks
        self.cached.clear()
        return True


class CopyRetention:
    """The ends of a step's copy-on-write copies, kept referenced until the step that runs the
    copies ran, as vLLM's Scheduler._free_cow_retained_blocks does: given back at once when the
    steps run in order, or, with defer_block_free, once that step's output came. `free` gives
    a list of blocks back to the manager's pool."""

    def __init__(self, deferred, free):
        self.deferred, self.free = deferred, free
        self.held = []  # (steps planned when taken, blocks)
        self.steps_planned = self.steps_processed = 0

    def step_planned(self):
        self.steps_planned += 1

    def taken(self, ends):
        if not ends:
            return
        if self.deferred:
            self.held.append((self.steps_planned, ends))
        else:
            self.free(ends)

    def output_processed(self):
        self.steps_processed += 1
        while self.held and self.held[0][0] <= self.steps_processed:
            self.free(self.held.pop(0)[1])


class Request:
    """What the scheduler tells the manager about one request (vLLM's Request counters)."""

    def __init__(self, req_id):
        self.id = req_id
        self.tokens = []
        self.prefix_hashes = [0]  # [n]: the hash of the first n tokens
        self.num_computed = 0
        self.num_in_flight = 0
        self.placeholders = 0
        self.num_prompt = 0
        # Where the longest single-group hit ended past the hybrid hit (vLLM's
        # shared_prefix_boundary, the junction the split stops at so its state gets cached).
        self.shared_prefix_boundary = 0

    def update(self, message):
        self.tokens.extend(message.get("tokens", []))
        if len(self.tokens) != message["num_tokens"]:
            raise ManagerError(f"request {self.id}: {len(self.tokens)} token ids known, "
                               f"num_tokens says {message['num_tokens']}")
        self.num_computed = message["num_computed"]
        self.num_in_flight = message.get("num_in_flight", 0)
        self.placeholders = message.get("placeholders", 0)
        self.num_prompt = message.get("num_prompt", self.num_prompt or len(self.tokens))
        for t in self.tokens[len(self.prefix_hashes) - 1:]:
            self.prefix_hashes.append(hash((self.prefix_hashes[-1], t)))

    def block_hash(self, p, block_size):
        """The hash of the prefix block p of `block_size` tokens ends."""
        return self.prefix_hashes[(p + 1) * block_size]

    @property
    def num_tokens(self):
        return len(self.tokens)


class AttentionGroup:
    """A full-attention group: one block per B tokens, all kept while the request runs. With a
    hash unit h below B, a prompt's partial tail (its last multiple of h, inside a block) is
    cached too once computed (the block's KV is append-only, so it keeps that prefix), a hit
    may end on it, and the hit's shared partial block is then copied on write."""

    def __init__(self, gid, pool, block_size, eagle, hash_unit, copies):
        self.gid, self.pool, self.B, self.eagle = gid, pool, block_size, eagle
        self.h = hash_unit
        self.copies = copies  # the manager's pending copy-on-write copies (group, src, dst)
        self.tables, self.num_cached, self.partial_hit = {}, {}, {}

    def hit(self, req, max_tokens):
        """The blocks of the longest cached prefix of at most max_tokens, and its tokens."""
        blocks = []
        for p in range(max_tokens // self.B):
            b = self.pool.lookup((self.gid, req.prefix_hashes[(p + 1) * self.B]))
            if b is None:
                break
            blocks.append(b)
        tokens = len(blocks) * self.B
        if self.h < self.B:
            for end in range(min(tokens + self.B - self.h, max_tokens // self.h * self.h),
                             tokens, -self.h):
                b = self.pool.lookup((self.gid, req.prefix_hashes[end]))
                if b is not None:
                    return blocks + [b], end
        if self.eagle and blocks:
            blocks.pop()  # the drafter recomputes the last block
            tokens -= self.B
        return blocks, tokens

    def start(self, req, blocks, tokens):
        self.pool.touch(blocks)
        self.tables[req.id] = list(blocks)
        self.num_cached[req.id] = tokens // self.B
        if tokens % self.B:
            self.partial_hit[req.id] = (len(blocks) - 1, blocks[-1])

    def needed(self, req, num_tokens, partial=False):
        grow = max(0, cdiv(num_tokens, self.B) - len(self.tables.get(req.id, ())))
        return grow + int(partial)

    def allocate(self, req, num_tokens):
        table = self.tables.setdefault(req.id, [])
        self.num_cached.setdefault(req.id, 0)
        copy_partial(self, req, table, None)
        prev = len(table)
        table.extend(self.pool.take(self.needed(req, num_tokens)))
        return table[prev:]

    def cache(self, req, num_tokens, this_step, partial_tail=False):
        table = self.tables.get(req.id)
        if table is None:
            return
        register_full_blocks(self, req, table, num_tokens)
        tail = req.num_prompt // self.h * self.h
        if self.h < self.B and 0 < tail <= num_tokens and tail % self.B and \
                tail // self.B < len(table):
            self.pool.register_partial(table[tail // self.B], (self.gid, req.prefix_hashes[tail]))

    def free(self, req_id):
        """Drops the request's table; the manager gives its blocks back (or defers that)."""
        self.num_cached.pop(req_id, None)
        self.partial_hit.pop(req_id, None)
        return self.tables.pop(req_id, [])


def copy_partial(group, req, table, index, producer=False):
    """The copy on write of the group's partial state of the request, if it has one to copy,
    before the request's tokens run: a hit's shared block gives way to a private copy; a
    producer's own block keeps running in place, and its cache entry moves to the copy. Both
    ends stay retained until the step ran the copy (the manager releases them). `index`: the
    group's in the copies (None: an attention group)."""
    if req.id not in group.partial_hit:
        return
    col, src = group.partial_hit.pop(req.id)
    cow = group.pool.take(1)[0]
    if producer:
        group.pool.move(src, cow)
        group.pool.touch([src])
        group.this_step.add(cow)  # filled by this step's copy: no hit on it before
    else:
        table[col] = cow
        group.pool.touch([cow])
    group.copies.append((index, src, cow))


def register_full_blocks(group, req, table, num_tokens):
    """Registers the hashes of the full blocks of the first num_tokens tokens that the group
    has not registered for the request yet; returns the blocks this registered."""
    start, end = group.num_cached[req.id], min(num_tokens // group.B, len(table))
    group.num_cached[req.id] = max(start, end)
    return [table[p] for p in range(start, end)
            if group.pool.register(table[p], (group.gid, req.block_hash(p, group.B)))]


class MambaGroup:
    """A Mamba group. Align mode: the running state's block at cdiv(tokens, B) - 1, nsb
    speculative blocks after it, nulls before it but for the states still needed. All mode:
    a block for every B tokens, all kept while the request runs, nsb speculative blocks after
    the last, which become the blocks of their positions as the table grows."""

    def __init__(self, gid, pool, block_size, nsb, variants, all_mode, hash_unit, copies, index,
                 this_step):
        self.gid, self.pool, self.B, self.nsb = gid, pool, block_size, nsb
        self.all_mode = all_mode
        self.variants = variants
        self.h = hash_unit
        self.copies, self.index = copies, index  # index: among the Mamba groups
        self.this_step = this_step  # the manager's blocks registered by this planning
        self.tables, self.num_cached, self.allocated, self.last_state = {}, {}, set(), {}
        # A partial state to copy on the request's next allocation, (column, block): a hit that
        # ends mid-block (its copy replaces the shared block in the table), or the request's
        # own partial tail (its copy takes the cache entry, the table keeps the block, which
        # the next tokens overwrite in place). vLLM's MambaManager._partial_hit_reqs.
        self.partial_hit, self.tail_cached = {}, set()

    def cached_at(self, req, tokens):
        """The block whose state is the one after the first `tokens` tokens, if cached."""
        return self.pool.lookup((self.gid, req.prefix_hashes[tokens]))

    def start(self, req, position, block, tokens):
        self.pool.touch([block])
        self.tables[req.id] = [NULL] * position + [block]
        self.num_cached[req.id] = position + 1
        self.last_state[req.id] = position
        if tokens % self.B:
            self.partial_hit[req.id] = (position, block)
            self.num_cached[req.id] = position

    def padded(self, num_tokens, lookahead):
        """The tokens the table is laid out for. vLLM's align allocation lays it out for the
        scheduled tokens alone; with the drafter's lookahead counted too (the second failure of
        #57605) the running block moves past the column the worker writes (cdiv(tokens, B) - 1)."""
        if "lookahead_padding" in self.variants and not self.all_mode:
            return num_tokens + lookahead
        return num_tokens

    def needed(self, req, num_tokens, partial=False):
        table = self.tables.get(req.id, [])
        partial = partial or req.id in self.partial_hit
        required = cdiv(num_tokens, self.B) + self.nsb
        if required <= len(table):
            return int(partial)
        if self.all_mode:
            return required - len(table)
        return 1 + int(partial) + (0 if req.id in self.allocated else self.nsb)

    def allocate(self, req, num_tokens):
        table = self.tables.setdefault(req.id, [])
        self.num_cached.setdefault(req.id, 0)
        nsb, prev = self.nsb, len(table)
        copy_partial(self, req, table, self.index, producer=req.id in self.allocated)
        required = cdiv(num_tokens, self.B) + nsb
        if required <= prev or self.all_mode:
            table.extend(self.pool.take(max(required - prev, 0)))
            self.allocated.add(req.id)
            return table[prev:]
        allocated = req.id in self.allocated
        if allocated:
            self.last_state[req.id] = prev - 1 - nsb
        running = required - 1 - nsb
        if prev < running:
            table.extend([NULL] * (running - prev))
        if allocated:
            for i in range(prev - nsb, min(prev, running)):
                table.append(table[i])  # a speculative block now past the running one
                table[i] = NULL
        table.extend(self.pool.take(required - len(table)))
        self.allocated.add(req.id)
        return table[prev:]

    def remove_skipped(self, req, processed):
        table = self.tables.get(req.id)
        if not table or processed <= 0 or self.all_mode:
            return []
        stale = min(cdiv(processed, self.B) - 1, len(table))
        freed = []
        if "null_gap_retirement" in self.variants:
            for i in range(stale - 1, -1, -1):
                if table[i] == NULL:
                    break
                freed.append(table[i])
                table[i] = NULL
            last = self.last_state.get(req.id, -1)
            if 0 <= last < stale and table[last] != NULL:
                freed.append(table[last])
                table[last] = NULL
        else:
            for i in range(stale):
                if table[i] != NULL:
                    freed.append(table[i])
                    table[i] = NULL
        return freed

    def cache(self, req, num_tokens, this_step, partial_tail=False):
        table = self.tables.get(req.id)
        if table is None:
            return
        this_step.update(register_full_blocks(self, req, table, num_tokens))
        if partial_tail:
            self.cache_partial_tail(req, num_tokens, this_step)

    def cache_partial_tail(self, req, num_tokens, this_step):
        """With a hash unit h below B, the state after the prompt's last multiple of h (when
        that is inside a block) is cached from the block of the chunk that ends on it
        (vLLM's MambaManager._cache_partial_tail_block). Once per request: a later call (the
        output of that chunk, under async) may find the block running on already, or the
        entry moved to a copy."""
        tail = req.num_prompt // self.h * self.h
        again = "partial_tail_cached_again" in self.variants
        if self.h >= self.B or self.all_mode or num_tokens != tail or \
                tail % self.B == 0 or (req.id in self.tail_cached and not again):
            return
        table = self.tables[req.id]
        col = tail // self.B
        if col >= len(table) or table[col] == NULL:
            return
        if self.pool.register_partial(table[col], (self.gid, req.prefix_hashes[tail])):
            self.tail_cached.add(req.id)
            self.partial_hit[req.id] = (col, table[col])
            self.num_cached[req.id] = col
            this_step.add(table[col])

    def free(self, req_id):
        self.partial_hit.pop(req_id, None)
        self.tail_cached.discard(req_id)
        self.num_cached.pop(req_id, None)
        self.allocated.discard(req_id)
        self.last_state.pop(req_id, None)
        return self.tables.pop(req_id, [])


class ReferenceManager:
    """The manager the worker drives: the calls of vLLM's KVCacheManager, in its order."""

    def __init__(self, setup, variants=()):
        unknown = set(variants) - set(VARIANTS)
        if unknown:
            raise ManagerError(f"unknown variant {sorted(unknown)[0]} (known: "
                               f"{', '.join(VARIANTS)})")
        self.variants = set(variants)
        self.max_prefill_tokens = setup.get("max_num_scheduled_tokens", 0)
        self.B = setup["block_size"]
        attention_block_size = setup.get("attention_block_size", self.B)
        self.nsb = setup.get("num_spec_blocks", 0)
        self.eagle = bool(setup.get("eagle", False))
        all_mode = setup.get("mode", "align") == "all"
        # vLLM's hash_block_size (prefix_match_unit): below the Mamba block, in align mode,
        # hits end on its multiples and partial states are copied on write.
        self.h = setup.get("hash_block_size") or self.B
        if self.h < self.B and (all_mode or self.B % self.h or attention_block_size % self.h):
            raise ManagerError(f"hash_block_size {self.h}: not a divisor of every group's block "
                               f"size in align mode")
        self.pool = Pool(setup["num_blocks"])
        self.copies = []  # (Mamba group index or None for attention, source, destination)
        self.this_step = set()
        num_attention = setup.get("attention_groups", 1)
        self.attention = [AttentionGroup(gid, self.pool, attention_block_size, self.eagle, self.h,
                                         self.copies) for gid in range(num_attention)]
        self.mamba = [MambaGroup(num_attention + index, self.pool, self.B, self.nsb, self.variants,
                                 all_mode, self.h, self.copies, index, self.this_step)
                      for index in range(setup["mamba_groups"])]
        self.defer_block_free = bool(setup.get("defer_block_free", False))
        self.deferred = []  # blocks of requests freed while a step was in flight
        self.retention = CopyRetention(self.defer_block_free, self.pool.release)
        self.requests = {}
        self.hits = {}  # request -> (attention blocks, mamba position, mamba blocks, tokens)

    def contract(self):
        return {"registration": "at_schedule", "eagle": self.eagle and bool(self.attention),
                "attention_groups": len(self.attention), "shared_pool": True,
                "unordered_writer": self.defer_block_free,
                "hash_block_size": self.h if self.h < self.B else 0}

    def request(self, message):
        req = self.requests.setdefault(message["id"], Request(message["id"]))
        req.update(message)
        return req

    def new_step_starts(self):
        self.this_step.clear()
        self.retention.step_planned()

    def take_copies(self):
        """The step's copy-on-write copies of the Mamba groups, [group, source, destination]
        (KVCacheManager.take_kv_cache_block_copies); the attention groups' copies are the
        runner's business alone. Their ends are released as vLLM's scheduler does
        (CopyRetention)."""
        taken, self.copies[:] = list(self.copies), []
        self.retention.taken([b for _, src, dst in taken for b in (src, dst)])
        return [[g, src, dst] for g, src, dst in taken if g is not None]

    def get_computed_blocks(self, req):
        max_tokens = req.num_tokens - 1
        if "hit_short_at_boundary" in self.variants and max_tokens % self.B == 0:
            max_tokens -= self.B
        per_group = []
        if self.attention:
            per_group = [g.hit(req, max_tokens) for g in self.attention]
            max_tokens = min(tokens for _, tokens in per_group)
        # A hit is a whole number of the scheduler's blocks (lcm of every group's block size),
        # or of the hash unit with partial-hash hits.
        unit = self.h if self.h < self.B else math.lcm(self.B, *(g.B for g in self.attention))
        for hit in range(max_tokens // unit * unit, 0, -unit):
            blocks = [g.cached_at(req, hit) for g in self.mamba]
            if all(b is not None for b in blocks):
                attention = [found[:cdiv(hit, g.B)]
                             for g, (found, _) in zip(self.attention, per_group)]
                self.hits[req.id] = (attention, (hit - 1) // self.B, blocks, hit)
                req.shared_prefix_boundary = max_tokens if max_tokens > hit else 0
                return hit
        self.hits.pop(req.id, None)
        req.shared_prefix_boundary = max_tokens if self.attention and max_tokens > 0 else 0
        return 0

    def aligned_split(self, req, num_new, num_new_computed):
        """How many of num_new tokens a prefill chunk keeps in align mode (the facts of
        Scheduler._mamba_block_aligned_split at 6a391a931a92): a chunk that ends before the
        prefill's end ends on a block boundary (unless the block is wider than a chunk may be,
        when it advances within the block); one starting mid-block stops at the next boundary;
        none runs past the last cacheable boundary, which EAGLE backs off by one block (its
        attention hit drops the last block), nor past the shared-prefix junction, floored to a
        boundary, so that the junction's state is cached."""
        B = self.B
        start = req.num_computed + num_new_computed
        prefill_end = max(req.num_prompt, req.num_tokens - 1)
        if start >= prefill_end:
            return num_new
        last_cacheable = req.num_tokens - req.num_tokens % B
        if self.eagle:
            last_cacheable = max(last_cacheable - B, 0)
        end = start + num_new
        unaligned = "eagle_split_unaligned" in self.variants
        if end < (last_cacheable if unaligned else prefill_end):
            aligned_end = end // B * B
            if aligned_end > start or B <= self.max_prefill_tokens:
                end = aligned_end
        next_boundary = start // B * B + B if start % B else 0
        if unaligned and next_boundary > last_cacheable:
            next_boundary = 0
        junction = req.shared_prefix_boundary
        # With partial-hash hits, the prompt's last hash boundary past the last cacheable
        # block boundary: only a chunk that ends there caches the partial tail.
        tail = req.num_prompt // self.h * self.h if self.h < B else 0
        stops = (next_boundary,
                 last_cacheable,
                 tail if last_cacheable < tail < req.num_prompt else 0,
                 start + (junction - start) // B * B if start < junction < end else 0)
        end = min((s for s in stops if start < s < end), default=end)
        return max(end - start, 0)

    def allocate_slots(self, req, num_new, num_new_computed, lookahead):
        hit = self.hits.pop(req.id, None) if num_new_computed > 0 else None
        if num_new_computed > 0 and (hit is None or hit[3] != num_new_computed):
            raise ManagerError(f"request {req.id}: {num_new_computed} computed tokens that "
                               f"get_computed_blocks did not offer")
        total = req.num_computed + num_new_computed
        processed = total if "optimistic_frees" in self.variants else \
            max(0, total - req.num_in_flight)
        for g in self.mamba:
            # Stale blocks lie below the column the row in flight reads: nobody writes them.
            self.pool.release(g.remove_skipped(req, processed))
        if hit and "published_before_written" not in self.variants and \
                any(b in self.this_step for b in hit[2]):
            return None  # registered by this planning: its state is not written yet
        main = total + num_new
        with_lookahead = main + lookahead
        tokens = hit[3] if hit else 0
        needed = sum(g.needed(req, with_lookahead, tokens % g.B != 0) for g in self.attention)
        needed += sum(g.needed(req, g.padded(main, lookahead), tokens % self.B != 0)
                      for g in self.mamba)
        if hit:
            needed += sum(1 for blocks in hit[0] for b in blocks if self.pool.ref[b] == 0)
            needed += sum(1 for b in hit[2] if self.pool.ref[b] == 0)
        if needed > self.pool.num_free():
            return None
        if hit:
            for g, blocks in zip(self.attention, hit[0]):
                g.start(req, blocks, tokens)
            for g, b in zip(self.mamba, hit[2]):
                g.start(req, hit[1], b, tokens)
        new_attention = [g.allocate(req, with_lookahead) for g in self.attention]
        new_mamba = [g.allocate(req, g.padded(main, lookahead)) for g in self.mamba]
        cache_to = min(main, req.num_tokens)
        for g in self.attention + self.mamba:
            # A partial tail from the row that computes its last token (a padded prompt tail
            # too, while its drafts stay in the tail's block: past it the state runs in the next
            # column), not from one planned past it while that row is in flight.
            g.cache(req, cache_to, self.this_step,
                    partial_tail=total < cache_to and (main - 1) // self.B == cache_to // self.B)
        return new_mamba, new_attention

    def cache_blocks(self, req, num_tokens):
        again = "partial_tail_cached_again" in self.variants  # the output's call caches it too
        for g in self.attention + self.mamba:
            g.cache(req, num_tokens, self.this_step, partial_tail=again)

    def free(self, req_id):
        req = self.requests.get(req_id)
        in_flight = req is not None and req.num_in_flight > 0
        for g in self.attention:
            self.give_back(list(reversed(g.free(req_id))), in_flight)
        # The row in flight reads at the column of its last computed token and writes from
        # there on: only those blocks wait for it.
        start = max(0, req.num_computed - req.num_in_flight) if req is not None else 0
        touched_from = (start - 1) // self.B if start > 0 else 0
        for g in self.mamba:
            table = g.free(req_id)
            self.give_back(list(reversed(table[touched_from:])), in_flight)
            self.pool.release(list(reversed(table[:touched_from])))
        self.hits.pop(req_id, None)  # the request object stays: a preempted one resumes

    def give_back(self, blocks, in_flight):
        """Frees blocks in order, or, with a writer not ordered with the steps, once the step
        in flight that still runs a row of their request reported (vLLM's defer_block_free)."""
        if self.defer_block_free and in_flight:
            self.deferred.append(blocks)
            self.pool.pending.update(b for b in blocks if b != NULL)
        else:
            self.pool.release(blocks)

    def output_processed(self):
        for blocks in self.deferred:
            self.pool.release(blocks)
        self.deferred.clear()
        self.pool.pending.clear()
        self.retention.output_processed()

    def reset_prefix_cache(self):
        return self.pool.reset()

    def tables(self, req_id):
        return ([list(g.tables.get(req_id, [])) for g in self.mamba],
                [list(g.tables.get(req_id, [])) for g in self.attention])

    def pool_state(self):
        return {"free": list(self.pool.free.keys()),
                "refs": {str(b): r for b, r in enumerate(self.pool.ref) if r > 0},
                "hashed": [b for b in range(1, self.pool.num_blocks) if self.pool.keys(b)]}
