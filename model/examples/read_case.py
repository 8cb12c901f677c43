#!/usr/bin/env python3
"""Print a summary of a mambacheck case directory and check that it is self-consistent.

Usage: read_case.py CASE_DIR

Needs python3 and numpy only. The format is model/CASE_FORMAT.md; this script is its worked
example made runnable: it loads a case, views state tensors as strided numpy arrays over the
arena bytes, reads the block tables and, when the case has an expected result, reproduces
its copy decisions by hand (every decision of a precopy case, from the inputs) and checks
that the expected arenas are the case arenas with exactly those copies applied.

Exit status: 0 consistent, 1 an inconsistency was found (each printed), 2 bad usage or a
directory that cannot be read.
"""

import json
import pathlib
import sys

import numpy as np

FORMAT_VERSION = 1
# The inputs each kind reads (model/LAUNCH_KINDS.md), for a case.json written before it carried
# them as launch.inputs.
REQUIRED_ARRAYS = {
    "postprocess": ["num_accepted", "state_idx", "num_scheduled", "num_computed", "num_draft"],
    "postprocess_align": ["idx_mapping", "num_accepted", "state_idx", "new_num_computed"],
    "precopy": ["idx_mapping", "state_idx", "src_col", "token_bias"],
    "preprocess_align": ["idx_mapping", "state_idx", "num_computed", "num_accepted",
                         "query_start_loc", "src_col", "token_bias"],
    "batch_copy": ["src_col", "state_idx", "token_bias"],
}
FULL_CHECK_BYTES_MAX = 256 << 20  # arenas copied in memory to replay every decision


class Case:
    """A case directory, or its expected/ result directory, as numpy arrays."""

    def __init__(self, case_dir, meta, tables, arrays, arenas):
        self.dir = case_dir
        self.meta = meta
        self.tables = tables  # one int32 [num_rows, row_stride] per group
        self.arrays = arrays  # name -> int32 vector
        self.arenas = arenas  # uint8 [num_blocks, page_bytes], memory-mapped

    @property
    def tensors(self):
        return self.meta["layout"]["tensors"]


def load_arrays(directory, names):
    return {name: np.load(directory / f"{name}.npy") for name in names}


def load_arenas(directory, count):
    return [np.load(directory / f"arena_{i}.npy", mmap_mode="r") for i in range(count)]


def load_case(case_dir):
    meta = json.loads((case_dir / "case.json").read_text())
    if meta["format"] != "mambacheck-case" or meta["version"] > FORMAT_VERSION:
        raise ValueError(f"{case_dir}/case.json: format {meta['format']!r} "
                         f"version {meta['version']} is not one this script reads")
    groups = meta["layout"]["groups"]
    tables = [np.load(case_dir / f"block_table_{g}.npy") for g in range(len(groups))]
    arrays = load_arrays(case_dir, meta["launch"]["arrays"])
    arenas = load_arenas(case_dir, len(meta["layout"]["arenas"]))
    return Case(case_dir, meta, tables, arrays, arenas)


def load_result(case):
    rdir = case.dir / "expected"
    if not (rdir / "result.json").exists():
        return None
    meta = json.loads((rdir / "result.json").read_text())
    arrays = load_arrays(rdir, meta["arrays"])
    arenas = load_arenas(rdir, len(case.arenas))
    return Case(rdir, meta, case.tables, arrays, arenas)


def state_view(arena, tensor):
    """Every block of one state tensor: [num_blocks, *dims], a view of the arena bytes.

    Elements are unsigned integers of the state's element size: case files keep bytes, not
    float types (fp16 and bf16 are both 2 bytes), and equality is byte equality.
    """
    elem = tensor["elem_size"]
    dims = tensor["dims"]
    inner_strides = [elem * int(np.prod(dims[i + 1:], dtype=np.int64)) for i in range(len(dims))]
    return np.ndarray(shape=(arena.shape[0], *dims), dtype=np.dtype(f"<u{elem}"), buffer=arena,
                      offset=tensor["offset_bytes"],
                      strides=(tensor["block_stride_bytes"], *inner_strides))


def copy_of(case, tensor_index, row, src_col, dst_col, bias):
    """The decision fields of one state copy (LAUNCH_KINDS.md, "The copy of one state")."""
    t = case.tensors[tensor_index]
    bt = case.tables[t["group"]]
    elem, dim, width = t["elem_size"], t["conv_dim"], t["conv_state_len"]
    kept = max(width - bias, 0)
    if t["kind"] == "temporal":  # the bias selects a column, not an offset
        src_block, offset, nbytes = bt[row, src_col + bias], 0, t["natural_bytes"]
    elif t["conv_layout"] == "SD":  # whole token rows
        src_block, offset, nbytes = bt[row, src_col], bias * dim * elem, kept * dim * elem
    else:  # DS: the tail of every dim row
        src_block, offset, nbytes = bt[row, src_col], bias * elem, dim * kept * elem
    return {"tensor": tensor_index, "group": t["group"], "layer": t["layer"],
            "state": t["state"], "src_col": src_col, "dst_col": dst_col, "token_bias": bias,
            "src_block_id": int(src_block), "dst_block_id": int(bt[row, dst_col]),
            "src_byte_offset": offset, "bytes": nbytes}


