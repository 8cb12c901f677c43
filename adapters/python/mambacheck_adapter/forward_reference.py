"""Host versions of the forward's state kernels with the seed's wrapper signatures
(selective_state_update, causal_conv1d_update, selective_scan_fn), over numpy arrays, for the
adapter's tests and mambacheck's CI: forward.py drives them on tracer states. They follow
vLLM's kernels as model/FORWARD.md and adapters/python/README.md ("Forward protocol") state them:

- selective_state_update: per sequence s, the initial state is read from
  state_batch_indices[s, max(num_accepted[s] - 1, 0)] (column 0 without spec decode); a count
  past the row's window skips the sequence (the bound of #50021); a null source starts from
  zeros and masks every state write. With spec decode (cu_seqlens) the state
  after token t goes to dst_state_batch_indices[s, t] unless that entry is null; without it the
  state after the sequence's one token goes to dst_state_batch_indices[s, 0].
- causal_conv1d_update: per sequence, the window is read from conv_state_indices[s, 0] (or the
  column initial_state_idx names) at token offset num_accepted - 1, rows
  [off, off + width - 1); a null source skips the sequence. The new window, the history from its
  second row on and then the sequence's q tokens (width - 2 + q rows), is written from row 0 of
  conv_state_indices[s, 0] (or block_idx_last_scheduled_token's column).

Every index is checked: an entry outside its index tensor or a block outside the state tensor
raises IndexError naming it, where a GPU kernel would read or write memory it does not own.
- selective_scan_fn (prefill rows, varlen): per sequence the state of cache_indices[s]
  (zeros where has_initial_state[s] is false) after the sequence's tokens, written back to
  cache_indices[s]; a null entry skips the sequence. With its prefix-caching arguments
  (cache_indices[s] a whole table row): the state is read from the column initial_state_idx
  names, the state after each block boundary inside the chunk is written to the columns from
  block_idx_first_scheduled_token on, and the final state to block_idx_last_scheduled_token's
  column; the chunk starts on a block boundary.

`make(bugs)` returns the three kernels by name, with the named deliberate bugs
(FORWARD_VARIANTS). They take numpy arrays or torch tensors alike (the adapter's test kernels
run them on a GPU through torch, a sequence at a time).
"""

import numpy as np

FORWARD_VARIANTS = {
    "reads_column_a": "the initial SSM state is read from column num_accepted instead of "
                      "num_accepted - 1, and the conv window from token offset num_accepted: "
                      "after a fully accepted step, past the window (the next row's entry)",
    "null_block_not_skipped": "a row whose index is the null block (a CUDA-graph padding "
                              "row) is processed like any other: its states go to block 0",
    "drafts_into_one_column": "with spec decode, the state after every token is written to "
                              "the row's first column instead of column t: the draft "
                              "prefixes overwrite each other and the other columns stay stale",
    "accepted_bound_wrong_stride": "selective_state_update bounds num_accepted - 1 against the "
                                   "index table's column stride (1) instead of its row width, "
                                   "as #50021's first version did: every row with "
                                   "num_accepted > 1 fails the bound and is skipped, its "
                                   "states never written",
    "no_accepted_bound": "selective_state_update reads state_batch_indices[s, num_accepted - 1] "
                         "with no bound at all (#50021): a count of 0 or past the window, as "
                         "a stale or racing count reaches the kernel, reads another row's "
                         "entry or memory before the table",
    "final_state_to_initial_block": "selective_scan_fn with prefix caching writes the final "
                                    "state to the column it read (initial_state_idx), as "
                                    "without prefix caching, instead of "
                                    "block_idx_last_scheduled_token's: the cached block of the "
                                    "last computed token is overwritten and the row's last "
                                    "block keeps its old state",
    "scan_ignores_initial_state": "selective_scan_fn starts every prefill row from zeros, "
                                  "has_initial_state ignored: a chunk after the first loses "
                                  "the state its request had",
}


class _Ops:
    """The few array operations the kernels need, for numpy arrays or torch tensors."""

    def __init__(self, like):
        self.torch = None if isinstance(like, np.ndarray) else __import__("torch")

    def f32(self, a):
        return np.array(a, dtype=np.float32) if self.torch is None else a.to(self.torch.float32).clone()

    def zeros(self, shape, like):
        if self.torch is None:
            return np.zeros(shape, dtype=np.float32)
        return self.torch.zeros(shape, dtype=self.torch.float32, device=like.device)

    def exp(self, a):
        return np.exp(a) if self.torch is None else self.torch.exp(a)

    def softplus(self, a):
        if self.torch is None:
            return np.where(a <= 20.0, np.log1p(np.exp(a)), a)
        return self.torch.where(a <= 20.0, self.torch.log1p(self.torch.exp(a)), a)

    def cat(self, parts):
        return np.concatenate(parts, axis=1) if self.torch is None else self.torch.cat(parts, 1)


