"""Host "kernels" with the seed's names and argument lists, for the adapter's own tests.

They run on the CPU (the adapter's `--device host`), reading block tables and states
through the addresses in the metadata arrays exactly as the GPU kernels do, so a campaign
through `mambacheck fuzz --external` exercises the whole external path (case files, the
adapter's buffers and metadata, the worker protocol, result files) on a machine without a
GPU. They follow model/LAUNCH_KINDS.md; copies are memmove (ctypes), decisions use the
launch-time values of num_accepted.

`select_variant(NAME, ...)` returns the kernels with the named deliberate bugs (VARIANTS
lists them; several names combine, e.g. a deterministic bug and the racy one); the same names
exist in the Triton kernels of mambacheck_adapter.triton_kernels (all but the ones of
the per-slot tables).

Two block-table conventions (model/LAUNCH_KINDS.md, "Indexing"): by default the V2 copy kernels
read row b of tables gathered in batch order (the seed; `BLOCK_TABLE_ROWS = "batch_row"`).
`select_variant("slot_tables")` returns kernels that read the row of the request's slot,
idx_mapping[b], in per-request-slot tables (vLLM #55506; `BLOCK_TABLE_ROWS = "slot"`); the
`table_by_batch_row` variant is those kernels with the seed's lookup left in. The precopy
kernel takes `HAS_IDX_MAPPING` as vLLM's does today, so it also runs V1's fused launch with
idx_mapping None (precopy_v1).

`racy_reset` is the one whose failure depends on scheduling. The seed's postprocess_align
runs one program per (row, state) and the row's program 0 resets num_accepted in place while
the row's other programs may not have read it yet. Here the programs of a launch run one
after another in an order drawn afresh per launch, standing for whatever order a GPU happens
to schedule them in: a program that runs after its row's program 0 decides from a = 1 and
copies nothing. A case with such a row fails in some runs and holds in others (it holds when
program 0 comes last among its row's programs).

The orders come from os.urandom, a fresh seed each launch, unless the environment variable
MC_REFERENCE_ORDER_SEED holds an integer: then from one random.Random(that integer) per
process, each launch drawing the next order from it. Runs of one case still differ from
each other, but a process given the same launches in the same order draws the same orders,
so a campaign through one worker gives the same findings every time it is run (what a test
that must not flake needs).

Every launch also advances the host's virtual clock (devices.HOST_CLOCK) by VIRTUAL_PROGRAM_US
per program of its grid, and `slow_launches` waits on that clock: with MC_HOST_CLOCK=virtual,
`mambacheck bench` times these kernels the same on any machine under any load.
"""

import ctypes
import math
import os
import random
import types

import numpy as np

from . import devices, forward_reference

VARIANTS = {
    "clean": "the kernels as specified",
    "guard_by_address": "precopy skips a row whose source and destination BLOCKS are equal "
                        "(physical ids compared instead of logical columns): an aliased "
                        "same-block shift is lost",
    "temporal_size_from_stride": "a temporal copy moves the block (page) stride, not the "
                                 "natural size: it overwrites what follows in the page",
    "conv_shift_not_memmove": "an overlapping conv copy (a same-block shift) runs from the "
                              "end: it reads bytes it already overwrote, not memmove-safe "
                              "(#50729)",
    "ds_ignores_bias": "a DS conv row is copied from the start of the row, not from the bias",
    "temporal_ignores_bias": "the temporal source is the block at src_col, not src_col + bias",
    "offset_32bit": "block_id x block stride wraps at 2^32 bytes",
    "preprocess_floor": "preprocess_align takes the new column as floor((c + q) / B) - 1",
    "racy_reset": "postprocess_align: the row's program 0 resets num_accepted in place right "
                  "after its decision while the row's other programs decide from it with no "
                  "snapshot, the programs in a random order per launch: fails only in some "
                  "runs",
    "table_by_batch_row": "per-slot tables read at the batch row b instead of the row "
                          "idx_mapping[b] finds (the seed's lookup kept, #55506)",
    "slow_launches": "right results, but every launch waits SLOW_LAUNCH_SECONDS first: the "
                     "speed regression `mambacheck bench --external --max-slowdown` must "
                     "catch (no fuzz campaign can)",
    **forward_reference.FORWARD_VARIANTS,
}
SLOW_LAUNCH_SECONDS = 0.02
# What one program of a launch costs on the host's virtual clock (devices.py, MC_HOST_CLOCK).
VIRTUAL_PROGRAM_US = 1.0
# Names that choose a convention, not a bug (they combine with a bug's name).
CONVENTIONS = {
    "slot_tables": "the V2 copy kernels read a request's row of per-request-slot block tables "
                   "at its slot (#55506) instead of the batch row of gathered tables",
}
SLOT_TABLE_NAMES = ("slot_tables", "table_by_batch_row")  # names whose kernels take slot tables
VARIANTS_MAX = 2  # names select_variant combines at most