def precopy_decisions(case):
    """Every decision of a precopy launch, from its inputs (LAUNCH_KINDS.md, "precopy")."""
    a = case.arrays
    out = []
    for row in range(case.meta["launch"]["num_reqs"]):
        slot = int(a["idx_mapping"][row])
        if slot < 0:
            continue
        src, dst, bias = int(a["src_col"][slot]), int(a["state_idx"][slot]), int(a["token_bias"][slot])
        if src < 0 or src == dst:
            continue
        for t in range(len(case.tensors)):
            out.append({"batch_row": row, "slot": slot, **copy_of(case, t, row, src, dst, bias)})
    return out


def apply_copy(before, after, tensor, d):
    """Applies decision `d` to the state views: `after` from `before` (LAUNCH_KINDS.md)."""
    src, dst, bias = d["src_block_id"], d["dst_block_id"], d["token_bias"]
    if tensor["kind"] == "temporal":
        after[dst] = before[src]
        return
    kept = max(tensor["conv_state_len"] - bias, 0)
    if tensor["conv_layout"] == "SD":  # (state_len, dim)
        after[dst][:kept] = before[src][bias:bias + kept]
    else:  # (dim, state_len)
        after[dst][:, :kept] = before[src][:, bias:bias + kept]


class Checker:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def expect(self, ok, what):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            print(f"INCONSISTENT: {what}")


def array_length(name, launch):
    if name == "idx_mapping":
        return launch["num_reqs"]
    if name == "query_start_loc":
        return launch["num_reqs"] + 1
    return launch["num_slots"]


