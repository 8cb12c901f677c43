"""Triton kernels of the Mamba state copies, written fresh for mambacheck's own tests.

In the package (not with the tests) so that an installed adapter can load them by module name:
`mambacheck gate --external` runs their broken variants on cuda when the module under test has
no select_variant. Importing the package never imports this module (nor triton).

They follow model/LAUNCH_KINDS.md and expose the seed's names and argument lists
(postprocess_mamba_fused_kernel, precopy_mamba_align_fused_kernel,
preprocess_mamba_align_fused_kernel, plus batch_memcpy for V1's flat copy plan), so the
adapter launches them exactly as vLLM's runner launches its own. Where the seed's kernels
are racy, these are not:
- overlapping copies (a same-block conv shift) advance in steps of the shift distance, so
  every byte is read and written by one and the same lane: memmove semantics under any
  scheduling of warps and programs;
- the reset of num_accepted (V2 writes it in place while other programs of the request read
  it) is a second launch after the copies, so every decision sees the launch-time value;
- preprocess skips batch rows whose idx_mapping is -1.

`select_variant(NAME, ...)` gives the same kernels with deliberate bugs (VARIANTS; the host
kernels of mambacheck_adapter.reference have the same names): `mambacheck fuzz --external`
must find each. Two names combine one deterministic bug with `racy_reset`, the seed's race
on num_accepted put back: postprocess_align's program (row, 0) resets a in place right after
its decision, with no second launch, while the row's other programs (row, s) read a when
they start. Whether one starts after that write depends on how the GPU schedules the grid
(programs of one state are launched together, so on a grid of many rows x states the later
states usually come late), so a case fails in some runs only. Needs torch and triton with a
CUDA device.

The forward's state kernels (selective_state_update, causal_conv1d_update) are the adapter's
reference ones (mambacheck_adapter.forward_reference) run on the GPU through torch, a sequence
at a time; their deliberate bugs are the FORWARD_VARIANTS names, one at a time and alone.
"""

import functools
import types

import triton
import triton.language as tl

from mambacheck_adapter import forward_reference

DEVICE = "cuda"
COPY_BLOCK_SIZE = 1024
RESET_BLOCK = 128

VARIANTS = {
    "clean": 0,
    "guard_by_address": 1,           # precopy compares physical block ids, not columns
    "temporal_size_from_stride": 2,  # temporal copy moves the page stride
    "conv_shift_not_memmove": 3,     # an overlapping conv copy runs from the end
    "ds_ignores_bias": 4,            # DS rows copied from their start
    "temporal_ignores_bias": 5,      # temporal source at src_col, not src_col + bias
    "offset_32bit": 6,               # block_id x stride wraps at 2^32
    "preprocess_floor": 7,           # new column floor((c + q) / B) - 1
    "racy_reset": -1,                # V2 reset in place by program (row, 0): a race
}
RACY_VARIANTS = {"racy_reset"}  # combine with one of the others (codes > 0)
BUG_GUARD_BY_ADDRESS = tl.constexpr(1)
BUG_TEMPORAL_SIZE_FROM_STRIDE = tl.constexpr(2)
BUG_CONV_SHIFT_NOT_MEMMOVE = tl.constexpr(3)
BUG_DS_IGNORES_BIAS = tl.constexpr(4)
BUG_TEMPORAL_IGNORES_BIAS = tl.constexpr(5)
BUG_OFFSET_32BIT = tl.constexpr(6)
BUG_PREPROCESS_FLOOR = tl.constexpr(7)


@triton.jit
def _copy_bytes(src, dst, nbytes, CHUNK: tl.constexpr, FROM_THE_END: tl.constexpr):
    """nbytes from address src to address dst with memmove semantics (or, FROM_THE_END, the
    broken order). src and dst are int64 addresses."""
    lanes = tl.arange(0, CHUNK)
    shift = src - dst
    if (shift > 0) & (shift < nbytes):
        # Overlapping left shift: step j moves [j*shift, (j+1)*shift); the bytes it reads are
        # those step j+1 writes, at the same (sub, lane): one lane owns each byte position.
        steps = (nbytes + shift - 1) // shift
        for j in range(0, steps):
            if FROM_THE_END:
                start = (steps - 1 - j) * shift
            else:
                start = j * shift
            for sub in range(0, shift, CHUNK):
                offs = start + sub + lanes
                mask = ((sub + lanes) < shift) & (offs < nbytes)
                data = tl.load((src + offs).to(tl.pointer_type(tl.uint8)), mask=mask)
                tl.store((dst + offs).to(tl.pointer_type(tl.uint8)), data, mask=mask)
    else:
        for i in range(0, nbytes, CHUNK):
            offs = i + lanes
            mask = offs < nbytes
            data = tl.load((src + offs).to(tl.pointer_type(tl.uint8)), mask=mask)
            tl.store((dst + offs).to(tl.pointer_type(tl.uint8)), data, mask=mask)


