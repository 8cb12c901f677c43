"""The forward's state kernels of the module under test, driven as vLLM's mamba mixer drives
them (align and all mode), on tracer states (README.md, "Forward protocol").

mambacheck sends, per engine step with decode or prefill rows, the rows the metadata builder
made: state_indices_tensor_d (each row's window of 1 + num_spec block ids, the null block 0 in
the CUDA-graph padding rows), num_accepted_tokens and query_start_loc where spec decode is on,
and the prefill rows for selective_scan_fn.
The worker calls the module's kernels with the seed's wrapper signatures:

    selective_state_update(state, x, dt, A, B, C, D, dt_bias, z=None, dt_softplus=False,
                           state_batch_indices=idx, dst_state_batch_indices=idx,
                           null_block_id=0, out=out, num_accepted_tokens=a, cu_seqlens=qsl)
    causal_conv1d_update(x, conv_state, weight, bias=None, activation=None,
                         conv_state_indices=idx, num_accepted_tokens=a, query_start_loc=qsl,
                         max_query_len=width, null_block_id=0)

(in all mode the SSM kernel's source and destination gathered from each row's block-table row
by block_idx_last_computed and block_idx_last_scheduled, the conv kernel given the table with
initial_state_idx and block_idx_last_scheduled_token, the scan its prefix-caching arguments)
on states it made itself, whose values say where they came from, so that what the kernels
wrote tells which block each write read:
- the SSM state, float32 (blocks, 1 head, 2, 2): block b holds (b + 1) * 64 everywhere, and the
  inputs are chosen so that one token adds exactly 1 (A = 0, dt = B = x = 1, no softplus): a
  block written with v = (s + 1) * 64 + k holds the state read from block s after k tokens;
- the conv state, float32 (blocks, 2 channels, state_len): row r of block b holds
  (b + 1) * 64 + r + 1, and the step's token i of a row is x = -(i + 1) (weights 0), so each
  row of a written window names the block and row it came from, or the new token it is.
Around each state tensor GUARD_BLOCKS blocks on either side hold GUARD_VALUE: a read outside
the tensor shows as that value in what it wrote, a write outside it as a changed guard.

The answer lists what changed, decoded; mambacheck judges it against the metadata (which
block each row must read and write) and reports any difference as a finding.
"""

import numpy as np

# The seed's wrapper names, by the short name the greeting and messages use.
FORWARD_KERNELS = {"ssm": "selective_state_update", "conv": "causal_conv1d_update",
                   "scan": "selective_scan_fn"}
TRACER_BLOCK = 64.0  # a block's tag step: (b + 1) * 64 (+ tokens, or + row + 1)
GUARD_BLOCKS = 2
GUARD_VALUE = -(1 << 24) / 2  # far below any tracer value, plus any tokens applied
SSM_SHAPE = (1, 2, 2)  # nheads, headdim, dstate
CONV_DIM = 2
NULL_BLOCK_ID = 0


class ForwardError(Exception):
    """A forward message this worker cannot act on."""


def supported(module):
    """The short names of the forward kernels `module` provides."""
    return [k for k, name in FORWARD_KERNELS.items() if callable(getattr(module, name, None))]


def _field(message, key):
    if key not in message:
        raise ForwardError(f"engine forward: {key}: missing")
    return message[key]


def _columns(message, key, rows, width):
    """A per-row block index of the message: rows entries, each a column of a row of width."""
    v = np.asarray(_field(message, key), dtype=np.int32)
    if v.size != rows or np.any(v < 0) or np.any(v >= width):
        raise ForwardError(f"engine forward: {key}: expected {rows} columns in [0, {width})")
    return v


def _check_offsets(offsets, key):
    if offsets[0] != 0 or np.any(np.diff(offsets) < 0):
        raise ForwardError(f"engine forward: {key} must start at 0 and never decrease")


def _changed_blocks(before, after, n):
    """The blocks (of the n between the guards) whose values changed."""
    inner_before = before[GUARD_BLOCKS:GUARD_BLOCKS + n]
    inner_after = after[GUARD_BLOCKS:GUARD_BLOCKS + n]
    return np.flatnonzero((inner_before != inner_after).reshape(n, -1).any(axis=1))


def _state_writes(before, after, n, tag, zeros_source):
    """[block, source block, tokens] per changed block of a state tracer whose block b held
    (b + 1) * tag and gained 1 per token (_decode_state)."""
    return [[int(b), *_decode_state(np.unique(after[GUARD_BLOCKS + b]), tag, zeros_source)]
            for b in _changed_blocks(before, after, n)]