def read_i32(address):
    return ctypes.c_int32.from_address(address).value


def copy_bytes(bugs, dst, src, nbytes, conv):
    if nbytes <= 0:
        return
    shift = src - dst
    if conv and "conv_shift_not_memmove" in bugs and 0 < shift < nbytes:
        # A same-block left shift done in steps of `shift` bytes from the end: each step
        # reads bytes an earlier step already overwrote (the Triton variant does the same).
        for start in reversed(range(0, nbytes, shift)):
            ctypes.memmove(dst + start, src + start, min(shift, nbytes - start))
        return
    ctypes.memmove(dst, src, nbytes)


class Meta:
    """The flattened metadata arrays of one launch, in the seed's argument order."""

    def __init__(self, bt_ptrs, bt_stride, bases, strides, elems, inners, widths, groups,
                 ds_rows, ds_row_strides):
        self.bt_ptrs, self.bt_stride = bt_ptrs, int(bt_stride)
        self.bases = bases.view(np.uint64)
        self.strides, self.elems, self.inners = strides, elems, inners
        self.widths, self.groups = widths, groups
        self.ds_rows, self.ds_row_strides = ds_rows, ds_row_strides

    def block(self, s, row, col):
        table = int(self.bt_ptrs[int(self.groups[s])]) % (1 << 64)
        return read_i32(table + 4 * (row * self.bt_stride + col))

    def block_address(self, bugs, s, block_id):
        offset = block_id * int(self.strides[s])
        if "offset_32bit" in bugs:
            offset %= 1 << 32
        return (int(self.bases[s]) + offset) % (1 << 64)


def copy_state(bugs, meta, s, row, src_col, dst_col, bias, ds):
    """One (request, state) copy of model/LAUNCH_KINDS.md, "The copy of one state"."""
    elem, width, inner = int(meta.elems[s]), int(meta.widths[s]), int(meta.inners[s])
    dst = meta.block_address(bugs, s, meta.block(s, row, dst_col))
    if width == 0:  # temporal: the bias selects a column
        col = src_col if "temporal_ignores_bias" in bugs else src_col + bias
        src = meta.block_address(bugs, s, meta.block(s, row, col))
        nbytes = int(meta.strides[s]) if "temporal_size_from_stride" in bugs else inner * elem
        copy_bytes(bugs, dst, src, nbytes, conv=False)
        return
    src = meta.block_address(bugs, s, meta.block(s, row, src_col))
    kept = max(width - bias, 0)
    if ds:
        row_stride = int(meta.ds_row_strides[s])
        skip = 0 if "ds_ignores_bias" in bugs else bias * elem
        for d in range(int(meta.ds_rows[s])):
            copy_bytes(bugs, dst + d * row_stride, src + d * row_stride + skip, kept * elem,
                       conv=True)
        return
    copy_bytes(bugs, dst, src + bias * inner * elem, kept * inner * elem, conv=True)


class HostKernel:
    """`kernel[grid](*args, **flags)`, as a Triton kernel is launched. `bugs` holds the bug
    names and, with per-slot tables, "slot_tables"."""

    def __init__(self, body, bugs):
        self.body = body
        self.bugs = bugs

    def __getitem__(self, grid):
        def launch(*args, **flags):
            if "slow_launches" in self.bugs:
                devices.HOST_CLOCK.delay(SLOW_LAUNCH_SECONDS)
            devices.HOST_CLOCK.advance(VIRTUAL_PROGRAM_US * math.prod(grid))
            return self.body(self.bugs, tuple(grid), *args, **flags)
        return launch