@triton.jit
def _block_offset(block_id, stride, BUG: tl.constexpr):
    offset = block_id.to(tl.int64) * stride
    if BUG == BUG_OFFSET_32BIT:
        offset = offset & 0xFFFFFFFF
    return offset


@triton.jit
def _copy_state(s, row, src_col, dst_col, bias, bt_ptrs, bt_stride, bases, strides, elems,
                inners, widths, groups, ds_rows, ds_row_strides, CHUNK: tl.constexpr,
                DS: tl.constexpr, BUG: tl.constexpr):
    """copy(t, row, src_col, dst_col, bias) of LAUNCH_KINDS.md for state tensor s."""
    base = tl.load(bases + s)
    stride = tl.load(strides + s)
    elem = tl.load(elems + s).to(tl.int64)
    inner = tl.load(inners + s)
    width = tl.load(widths + s).to(tl.int64)
    group = tl.load(groups + s).to(tl.int64)
    table = tl.load(bt_ptrs + group).to(tl.pointer_type(tl.int32)) + row.to(tl.int64) * bt_stride
    dst = base + _block_offset(tl.load(table + dst_col), stride, BUG)
    bias64 = bias.to(tl.int64)
    if width > 0:
        src = base + _block_offset(tl.load(table + src_col), stride, BUG)
        kept = tl.maximum(width - bias64, 0)
        if DS:
            row_count = tl.load(ds_rows + s)
            row_stride = tl.load(ds_row_strides + s)
            skip = bias64 * elem
            if BUG == BUG_DS_IGNORES_BIAS:
                skip = bias64 * 0
            for d in range(0, row_count):
                _copy_bytes(src + d * row_stride + skip, dst + d * row_stride, kept * elem,
                            CHUNK, BUG == BUG_CONV_SHIFT_NOT_MEMMOVE)
        else:
            _copy_bytes(src + bias64 * inner * elem, dst, kept * inner * elem, CHUNK,
                        BUG == BUG_CONV_SHIFT_NOT_MEMMOVE)
    else:
        col = src_col + bias
        if BUG == BUG_TEMPORAL_IGNORES_BIAS:
            col = src_col + bias * 0
        src = base + _block_offset(tl.load(table + col), stride, BUG)
        nbytes = inner * elem
        if BUG == BUG_TEMPORAL_SIZE_FROM_STRIDE:
            nbytes = stride + inner * 0
        _copy_bytes(src, dst, nbytes, CHUNK, False)


@triton.jit
def _floor_multiple(value, block_size):
    """floor(value / block_size) * block_size, whatever `//` rounds negative values to."""
    q = value // block_size
    q = q - (q * block_size > value).to(q.dtype)
    return q * block_size


@triton.jit
def _save_decision(num_accepted_ptr, state_idx_ptr, num_scheduled_ptr, num_computed_ptr,
                   num_draft_ptr, slot, mask, block_size, PRECOMPUTED_NEW_COMPUTED: tl.constexpr):
    """Post-step save (REFERENCE.md 2): (copy?, bias, src column, dst column) per slot."""
    a = tl.load(num_accepted_ptr + slot, mask=mask, other=1)
    src = tl.load(state_idx_ptr + slot, mask=mask, other=-1)
    if PRECOMPUTED_NEW_COMPUTED:
        new = tl.load(num_computed_ptr + slot, mask=mask, other=0)
        running = new - a + 1
    else:
        scheduled = tl.load(num_scheduled_ptr + slot, mask=mask, other=0)
        computed = tl.load(num_computed_ptr + slot, mask=mask, other=0)
        draft = tl.load(num_draft_ptr + slot, mask=mask, other=0)
        running = computed + scheduled - draft
        new = running + a - 1
    aligned = _floor_multiple(new, block_size)
    copy = mask & (aligned >= running)
    return copy, aligned - running, src, aligned // block_size - 1


