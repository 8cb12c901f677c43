"""Host "kernels" with the seed's names and argument lists, for the adapter's own tests.

They run on the CPU (the adapter's `--device host`), reading block tables and states
through the addresses in the metadata arrays exactly as the GPU kernels do, so a campaign
through `mambacheck fuzz --external` exercises the whole external path (case files, the
adapter's buffers and metadata, the worker protocol, result files) on a machine without a
GPU. They follow model/LAUNCH_KINDS.md; copies are memmove (ctypes), decisions use the
launch-time values of num_accepted.

`select_variant(NAME)` returns the kernels with one deliberate bug (VARIANTS lists them);
the same names exist in the Triton kernels of adapters/python/tests/triton_kernels.py.
"""

import ctypes
import types

import numpy as np

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
}


def read_i32(address):
    return ctypes.c_int32.from_address(address).value


def copy_bytes(variant, dst, src, nbytes, conv):
    if nbytes <= 0:
        return
    shift = src - dst
    if conv and variant == "conv_shift_not_memmove" and 0 < shift < nbytes:
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

    def block_address(self, variant, s, block_id):
        offset = block_id * int(self.strides[s])
        if variant == "offset_32bit":
            offset %= 1 << 32
        return (int(self.bases[s]) + offset) % (1 << 64)


def copy_state(variant, meta, s, row, src_col, dst_col, bias, ds):
    """One (request, state) copy of model/LAUNCH_KINDS.md, "The copy of one state"."""
    elem, width, inner = int(meta.elems[s]), int(meta.widths[s]), int(meta.inners[s])
    dst = meta.block_address(variant, s, meta.block(s, row, dst_col))
    if width == 0:  # temporal: the bias selects a column
        col = src_col if variant == "temporal_ignores_bias" else src_col + bias
        src = meta.block_address(variant, s, meta.block(s, row, col))
        nbytes = int(meta.strides[s]) if variant == "temporal_size_from_stride" else inner * elem
        copy_bytes(variant, dst, src, nbytes, conv=False)
        return
    src = meta.block_address(variant, s, meta.block(s, row, src_col))
    kept = max(width - bias, 0)
    if ds:
        row_stride = int(meta.ds_row_strides[s])
        skip = 0 if variant == "ds_ignores_bias" else bias * elem
        for d in range(int(meta.ds_rows[s])):
            copy_bytes(variant, dst + d * row_stride, src + d * row_stride + skip, kept * elem,
                       conv=True)
        return
    copy_bytes(variant, dst, src + bias * inner * elem, kept * inner * elem, conv=True)


class HostKernel:
    """`kernel[grid](*args, **flags)`, as a Triton kernel is launched."""

    def __init__(self, body, variant):
        self.body = body
        self.variant = variant

    def __getitem__(self, grid):
        return lambda *args, **flags: self.body(self.variant, tuple(grid), *args, **flags)


def postprocess(variant, grid, num_accepted, state_idx, num_scheduled, num_computed, num_draft,
                bt_ptrs, bt_stride, bases, strides, elems, inners, widths, groups, ds_rows,
                ds_row_strides, num_accepted_out, idx_mapping, num_reqs, block_size,
                COPY_BLOCK_SIZE, CONV_STATE_DIM_FIRST, HAS_IDX_MAPPING=False,
                PRECOMPUTED_NEW_COMPUTED=False):
    meta = Meta(bt_ptrs, bt_stride, bases, strides, elems, inners, widths, groups, ds_rows,
                ds_row_strides)
    accepted = np.array(num_accepted)  # the launch-time snapshot every decision reads
    resets = []
    for row in range(min(num_reqs, grid[0])):
        slot = int(idx_mapping[row]) if HAS_IDX_MAPPING else row
        if slot < 0:
            continue
        a, src = int(accepted[slot]), int(state_idx[slot])
        if PRECOMPUTED_NEW_COMPUTED:
            new = int(num_computed[slot])
            running = new - a + 1
        else:
            running = int(num_computed[slot]) + int(num_scheduled[slot]) - int(num_draft[slot])
            new = running + a - 1
        aligned = new // block_size * block_size
        if aligned < running:
            continue
        bias, dst = aligned - running, aligned // block_size - 1
        if src == dst:
            resets.append(slot)
            if bias == 0:
                continue
        for s in range(grid[1]):
            copy_state(variant, meta, s, row, src, dst, bias, CONV_STATE_DIM_FIRST)
    for slot in resets:
        (num_accepted if HAS_IDX_MAPPING else num_accepted_out)[slot] = 1