def check_layout(case, check):
    """The derived tensors fit their arenas and agree with the flattened metadata."""
    arenas = case.meta["layout"]["arenas"]
    for i, (t, m) in enumerate(zip(case.tensors, case.meta["metadata"])):
        page = arenas[t["arena"]]["page_bytes"]
        natural = int(np.prod(t["dims"], dtype=np.int64)) * t["elem_size"]
        check.expect(t["natural_bytes"] == natural, f"tensor {i}: natural_bytes")
        check.expect(t["block_stride_bytes"] == page, f"tensor {i}: block stride != page")
        check.expect(t["offset_bytes"] + natural <= page, f"tensor {i}: past its page")
        check.expect(m["base_addr"] == t["offset_bytes"] and m["arena"] == t["arena"],
                     f"metadata {i}: base_addr")
        if t["kind"] == "temporal":
            shape = (m["inner_size"], m["conv_width"], m["ds_row_count"])
            check.expect(shape == (natural // t["elem_size"], 0, 0), f"metadata {i}: temporal")
        elif t["conv_layout"] == "SD":
            shape = (m["inner_size"], m["conv_width"])
            check.expect(shape == (t["conv_dim"], t["conv_state_len"]), f"metadata {i}: SD")
        else:
            shape = (m["inner_size"], m["conv_width"], m["ds_row_count"], m["ds_row_stride_bytes"])
            want = (1, t["conv_state_len"], t["conv_dim"], t["conv_state_len"] * t["elem_size"])
            check.expect(shape == want, f"metadata {i}: DS")
        state_view(case.arenas[t["arena"]], t)  # raises if the view leaves the arena
    spans = sorted((t["arena"], t["offset_bytes"], t["natural_bytes"]) for t in case.tensors)
    for (a0, off0, n0), (a1, off1, _) in zip(spans, spans[1:]):
        check.expect(a0 != a1 or off0 + n0 <= off1, f"arena {a0}: states overlap at {off1}")


def check_files(case, result, check):
    launch = case.meta["launch"]
    geometry = launch["block_table"]
    for g, table in enumerate(case.tables):
        check.expect(table.dtype == np.int32 and table.shape == (geometry["num_rows"],
                                                                 geometry["row_stride"]),
                     f"block_table_{g}.npy: {table.dtype} {table.shape}")
    check.expect(geometry["num_rows"] >= launch["num_reqs"], "fewer table rows than batch rows")
    if launch["num_reqs"] > 0:
        for name in launch.get("inputs", REQUIRED_ARRAYS.get(launch["kind"], [])):
            check.expect(name in case.arrays, f"{launch['kind']} needs {name}")
    for where in [case] + ([result] if result else []):
        for name, values in where.arrays.items():
            check.expect(values.dtype == np.int32 and values.shape == (array_length(name, launch),),
                         f"{where.dir.name}/{name}.npy: {values.dtype} {values.shape}")
        for i, (arena, spec) in enumerate(zip(where.arenas, case.meta["layout"]["arenas"])):
            check.expect(arena.dtype == np.uint8 and arena.shape == (spec["num_blocks"],
                                                                     spec["page_bytes"]),
                         f"{where.dir.name}/arena_{i}.npy: {arena.dtype} {arena.shape}")


def check_result(case, result, check):
    """Decisions agree with the block tables, and the expected arenas are the case arenas
    with exactly the decided copies applied (copies of one launch never overlap)."""
    decisions = result.meta["decisions"]
    launch = case.meta["launch"]
    if launch["kind"] == "precopy":
        check.expect(decisions == precopy_decisions(case), "precopy decisions differ from the "
                     "ones computed from the inputs")
    for d in decisions:
        want = copy_of(case, d["tensor"], d["batch_row"], d["src_col"], d["dst_col"],
                       d["token_bias"])
        got = {k: d[k] for k in want}
        check.expect(got == want, f"decision {d} does not follow from the block table: {want}")
    total = sum(a.nbytes for a in case.arenas)
    if total > FULL_CHECK_BYTES_MAX:
        print(f"arenas of {total} bytes: the replay of every decision is skipped")
        return
    replayed = [np.array(a) for a in case.arenas]
    for d in decisions:
        t = case.tensors[d["tensor"]]
        apply_copy(state_view(case.arenas[t["arena"]], t), state_view(replayed[t["arena"]], t),
                   t, d)
    for i, (want, got) in enumerate(zip(replayed, result.arenas)):
        diff = np.flatnonzero(want.reshape(-1) != got.reshape(-1))
        check.expect(diff.size == 0, f"expected/arena_{i}.npy differs from the case arena with "
                     f"the decided copies applied at {diff.size} bytes, first at byte "
                     f"{diff[0] if diff.size else -1}")


def summary(case, result):
    c, launch = case.meta["config"], case.meta["launch"]
    geometry = launch["block_table"]
    print(f"{case.dir}: {launch['kind']}, {launch['num_reqs']} batch rows, "
          f"{launch['num_slots']} slots")
    print(f"  config: B={c['mamba_block_size']} spec={c['num_spec_tokens']} mode={c['mode']} "
          f"conv={c['conv_layout']} runner={c['runner']} tp={c['tp_size']}")
    for g, group in enumerate(case.meta["layout"]["groups"]):
        print(f"  group {g} {group['name']}: {group['family']} x {group['num_layers']} layers, "
              f"{group['page_policy']} pages; block table {case.tables[g].shape} "
              f"(width {geometry['row_width']})")
    size = sum(a.nbytes for a in case.arenas)
    print(f"  {len(case.tensors)} state tensors in {len(case.arenas)} arenas, {size} bytes")
    for i, t in enumerate(case.tensors):
        print(f"    t{i} g{t['group']} L{t['layer']} {t['name']:<9} {t['kind']:<8} "
              f"{tuple(t['dims'])} x{t['elem_size']}B arena {t['arena']} +{t['offset_bytes']} "
              f"stride {t['block_stride_bytes']}")
    for name, values in case.arrays.items():
        print(f"  {name} = {values.tolist()}")
    if result is None:
        print("  no expected result")
        return
    r = result.meta
    reason = f" ({r['unsupported_reason']})" if r["status"] != "ok" else ""
    print(f"  expected: {r['status']}{reason}, {len(r['decisions'])} decisions")
    for d in r["decisions"]:
        print(f"    row {d['batch_row']} slot {d['slot']} t{d['tensor']}: col {d['src_col']} -> "
              f"{d['dst_col']} bias {d['token_bias']}, block {d['src_block_id']} -> "
              f"{d['dst_block_id']}, +{d['src_byte_offset']}, {d['bytes']} bytes")


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    case_dir = pathlib.Path(argv[1])
    try:
        case = load_case(case_dir)
        result = load_result(case)
    except (OSError, ValueError, KeyError) as e:
        print(f"read_case.py: {e}", file=sys.stderr)
        return 2
    summary(case, result)
    check = Checker()
    check_files(case, result, check)
    check_layout(case, check)
    if result is not None:
        try:
            check_result(case, result, check)
        except IndexError as e:  # a column or block outside the table or arena
            check.expect(False, f"a decision indexes outside its table or arena: {e}")
    print(f"checks: {check.passed} passed, {check.failed} failed")
    return 1 if check.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