@triton.jit(do_not_specialize=["block_table_stride_req", "num_reqs", "block_size"])
def _postprocess_copy_kernel(num_accepted_ptr, mamba_state_idx_ptr, num_scheduled_tokens_ptr,
                             num_computed_tokens_ptr, num_draft_tokens_ptr,
                             block_table_ptrs_ptr, block_table_stride_req,
                             state_base_addrs_ptr, state_block_strides_ptr,
                             state_elem_sizes_ptr, state_inner_sizes_ptr,
                             state_conv_widths_ptr, state_group_indices_ptr,
                             state_dim_row_count_ptr, state_dim_row_stride_ptr, idx_mapping_ptr,
                             num_reqs, block_size, COPY_BLOCK_SIZE: tl.constexpr,
                             CONV_STATE_DIM_FIRST: tl.constexpr, HAS_IDX_MAPPING: tl.constexpr,
                             PRECOMPUTED_NEW_COMPUTED: tl.constexpr, BUG: tl.constexpr,
                             RACY_RESET: tl.constexpr):
    row = tl.program_id(0)
    s = tl.program_id(1)
    if row >= num_reqs:
        return
    if HAS_IDX_MAPPING:
        slot = tl.load(idx_mapping_ptr + row)
    else:
        slot = row
    if slot < 0:
        return
    copy, bias, src, dst = _save_decision(num_accepted_ptr, mamba_state_idx_ptr,
                                          num_scheduled_tokens_ptr, num_computed_tokens_ptr,
                                          num_draft_tokens_ptr, slot, slot >= 0, block_size,
                                          PRECOMPUTED_NEW_COMPUTED)
    if RACY_RESET:
        # The seed's order: reset right after deciding, before the row's other programs have
        # all read a (they read it above, whenever they start).
        if (s == 0) & copy & (src == dst):
            tl.store(num_accepted_ptr + slot, 1)
    if copy & ((src != dst) | (bias != 0)):
        _copy_state(s, row, src, dst, bias, block_table_ptrs_ptr, block_table_stride_req,
                    state_base_addrs_ptr, state_block_strides_ptr, state_elem_sizes_ptr,
                    state_inner_sizes_ptr, state_conv_widths_ptr, state_group_indices_ptr,
                    state_dim_row_count_ptr, state_dim_row_stride_ptr, COPY_BLOCK_SIZE,
                    CONV_STATE_DIM_FIRST, BUG)


@triton.jit(do_not_specialize=["num_reqs", "block_size"])
def _postprocess_reset_kernel(num_accepted_ptr, mamba_state_idx_ptr, num_scheduled_tokens_ptr,
                              num_computed_tokens_ptr, num_draft_tokens_ptr,
                              num_accepted_out_ptr, idx_mapping_ptr, num_reqs, block_size,
                              BLOCK: tl.constexpr, HAS_IDX_MAPPING: tl.constexpr,
                              PRECOMPUTED_NEW_COMPUTED: tl.constexpr):
    """After the copies: a = 1 where the save stays in its column (V1: the _out array)."""
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    in_batch = rows < num_reqs
    if HAS_IDX_MAPPING:
        slots = tl.load(idx_mapping_ptr + rows, mask=in_batch, other=-1)
    else:
        slots = rows
    mask = in_batch & (slots >= 0)
    slots = tl.where(mask, slots, 0)
    copy, bias, src, dst = _save_decision(num_accepted_ptr, mamba_state_idx_ptr,
                                          num_scheduled_tokens_ptr, num_computed_tokens_ptr,
                                          num_draft_tokens_ptr, slots, mask, block_size,
                                          PRECOMPUTED_NEW_COMPUTED)
    reset = copy & (src == dst)
    if HAS_IDX_MAPPING:
        tl.store(num_accepted_ptr + slots, 1, mask=reset)
    else:
        tl.store(num_accepted_out_ptr + slots, 1, mask=reset)


