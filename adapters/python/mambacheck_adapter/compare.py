"""The first difference between an expected result and an actual one, in the terms the C++
reports use (fuzz/compare.h): the status, then the copy decisions, then the per-request
arrays (name, index, slot and batch row), then the arena bytes mapped back to (group, layer,
state, physical block, byte in the block, element) or the page padding, with the run of
differing bytes and a hex excerpt of each side.

Both sides are result directories (casefile.StoredResult). Decisions are compared only when
both recorded them: a kernel under test reports effects, not decisions.
"""

import numpy as np

from . import casefile

RUN_SCAN_BYTES_MAX = 1 << 20
HEX_BYTES_MAX = 8
COMPARE_CHUNK = 64 << 20


def first_difference(case, expected, actual):
    """A one-line message naming the first difference, or None when the results are equal."""
    if expected.status != actual.status:
        why = f" ({actual.reason})" if actual.reason else ""
        return f"status: expected {expected.status}, actual {actual.status}{why}"
    if expected.decisions_recorded and actual.decisions_recorded:
        message = compare_decisions(expected.decisions, actual.decisions)
        if message:
            return message
    message = compare_arrays(case, expected.arrays, actual.arrays)
    if message:
        return message
    for i in range(len(case.arena_specs)):
        message = compare_arena(case, i, expected.arena_files[i], actual.arena_files[i])
        if message:
            return message
    return None


def compare_decisions(expected, actual):
    for i, (e, a) in enumerate(zip(expected, actual)):
        if e != a:
            fields = [f"{k} {e.get(k)} vs {a.get(k)}" for k in casefile.DECISION_FIELDS
                      if e.get(k) != a.get(k)]
            return (f"decisions: decision {i} (batch row {e.get('batch_row')}, tensor "
                    f"{e.get('tensor')}) differs: {', '.join(fields)} (expected vs actual)")
    if len(expected) != len(actual):
        return f"decisions: expected {len(expected)}, actual {len(actual)}"
    return None


def entry_context(case, name, i):
    if name == "idx_mapping":
        return f"batch row {i}"
    if name == "query_start_loc":
        return f"start of batch row {i}"
    mapping = case.arrays.get("idx_mapping")
    if mapping is None or len(mapping) == 0:
        return f"slot {i}, batch row {i}"
    rows = np.flatnonzero(np.asarray(mapping) == i)
    return f"slot {i}, batch row {int(rows[0])}" if rows.size else f"slot {i}, not in the batch"


def compare_arrays(case, expected, actual):
    empty = np.zeros(0, dtype=np.int32)
    for name in casefile.ARRAY_ORDER:
        e, a = expected.get(name, empty), actual.get(name, empty)
        if len(e) != len(a):
            return f"requests: array {name} has {len(a)} entries; expected {len(e)}"
        differ = np.flatnonzero(np.asarray(e) != np.asarray(a))
        if differ.size:
            i = int(differ[0])
            return (f"requests: {name}[{i}] ({entry_context(case, name, i)}): expected "
                    f"{int(e[i])}, actual {int(a[i])}")
    return None


def merged_regions(files, start, end):
    """The union of the data regions of several files within [start, end)."""
    spans = sorted(r for f in files for r in casefile.data_regions(f, start, end))
    merged = []
    for s, n in spans:
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], s + n)
        else:
            merged.append([s, s + n])
    return merged


def compare_arena(case, i, expected_file, actual_file):
    e = np.load(expected_file, mmap_mode="r").reshape(-1)
    a = np.load(actual_file, mmap_mode="r").reshape(-1)
    if e.size != a.size:
        return f"arena {i}: expected {e.size} bytes, actual {a.size}"
    offset = case.arena_offsets[i]
    for s, t in merged_regions([expected_file, actual_file], offset, offset + e.size):
        for lo in range(s - offset, t - offset, COMPARE_CHUNK):
            hi = min(t - offset, lo + COMPARE_CHUNK)
            differ = np.flatnonzero(e[lo:hi] != a[lo:hi])
            if differ.size:
                return describe_arena_difference(case, i, e, a, lo + int(differ[0]))
    return None


def describe_arena_difference(case, i, e, a, first):
    end = min(e.size, first + RUN_SCAN_BYTES_MAX)
    same = np.flatnonzero(e[first:end] == a[first:end])
    run = int(same[0]) if same.size else end - first
    shown = min(run, HEX_BYTES_MAX)
    hex_e, hex_a = (" ".join(f"{b:02x}" for b in side[first:first + shown]) for side in (e, a))
    return (f"arena {i} bytes [{first}, {first + run}) differ: "
            f"{describe_location(case, i, first, run)}; expected {hex_e}, actual {hex_a}")


def describe_location(case, arena, offset, run):
    """Where byte `offset` of an arena lies: a state's natural bytes or the page padding."""
    page = int(case.arena_specs[arena]["page_bytes"])
    block, in_page = divmod(offset, page)
    preceding = None
    for t in case.tensors:
        if t["arena"] != arena or in_page < t["offset_bytes"]:
            continue
        preceding = t
        in_block = in_page - t["offset_bytes"]
        if in_block >= t["natural_bytes"]:
            continue
        text = (f"group {t['group']} layer {t['layer']} state {t['name']}, block {block}, byte "
                f"{in_block} of its {t['natural_bytes']} natural bytes ({element_of(t, in_block)})")
        if in_block + run > t["natural_bytes"]:
            text += "; the run continues past the natural bytes"
        return text
    after = ""
    if preceding is not None:
        after = (f", after group {preceding['group']} layer {preceding['layer']} state "
                 f"{preceding['name']} which ends at byte "
                 f"{preceding['offset_bytes'] + preceding['natural_bytes']}")
    return f"page padding of block {block} (byte {in_page} of the {page}-byte page{after})"


def element_of(t, in_block):
    element = in_block // t["elem_size"]
    if t["kind"] == "temporal":
        return f"element {element}"
    if t["conv_layout"] == "SD":
        return f"token row {element // t['conv_dim']}, channel {element % t['conv_dim']}"
    return f"channel {element // t['conv_state_len']}, token {element % t['conv_state_len']}"