def table_row(bugs, row, slot):
    """The block-table row of batch row `row` with slot `slot` (the kernel's bt_row_idx)."""
    return slot if "slot_tables" in bugs and "table_by_batch_row" not in bugs else row


def save_decision(a, slot, state_idx, num_scheduled, num_computed, num_draft, block_size,
                  precomputed_new_computed):
    """The post-step save of one row (REFERENCE.md 2) with accepted count `a`: None when it
    saves nothing, else (src column, dst column, bias)."""
    if precomputed_new_computed:
        new = int(num_computed[slot])
        running = new - a + 1
    else:
        running = int(num_computed[slot]) + int(num_scheduled[slot]) - int(num_draft[slot])
        new = running + a - 1
    aligned = new // block_size * block_size
    if aligned < running:
        return None
    return int(state_idx[slot]), aligned // block_size - 1, aligned - running


def postprocess(bugs, grid, num_accepted, state_idx, num_scheduled, num_computed, num_draft,
                bt_ptrs, bt_stride, bases, strides, elems, inners, widths, groups, ds_rows,
                ds_row_strides, num_accepted_out, idx_mapping, num_reqs, block_size,
                COPY_BLOCK_SIZE, CONV_STATE_DIM_FIRST, HAS_IDX_MAPPING=False,
                PRECOMPUTED_NEW_COMPUTED=False):
    meta = Meta(bt_ptrs, bt_stride, bases, strides, elems, inners, widths, groups, ds_rows,
                ds_row_strides)
    slots = ((row, int(idx_mapping[row]) if HAS_IDX_MAPPING else row)
             for row in range(min(num_reqs, grid[0])))
    rows = [(row, slot) for row, slot in slots if slot >= 0]

    def decide(a, slot):
        return save_decision(a, slot, state_idx, num_scheduled, num_computed, num_draft,
                             block_size, PRECOMPUTED_NEW_COMPUTED)

    if "racy_reset" in bugs and HAS_IDX_MAPPING:
        return postprocess_racy(bugs, grid, meta, rows, decide, num_accepted,
                                CONV_STATE_DIM_FIRST)
    accepted = np.array(num_accepted)  # the launch-time snapshot every decision reads
    resets = []
    for row, slot in rows:
        decision = decide(int(accepted[slot]), slot)
        if decision is None:
            continue
        src, dst, bias = decision
        if src == dst:
            resets.append(slot)
            if bias == 0:
                continue
        for s in range(grid[1]):
            copy_state(bugs, meta, s, table_row(bugs, row, slot), src, dst, bias,
                       CONV_STATE_DIM_FIRST)
    for slot in resets:
        (num_accepted if HAS_IDX_MAPPING else num_accepted_out)[slot] = 1


ORDER_SEED_VARIABLE = "MC_REFERENCE_ORDER_SEED"
_seeded_orders = None  # the random.Random of ORDER_SEED_VARIABLE, once a launch asked for it


def program_orders():
    """Where this launch's program order comes from (see the module's docstring)."""
    global _seeded_orders
    text = os.environ.get(ORDER_SEED_VARIABLE, "")
    if not text:
        return random.Random(int.from_bytes(os.urandom(8), "little"))
    if _seeded_orders is None:
        try:
            seed = int(text)
        except ValueError:
            raise ValueError(f"{ORDER_SEED_VARIABLE}={text!r}: expected an integer") from None
        _seeded_orders = random.Random(seed)
    return _seeded_orders


def postprocess_racy(bugs, grid, meta, rows, decide, num_accepted, ds):
    """V2's save as the seed runs it, one program per (row, state) in an order drawn for this
    launch: each decides from num_accepted as it finds it, and program 0 of a row resets it
    in place right after deciding."""
    programs = [(row, slot, s) for row, slot in rows for s in range(grid[1])]
    program_orders().shuffle(programs)
    for row, slot, s in programs:
        decision = decide(int(num_accepted[slot]), slot)
        if decision is None:
            continue
        src, dst, bias = decision
        if src == dst and s == 0:
            num_accepted[slot] = 1
        if src != dst or bias != 0:
            copy_state(bugs, meta, s, table_row(bugs, row, slot), src, dst, bias, ds)