@triton.jit(do_not_specialize=["block_table_stride_req", "num_reqs"])
def _precopy_kernel(mamba_state_idx_ptr, src_col_ptr, token_bias_ptr, block_table_ptrs_ptr,
                    block_table_stride_req, state_base_addrs_ptr, state_block_strides_ptr,
                    state_elem_sizes_ptr, state_inner_sizes_ptr, state_conv_widths_ptr,
                    state_group_indices_ptr, state_dim_row_count_ptr, state_dim_row_stride_ptr,
                    idx_mapping_ptr, num_reqs, COPY_BLOCK_SIZE: tl.constexpr,
                    CONV_STATE_DIM_FIRST: tl.constexpr, BUG: tl.constexpr):
    row = tl.program_id(0)
    s = tl.program_id(1)
    if row >= num_reqs:
        return
    slot = tl.load(idx_mapping_ptr + row)
    if slot < 0:
        return
    src = tl.load(src_col_ptr + slot)
    dst = tl.load(mamba_state_idx_ptr + slot)
    if (src < 0) | (src == dst):
        return
    bias = tl.load(token_bias_ptr + slot)
    if BUG == BUG_GUARD_BY_ADDRESS:
        group = tl.load(state_group_indices_ptr + s).to(tl.int64)
        table = (tl.load(block_table_ptrs_ptr + group).to(tl.pointer_type(tl.int32)) +
                 row.to(tl.int64) * block_table_stride_req)
        if tl.load(table + src) == tl.load(table + dst):
            return
    _copy_state(s, row, src, dst, bias, block_table_ptrs_ptr, block_table_stride_req,
                state_base_addrs_ptr, state_block_strides_ptr, state_elem_sizes_ptr,
                state_inner_sizes_ptr, state_conv_widths_ptr, state_group_indices_ptr,
                state_dim_row_count_ptr, state_dim_row_stride_ptr, COPY_BLOCK_SIZE,
                CONV_STATE_DIM_FIRST, BUG)