def _decode_state(values, tag, zeros_source):
    """[source block, tokens] of the distinct values of a written state block: source -3 for
    a guard's value (read outside the tensor), `zeros_source` for a value below the tag (a
    state started from zeros), -2 for anything else (not one whole value)."""
    v = float(values[0])
    if values.size != 1:
        return [-2, 0]
    if v < 0:  # a guard's value, plus the tokens applied: every state's is above 0
        return [-3, 0]
    if v != np.floor(v):
        return [-2, 0]
    if v < tag:
        return [zeros_source, int(v) if zeros_source == -4 else 0]
    return [int(v) // int(tag) - 1, int(v) % int(tag)]


def _decode_conv(values):
    """[source block, source row] of the distinct values of a tracer conv row; [-1, i] for
    the step's token i, [-3, 0] for a guard value (read outside the tensor), [-2, 0] for
    anything else (several values among them)."""
    value = float(values[0])
    if values.size != 1:
        return [-2, 0]
    if value == GUARD_VALUE:
        return [-3, 0]
    if value != np.floor(value):
        return [-2, 0]
    v = int(value)
    if v < 0 and v > -int(TRACER_BLOCK):
        return [-1, -v - 1]
    if v > int(TRACER_BLOCK):
        return [v // int(TRACER_BLOCK) - 1, v % int(TRACER_BLOCK) - 1]
    return [-2, 0]


class Step:
    """One forward message, parsed and checked."""

    def parse_prefill(self, message):
        """The prefill rows (selective_scan_fn's): block (all mode: table row), token offsets,
        initial state, and in all mode the block indices."""
        self.prefill_qsl = np.asarray(message.get("prefill_query_start_loc", [0]), dtype=np.int32)
        self.prefill_initial = np.asarray(message.get("prefill_has_initial_state", []), dtype=bool)
        self.prefill_width = int(message.get("prefill_width", 1))
        p = self.prefill_qsl.size - 1
        indices = np.asarray(message.get("prefill_state_indices", []), dtype=np.int32)
        if p < 0 or self.prefill_width <= 0 or indices.size != p * self.prefill_width or \
                self.prefill_initial.size != p:
            raise ForwardError("engine forward: prefill rows need prefill_state_indices of rows "
                               "x prefill_width, prefill_query_start_loc of rows + 1 and "
                               "prefill_has_initial_state of rows entries")
        _check_offsets(self.prefill_qsl, "prefill_query_start_loc")
        self.prefill_indices = indices.reshape(p, self.prefill_width) if self.all_mode \
            else indices
        self.prefill_columns = [np.zeros(0, dtype=np.int32)] * 3
        if self.all_mode and p > 0:
            self.prefill_columns = [
                _columns(message, key, p, self.prefill_width)
                for key in ("prefill_block_idx_first_scheduled",
                            "prefill_block_idx_last_scheduled", "prefill_block_idx_last_computed")]

    def __init__(self, message):
        for key in ("num_blocks", "state_len", "conv_width", "rows", "width"):
            setattr(self, key, int(_field(message, key)))
        self.kernels = list(_field(message, "kernels"))
        if self.num_blocks <= 0 or self.rows < 0 or self.width <= 0:
            raise ForwardError("engine forward: num_blocks and width must be positive, rows not "
                               "negative")
        # All mode: every row is a whole block-table row, indexed by the block indices.
        self.all_mode = "block_idx_last_computed" in message
        if self.all_mode:
            self.block_size = int(_field(message, "block_size"))
            if self.block_size <= 0:
                raise ForwardError("engine forward: block_size must be positive")
        self.parse_prefill(message)
        if self.num_blocks * TRACER_BLOCK >= 1 << 24:
            raise ForwardError(f"engine forward: {self.num_blocks} blocks: the tracer values "
                               f"stay exact in float32 up to {(1 << 24) // 64 - 1}")
        if "conv" in self.kernels and (not 2 <= self.conv_width <= self.state_len + 1
                                       or self.state_len >= TRACER_BLOCK - 1):
            raise ForwardError(f"engine forward: conv_width {self.conv_width}, state_len "
                               f"{self.state_len}: expected 2 <= conv_width <= state_len + 1 "
                               f"< 64")
        self.indices = np.asarray(_field(message, "state_indices"), dtype=np.int32)
        if self.indices.size != self.rows * self.width:
            raise ForwardError(f"engine forward: state_indices: {self.indices.size} entries, "
                               f"expected rows x width = {self.rows * self.width}")
        self.indices = self.indices.reshape(self.rows, self.width)
        if self.all_mode:
            self.last_computed, self.last_scheduled = (
                _columns(message, key, self.rows, self.width)
                for key in ("block_idx_last_computed", "block_idx_last_scheduled"))
        self.num_accepted, self.query_start_loc = (
            None if message.get(key) is None else np.asarray(message[key], dtype=np.int32)
            for key in ("num_accepted", "query_start_loc"))
        if (self.num_accepted is None) != (self.query_start_loc is None):
            raise ForwardError("engine forward: num_accepted and query_start_loc come together "
                               "(spec decode) or not at all")
        if self.num_accepted is not None:
            if self.num_accepted.size != self.rows or self.query_start_loc.size != self.rows + 1:
                raise ForwardError("engine forward: num_accepted needs rows entries and "
                                   "query_start_loc rows + 1")
            _check_offsets(self.query_start_loc, "query_start_loc")
            self.num_tokens = int(self.query_start_loc[-1])
        else:
            self.num_tokens = self.rows
        for k in self.kernels:
            if k not in FORWARD_KERNELS:
                raise ForwardError(f"engine forward: kernel {k!r} is not one of "
                                   f"{sorted(FORWARD_KERNELS)}")

    def token_index(self):
        """Per token of the batch, its index within its row."""
        if self.query_start_loc is None:
            return np.zeros(self.rows, dtype=np.int64)
        out = np.zeros(self.num_tokens, dtype=np.int64)
        for r in range(self.rows):
            lo, hi = int(self.query_start_loc[r]), int(self.query_start_loc[r + 1])
            out[lo:hi] = np.arange(hi - lo)
        return out


def _tracer(inner, device):
    """`inner` (blocks first) on the device with GUARD_BLOCKS guard blocks of GUARD_VALUE on
    either side: (the values before the kernel, the whole tensor, the inner blocks of it)."""
    n = inner.shape[0]
    before = np.full((n + 2 * GUARD_BLOCKS,) + inner.shape[1:], GUARD_VALUE, dtype=np.float32)
    before[GUARD_BLOCKS:GUARD_BLOCKS + n] = inner
    full = device.tensor(before)
    return before, full, full[GUARD_BLOCKS:GUARD_BLOCKS + n]


def _f32(device, shape, value):
    """A float32 kernel argument of `shape` holding `value` everywhere."""
    return device.tensor(np.full(shape, value, dtype=np.float32))


def _guards_changed(before, after, n):
    guards = (("before", slice(0, GUARD_BLOCKS)), ("after", slice(GUARD_BLOCKS + n, None)))
    return [side for side, guard in guards if not np.array_equal(before[guard], after[guard])]


def run_ssm(step, kernel, device):
    n = step.num_blocks
    tags = (np.arange(n, dtype=np.float32) + 1) * TRACER_BLOCK
    before, full, state = _tracer(np.broadcast_to(tags[:, None, None, None], (n,) + SSM_SHAPE),
                                  device)
    t = step.num_tokens
    heads, dim, dstate = SSM_SHAPE
    spec = step.num_accepted is not None
    src = dst = device.tensor(step.indices)
    if step.all_mode:  # the mixer's gathers: one column read, one written
        rows = np.arange(step.rows)
        src = device.tensor(step.indices[rows, step.last_computed].copy())
        dst = device.tensor(step.indices[rows, step.last_scheduled].copy())
    kernel(state, _f32(device, (t, heads, dim), 1), _f32(device, (t, heads, dim), 1),  # x, dt
           _f32(device, (heads, dim, dstate), 0), _f32(device, (t, 1, dstate), 1),  # A, B
           _f32(device, (t, 1, dstate), 1), _f32(device, (heads, dim), 0),  # C, D
           _f32(device, (heads, dim), 0),  # dt_bias
           z=None, dt_softplus=False, state_batch_indices=src, dst_state_batch_indices=dst,
           null_block_id=NULL_BLOCK_ID, out=_f32(device, (t, heads, dim), 0),
           num_accepted_tokens=device.tensor(step.num_accepted) if spec else None,
           cu_seqlens=device.tensor(step.query_start_loc) if spec else None)
    after = device.to_numpy(full)
    # A state from zeros (a null source) is never written: below the tag is no state.
    return {"writes": _state_writes(before, after, n, TRACER_BLOCK, -2),
            "outside": _guards_changed(before, after, n)}


def run_conv(step, kernel, device):
    n, length = step.num_blocks, step.state_len
    rows = np.arange(length, dtype=np.float32) + 1
    tags = (np.arange(n, dtype=np.float32) + 1) * TRACER_BLOCK
    before, full, conv_state = _tracer(
        np.broadcast_to(tags[:, None, None] + rows[None, None, :], (n, CONV_DIM, length)), device)
    tokens = -(step.token_index().astype(np.float32) + 1)
    x = np.broadcast_to(tokens[:, None], (step.num_tokens, CONV_DIM)).copy()
    spec = step.num_accepted is not None
    kernel(device.tensor(x), conv_state,
           _f32(device, (CONV_DIM, step.conv_width), 0), bias=None,
           activation=None, conv_state_indices=device.tensor(step.indices),
           num_accepted_tokens=device.tensor(step.num_accepted) if spec else None,
           query_start_loc=device.tensor(step.query_start_loc) if spec else None,
           max_query_len=step.width, null_block_id=NULL_BLOCK_ID,
           **({"block_idx_last_scheduled_token": device.tensor(step.last_scheduled),
               "initial_state_idx": device.tensor(step.last_computed)} if step.all_mode else {}))
    after = device.to_numpy(full)
    inner_after = after[GUARD_BLOCKS:GUARD_BLOCKS + n]
    writes = [[int(b), [_decode_conv(np.unique(inner_after[b, :, r])) for r in range(length)]]
              for b in _changed_blocks(before, after, n)]
    return {"writes": writes, "outside": _guards_changed(before, after, n)}


def scan_tag(step):
    """The tag step of the scan's tracer: a power of two above every prefill row's tokens."""
    longest = int(np.max(np.diff(step.prefill_qsl))) if step.prefill_qsl.size > 1 else 0
    return float(max(64, 1 << longest.bit_length()))


def run_scan(step, kernel, device):
    """selective_scan_fn over the prefill rows (varlen; align mode: one block each; all mode:
    whole table rows with the prefix-caching arguments): block b holds (b + 1) * S, every
    token adds 1 (A = 0, delta = B = u = 1), so a block written with v holds the state of
    block v // S - 1 after v % S tokens, or, where v < S, the state of no block (started from
    zeros) after v tokens."""
    n, tag = step.num_blocks, scan_tag(step)
    if n * tag >= 1 << 24:
        raise ForwardError(f"engine forward: {n} blocks with prefill rows of up to "
                           f"{int(tag) - 1} tokens: the scan's tracer values would not stay "
                           f"exact in float32")
    dim, dstate = 2, 2
    tags = (np.arange(n, dtype=np.float32) + 1) * tag
    before, full, states = _tracer(np.broadcast_to(tags[:, None, None], (n, dim, dstate)), device)
    total = int(step.prefill_qsl[-1])
    kernel(_f32(device, (dim, total), 1), states, _f32(device, (dim, total), 1),  # u, delta
           _f32(device, (dim, dstate), 0), _f32(device, (1, dstate, total), 1),  # A, B
           _f32(device, (1, dstate, total), 1),  # C
           D=None, z=None, delta_bias=None, delta_softplus=False,
           query_start_loc=device.tensor(step.prefill_qsl),
           cache_indices=device.tensor(step.prefill_indices),
           has_initial_state=device.tensor(step.prefill_initial), null_block_id=NULL_BLOCK_ID,
           **(_prefix_caching(step, device) if step.all_mode else {}))
    after = device.to_numpy(full)
    return {"writes": _state_writes(before, after, n, tag, -4),
            "outside": _guards_changed(before, after, n)}


def _prefix_caching(step, device):
    """selective_scan_fn's prefix-caching arguments for an all-mode step's prefill rows."""
    first, last, computed = (device.tensor(v) for v in step.prefill_columns)
    return {"block_size": step.block_size, "block_idx_first_scheduled_token": first,
            "block_idx_last_scheduled_token": last, "initial_state_idx": computed}


def answer(message, module, device):
    """The answer to one forward message: per kernel asked for, what it wrote."""
    step = Step(message)
    out = {}
    for k in step.kernels:
        kernel = getattr(module, FORWARD_KERNELS[k], None)
        if kernel is None:
            raise ForwardError(f"engine forward: the module has no {FORWARD_KERNELS[k]}")
        out[k] = {"ssm": run_ssm, "conv": run_conv, "scan": run_scan}[k](step, kernel, device)
    return out