def precopy(bugs, grid, state_idx, src_col, token_bias, bt_ptrs, bt_stride, bases, strides,
            elems, inners, widths, groups, ds_rows, ds_row_strides, idx_mapping, num_reqs,
            COPY_BLOCK_SIZE, CONV_STATE_DIM_FIRST, HAS_IDX_MAPPING=True):
    meta = Meta(bt_ptrs, bt_stride, bases, strides, elems, inners, widths, groups, ds_rows,
                ds_row_strides)
    for row in range(min(num_reqs, grid[0])):
        # V1's fused launch passes idx_mapping None: its arrays are in batch order.
        slot = int(idx_mapping[row]) if HAS_IDX_MAPPING else row
        if slot < 0:
            continue
        src, dst, bias = int(src_col[slot]), int(state_idx[slot]), int(token_bias[slot])
        if src < 0 or src == dst:
            continue
        bt_row = table_row(bugs, row, slot)
        for s in range(grid[1]):
            if ("guard_by_address" in bugs
                    and meta.block(s, bt_row, src) == meta.block(s, bt_row, dst)):
                continue
            copy_state(bugs, meta, s, bt_row, src, dst, bias, CONV_STATE_DIM_FIRST)


def preprocess(bugs, grid, idx_mapping, state_idx, num_computed, query_start_loc,
               num_accepted, src_col, src_off, num_reqs, BLOCK_SIZE, MAMBA_BLOCK_SIZE):
    for row in range(min(num_reqs, grid[0] * BLOCK_SIZE)):
        slot = int(idx_mapping[row])
        if slot < 0:
            continue
        old, a = int(state_idx[slot]), int(num_accepted[slot])
        src_col[slot] = old
        src_off[slot] = max(a - 1, 0)
        tokens = int(num_computed[slot]) + int(query_start_loc[row + 1]) - int(query_start_loc[row])
        round_up = 0 if "preprocess_floor" in bugs else MAMBA_BLOCK_SIZE - 1
        new = (tokens + round_up) // MAMBA_BLOCK_SIZE - 1
        state_idx[slot] = new
        if old >= 0 and old != new:
            num_accepted[slot] = 1


def batch_memcpy(src_ptrs, dst_ptrs, sizes):
    """V1's batched flat copy: copy i moves sizes[i] bytes from src_ptrs[i] to dst_ptrs[i]."""
    for src, dst, n in zip(src_ptrs.view(np.uint64), dst_ptrs.view(np.uint64), sizes):
        ctypes.memmove(int(dst), int(src), int(n))


def select_variant(*names):
    """The kernels with the named deliberate bugs ("clean": none) and conventions
    (CONVENTIONS), at most VARIANTS_MAX names."""
    if not 1 <= len(names) <= VARIANTS_MAX:
        raise ValueError(f"expected 1 to {VARIANTS_MAX} variant names, got {len(names)}")
    for name in names:
        if name not in VARIANTS and name not in CONVENTIONS:
            raise ValueError(f"unknown variant {name!r}; known: "
                             f"{', '.join(list(VARIANTS) + list(CONVENTIONS))}")
    slot_tables = any(name in SLOT_TABLE_NAMES for name in names)
    bugs = frozenset(names) - {"clean"} | ({"slot_tables"} if slot_tables else set())
    return types.SimpleNamespace(
        **forward_reference.make(bugs & set(forward_reference.FORWARD_VARIANTS)),
        postprocess_mamba_fused_kernel=HostKernel(postprocess, bugs),
        precopy_mamba_align_fused_kernel=HostKernel(precopy, bugs),
        preprocess_mamba_align_fused_kernel=HostKernel(preprocess, bugs),
        batch_memcpy=batch_memcpy,
        DEVICE="host",
        BLOCK_TABLE_ROWS="slot" if slot_tables else "batch_row",
        PRECOPY_HAS_IDX_MAPPING=True,
    )


# The module's own attributes are the clean kernels and conventions (DEVICE "host": the
# adapter's default device for this module).
globals().update(vars(select_variant("clean")))