@triton.jit(do_not_specialize=["num_reqs", "MAMBA_BLOCK_SIZE"])
def _preprocess_kernel(idx_mapping_ptr, state_idx_ptr, num_computed_tokens_ptr,
                       query_start_loc_ptr, num_accepted_tokens_ptr, src_col_ptr, src_off_ptr,
                       num_reqs, MAMBA_BLOCK_SIZE, BLOCK_SIZE: tl.constexpr, BUG: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    in_batch = rows < num_reqs
    slots = tl.load(idx_mapping_ptr + rows, mask=in_batch, other=-1)
    mask = in_batch & (slots >= 0)
    slots = tl.where(mask, slots, 0)
    old = tl.load(state_idx_ptr + slots, mask=mask, other=-1)
    accepted = tl.load(num_accepted_tokens_ptr + slots, mask=mask, other=1)
    tl.store(src_col_ptr + slots, old, mask=mask)
    tl.store(src_off_ptr + slots, tl.maximum(accepted - 1, 0), mask=mask)
    computed = tl.load(num_computed_tokens_ptr + slots, mask=mask, other=0)
    q_start = tl.load(query_start_loc_ptr + rows, mask=mask, other=0)
    q_end = tl.load(query_start_loc_ptr + rows + 1, mask=mask, other=0)
    tokens = computed + q_end - q_start
    if BUG == BUG_PREPROCESS_FLOOR:
        new = tokens // MAMBA_BLOCK_SIZE - 1
    else:
        new = (tokens + MAMBA_BLOCK_SIZE - 1) // MAMBA_BLOCK_SIZE - 1
    tl.store(state_idx_ptr + slots, new, mask=mask)
    tl.store(num_accepted_tokens_ptr + slots, 1, mask=mask & (old >= 0) & (old != new))


@triton.jit
def _batch_memcpy_kernel(src_ptrs, dst_ptrs, sizes, CHUNK: tl.constexpr, BUG: tl.constexpr):
    i = tl.program_id(0)
    _copy_bytes(tl.load(src_ptrs + i), tl.load(dst_ptrs + i), tl.load(sizes + i), CHUNK,
                BUG == BUG_CONV_SHIFT_NOT_MEMMOVE)


class _Kernel:
    """`kernel[grid](...)` with the seed's argument list, launching our kernels."""

    def __init__(self, launch, bug, racy=False):
        self.launch = launch
        self.bug = bug
        self.flags = {"racy": True} if racy else {}

    def __getitem__(self, grid):
        return functools.partial(self.launch, tuple(grid), self.bug, **self.flags)


def _postprocess(grid, bug, num_accepted_tokens_ptr, mamba_state_idx_ptr,
                 num_scheduled_tokens_ptr, num_computed_tokens_ptr, num_draft_tokens_ptr,
                 block_table_ptrs_ptr, block_table_stride_req, state_base_addrs_ptr,
                 state_block_strides_ptr, state_elem_sizes_ptr, state_inner_sizes_ptr,
                 state_conv_widths_ptr, state_group_indices_ptr, state_dim_row_count_ptr,
                 state_dim_row_stride_ptr, num_accepted_tokens_out_ptr, idx_mapping_ptr, num_reqs,
                 block_size, COPY_BLOCK_SIZE, CONV_STATE_DIM_FIRST, HAS_IDX_MAPPING=False,
                 PRECOMPUTED_NEW_COMPUTED=False, racy=False):
    # The racy reset is V2's (in place); V1 writes num_accepted_out, which no program reads.
    racy_reset = racy and HAS_IDX_MAPPING
    _postprocess_copy_kernel[grid](
        num_accepted_tokens_ptr, mamba_state_idx_ptr, num_scheduled_tokens_ptr,
        num_computed_tokens_ptr, num_draft_tokens_ptr, block_table_ptrs_ptr,
        block_table_stride_req, state_base_addrs_ptr, state_block_strides_ptr,
        state_elem_sizes_ptr, state_inner_sizes_ptr, state_conv_widths_ptr,
        state_group_indices_ptr, state_dim_row_count_ptr, state_dim_row_stride_ptr,
        idx_mapping_ptr, num_reqs, block_size, COPY_BLOCK_SIZE=COPY_BLOCK_SIZE,
        CONV_STATE_DIM_FIRST=CONV_STATE_DIM_FIRST, HAS_IDX_MAPPING=HAS_IDX_MAPPING,
        PRECOMPUTED_NEW_COMPUTED=PRECOMPUTED_NEW_COMPUTED, BUG=bug, RACY_RESET=racy_reset)
    if racy_reset:
        return  # no second launch: the copy programs reset a themselves
    _postprocess_reset_kernel[(triton.cdiv(num_reqs, RESET_BLOCK),)](
        num_accepted_tokens_ptr, mamba_state_idx_ptr, num_scheduled_tokens_ptr,
        num_computed_tokens_ptr, num_draft_tokens_ptr, num_accepted_tokens_out_ptr,
        idx_mapping_ptr, num_reqs, block_size, BLOCK=RESET_BLOCK,
        HAS_IDX_MAPPING=HAS_IDX_MAPPING, PRECOMPUTED_NEW_COMPUTED=PRECOMPUTED_NEW_COMPUTED)


def _precopy(grid, bug, *args, COPY_BLOCK_SIZE, CONV_STATE_DIM_FIRST):
    """The seed's precopy arguments (_precopy_kernel's), passed on."""
    _precopy_kernel[grid](*args, COPY_BLOCK_SIZE=COPY_BLOCK_SIZE,
                          CONV_STATE_DIM_FIRST=CONV_STATE_DIM_FIRST, BUG=bug)


def _preprocess(grid, bug, *args, BLOCK_SIZE, MAMBA_BLOCK_SIZE):
    """The seed's preprocess arguments, MAMBA_BLOCK_SIZE passed on at run time."""
    _preprocess_kernel[grid](*args, MAMBA_BLOCK_SIZE, BLOCK_SIZE=BLOCK_SIZE, BUG=bug)


def _batch_memcpy(bug, src_ptrs, dst_ptrs, sizes):
    if sizes.numel():
        _batch_memcpy_kernel[(sizes.numel(),)](src_ptrs, dst_ptrs, sizes, CHUNK=COPY_BLOCK_SIZE,
                                               BUG=bug)


def select_variant(*names):
    """These kernels with the named deliberate bugs ("clean": none): one name, or one
    deterministic bug and `racy_reset`."""
    if not 1 <= len(names) <= 2:
        raise ValueError(f"expected 1 or 2 variant names, got {len(names)}")
    forward_bugs = frozenset(names) & set(forward_reference.FORWARD_VARIANTS)
    if forward_bugs and len(names) > 1:
        raise ValueError(f"{', '.join(names)}: a forward variant comes alone")
    for name in names:
        if name not in VARIANTS and name not in forward_bugs:
            raise ValueError(f"unknown variant {name!r}; known: {', '.join(VARIANTS)}")
    codes = [VARIANTS[n] for n in names
             if n not in RACY_VARIANTS and n != "clean" and n not in forward_bugs]
    if len(codes) > 1:
        raise ValueError(f"{', '.join(names)}: these kernels carry one deterministic bug at a "
                         f"time (combine one with {', '.join(sorted(RACY_VARIANTS))})")
    bug = codes[0] if codes else 0
    racy = any(n in RACY_VARIANTS for n in names)
    return types.SimpleNamespace(
        **forward_reference.make(forward_bugs),
        postprocess_mamba_fused_kernel=_Kernel(_postprocess, bug, racy),
        precopy_mamba_align_fused_kernel=_Kernel(_precopy, bug),
        preprocess_mamba_align_fused_kernel=_Kernel(_preprocess, bug),
        batch_memcpy=functools.partial(_batch_memcpy, bug),
        COPY_BLOCK_SIZE=COPY_BLOCK_SIZE,
        DEVICE=DEVICE,
    )


# The module's own attributes are the clean kernels.
globals().update(vars(select_variant("clean")))