def _entry(table, s, col, what):
    """table[s, col] read as a GPU kernel reads it: flat entry s * width + col, checked."""
    width = table.shape[1]
    flat = s * width + col
    if not 0 <= flat < table.shape[0] * width:
        raise IndexError(f"{what}[{s}, {col}]: flat entry {flat} outside the tensor of "
                         f"{table.shape[0]} x {width} entries")
    return int(table.reshape(-1)[flat])


def _block(states, b, what):
    if not 0 <= b < states.shape[0]:
        raise IndexError(f"{what}: block {b} outside the state tensor of {states.shape[0]} "
                         f"blocks")
    return b


def _as_table(indices):
    return indices.reshape(-1, 1) if indices.ndim == 1 else indices


def _sequences(num_tokens, cu_seqlens):
    if cu_seqlens is None:
        return [(t, t + 1) for t in range(num_tokens)]
    cu = [int(v) for v in cu_seqlens.reshape(-1)]
    return [(cu[s], cu[s + 1]) for s in range(len(cu) - 1)]


def make(bugs=frozenset()):
    """The three kernels by name, with the deliberate bugs `bugs` (names of FORWARD_VARIANTS)."""
    reads_a = "reads_column_a" in bugs
    null_ok = "null_block_not_skipped" in bugs
    one_column = "drafts_into_one_column" in bugs
    no_initial = "scan_ignores_initial_state" in bugs
    wrong_stride = "accepted_bound_wrong_stride" in bugs
    final_to_read = "final_state_to_initial_block" in bugs
    unbounded = "no_accepted_bound" in bugs

    def selective_state_update(state, x, dt, A, B, C, D, dt_bias, z=None, dt_softplus=False,
                               state_batch_indices=None, dst_state_batch_indices=None,
                               null_block_id=0, out=None, num_accepted_tokens=None,
                               cu_seqlens=None, **_):
        ops = _Ops(state)
        src_table = _as_table(state_batch_indices)
        dst_table = src_table if dst_state_batch_indices is None else \
            _as_table(dst_state_batch_indices)
        spec = cu_seqlens is not None
        ngroups = B.shape[1]
        heads = state.shape[1]
        for s, (lo, hi) in enumerate(_sequences(x.shape[0], cu_seqlens)):
            if hi <= lo:
                continue
            a = int(num_accepted_tokens[s]) if num_accepted_tokens is not None else 1
            col = a if reads_a else a - 1 if unbounded else max(a - 1, 0)
            # The bound on the column: the row's width (its stride between rows), or with
            # the bug the stride between columns.
            bound = 1 if wrong_stride else src_table.shape[1]
            if (num_accepted_tokens is not None and col >= bound and not reads_a
                    and not unbounded):
                continue
            src = _entry(src_table, s, col, "state_batch_indices")
            live = src != null_block_id or null_ok
            st = (ops.f32(state[_block(state, src, "selective_state_update read")])
                  if live else ops.zeros(state.shape[1:], state))
            for t in range(hi - lo):
                tok = lo + t
                dtv = dt[tok] + dt_bias
                if dt_softplus:
                    dtv = ops.softplus(dtv)
                for h in range(heads):
                    g = h * ngroups // heads
                    dA = ops.exp(dtv[h][:, None] * A[h])
                    dB = dtv[h][:, None] * B[tok, g][None, :]
                    st[h] = st[h] * dA + dB * x[tok, h][:, None]
                    if out is not None:
                        out[tok, h] = (st[h] * C[tok, g][None, :]).sum(-1) + D[h] * x[tok, h]
                if spec and live:
                    dst = _entry(dst_table, s, 0 if one_column else t,
                                 "dst_state_batch_indices")
                    if dst != null_block_id or null_ok:
                        state[_block(state, dst, "selective_state_update write")] = st
            if not spec and live:
                dst = _entry(dst_table, s, 0, "dst_state_batch_indices")
                state[_block(state, dst, "selective_state_update write")] = st

    def causal_conv1d_update(x, conv_state, weight, bias=None, activation=None,
                             conv_state_indices=None, num_accepted_tokens=None,
                             query_start_loc=None, max_query_len=-1, null_block_id=0,
                             block_idx_last_scheduled_token=None, initial_state_idx=None,
                             validate_data=False):
        ops = _Ops(conv_state)
        table = _as_table(conv_state_indices)
        width = weight.shape[1]
        length = conv_state.shape[2]
        for s, (lo, hi) in enumerate(_sequences(x.shape[0], query_start_loc)):
            rd_col = int(initial_state_idx[s]) if initial_state_idx is not None else 0
            wr_col = (int(block_idx_last_scheduled_token[s])
                      if block_idx_last_scheduled_token is not None else 0)
            rd = _entry(table, s, rd_col, "conv_state_indices")
            if (rd == null_block_id and not null_ok) or hi <= lo:
                continue
            a = int(num_accepted_tokens[s]) if num_accepted_tokens is not None else 1
            off = a if reads_a else a - 1
            if off < 0 or off + width - 1 > length:
                raise IndexError(f"causal_conv1d_update: rows [{off}, {off + width - 1}) outside a "
                                 f"conv state of {length} rows")
            hist = ops.f32(conv_state[_block(conv_state, rd, "causal_conv1d_update read"), :,
                                      off:off + width - 1])
            full = ops.cat([hist, ops.f32(x[lo:hi]).T])
            for t in range(hi - lo):
                y = (full[:, t:t + width] * weight).sum(-1)
                if bias is not None:
                    y = y + bias
                if activation in ("silu", "swish"):
                    y = y / (1.0 + ops.exp(-y))
                x[lo + t] = y
            wr = _entry(table, s, wr_col, "conv_state_indices")
            window = full[:, 1:]
            conv_state[_block(conv_state, wr, "causal_conv1d_update write"), :,
                       :window.shape[1]] = window

    def selective_scan_fn(u, ssm_states, delta, A, B, C, D=None, z=None, delta_bias=None,
                          delta_softplus=False, query_start_loc=None, cache_indices=None,
                          has_initial_state=None, null_block_id=0, block_size=1024,
                          block_idx_first_scheduled_token=None,
                          block_idx_last_scheduled_token=None, initial_state_idx=None, **_):
        ops = _Ops(ssm_states)
        caching = block_idx_first_scheduled_token is not None
        table = _as_table(cache_indices)
        if B.shape[0] != 1:
            raise ValueError("selective_scan_fn: this reference takes one group of B")
        for b, (lo, hi) in enumerate(_sequences(u.shape[1], query_start_loc)):
            # Without prefix caching: read and write the row's one block. With it: read the
            # column initial_state_idx names, write each block boundary's state from
            # block_idx_first_scheduled_token on and the final state to
            # block_idx_last_scheduled_token's column.
            rd_col = int(initial_state_idx[b]) if caching else 0
            first = int(block_idx_first_scheduled_token[b]) if caching else 0
            last = int(block_idx_last_scheduled_token[b]) if caching else 0
            final = _entry(table, b, rd_col if final_to_read else last, "cache_indices")
            if final == null_block_id and not null_ok:
                continue
            initial = (has_initial_state is not None and bool(has_initial_state[b])
                       and not no_initial)
            src = _entry(table, b, rd_col, "cache_indices")
            st = (ops.f32(ssm_states[_block(ssm_states, src, "selective_scan_fn read")])
                  if initial else ops.zeros(ssm_states.shape[1:], ssm_states))
            for t in range(lo, hi):
                dtv = delta[:, t] + (delta_bias if delta_bias is not None else 0.0)
                if delta_softplus:
                    dtv = ops.softplus(dtv)
                st = (st * ops.exp(dtv[:, None] * A)
                      + dtv[:, None] * B[0, :, t][None, :] * u[:, t][:, None])
                # The chunk starts on a block boundary (vLLM's chunking keeps it there), so
                # its k-th boundary comes after k * block_size of its tokens.
                done = t + 1 - lo
                col = first + done // block_size - 1
                if caching and done % block_size == 0 and col < last:
                    dst = _entry(table, b, col, "cache_indices")
                    ssm_states[_block(ssm_states, dst, "selective_scan_fn write")] = st
            ssm_states[_block(ssm_states, final, "selective_scan_fn write")] = st

    return {"selective_state_update": selective_state_update,
            "causal_conv1d_update": causal_conv1d_update, "selective_scan_fn": selective_scan_fn}