def precopy(variant, grid, state_idx, src_col, token_bias, bt_ptrs, bt_stride, bases, strides,
            elems, inners, widths, groups, ds_rows, ds_row_strides, idx_mapping, num_reqs,
            COPY_BLOCK_SIZE, CONV_STATE_DIM_FIRST):
    meta = Meta(bt_ptrs, bt_stride, bases, strides, elems, inners, widths, groups, ds_rows,
                ds_row_strides)
    for row in range(min(num_reqs, grid[0])):
        slot = int(idx_mapping[row])
        if slot < 0:
            continue
        src, dst, bias = int(src_col[slot]), int(state_idx[slot]), int(token_bias[slot])
        if src < 0 or src == dst:
            continue
        for s in range(grid[1]):
            if variant == "guard_by_address" and meta.block(s, row, src) == meta.block(s, row, dst):
                continue
            copy_state(variant, meta, s, row, src, dst, bias, CONV_STATE_DIM_FIRST)


def preprocess(variant, grid, idx_mapping, state_idx, num_computed, query_start_loc,
               num_accepted, src_col, src_off, num_reqs, BLOCK_SIZE, MAMBA_BLOCK_SIZE):
    for row in range(min(num_reqs, grid[0] * BLOCK_SIZE)):
        slot = int(idx_mapping[row])
        if slot < 0:
            continue
        old, a = int(state_idx[slot]), int(num_accepted[slot])
        src_col[slot] = old
        src_off[slot] = max(a - 1, 0)
        tokens = int(num_computed[slot]) + int(query_start_loc[row + 1]) - int(query_start_loc[row])
        if variant == "preprocess_floor":
            new = tokens // MAMBA_BLOCK_SIZE - 1
        else:
            new = (tokens + MAMBA_BLOCK_SIZE - 1) // MAMBA_BLOCK_SIZE - 1
        state_idx[slot] = new
        if old >= 0 and old != new:
            num_accepted[slot] = 1


def batch_memcpy(src_ptrs, dst_ptrs, sizes):
    """V1's batched flat copy: copy i moves sizes[i] bytes from src_ptrs[i] to dst_ptrs[i]."""
    for src, dst, n in zip(src_ptrs.view(np.uint64), dst_ptrs.view(np.uint64), sizes):
        ctypes.memmove(int(dst), int(src), int(n))


def select_variant(name):
    """The kernels with the named deliberate bug ("clean": none)."""
    if name not in VARIANTS:
        raise ValueError(f"unknown variant {name!r}; known: {', '.join(VARIANTS)}")
    return types.SimpleNamespace(
        postprocess_mamba_fused_kernel=HostKernel(postprocess, name),
        precopy_mamba_align_fused_kernel=HostKernel(precopy, name),
        preprocess_mamba_align_fused_kernel=HostKernel(preprocess, name),
        batch_memcpy=batch_memcpy,
        DEVICE="host",
    )


_clean = select_variant("clean")
postprocess_mamba_fused_kernel = _clean.postprocess_mamba_fused_kernel
precopy_mamba_align_fused_kernel = _clean.precopy_mamba_align_fused_kernel
preprocess_mamba_align_fused_kernel = _clean.preprocess_mamba_align_fused_kernel
DEVICE = "host"  # the adapter's default device for this module
