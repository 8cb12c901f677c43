"""Case directories and result directories (model/CASE_FORMAT.md), with numpy only.

A case directory is `case.json`, one int32 block table per mamba group, the per-request int32
arrays its launch kind reads and one uint8 arena per page geometry. A result directory is what
`mambacheck case DIR --out OUT` writes and `model::load_result` reads: `case.json` (a copy of
the case's) and `expected/` (result.json, the arrays and the arenas after the launch).

Arenas can be many GiB and mostly holes (sparse files): they are never read whole. Readers
get memory maps; the bytes that hold data are found with SEEK_DATA/SEEK_HOLE; a result arena
is written as a sparse copy of the case's arena file plus the byte ranges the launch changed.
"""

import collections
import json
import os
import pathlib
import shutil

import numpy as np

FORMAT_VERSION = 1
CASE_FORMAT = "mambacheck-case"
RESULT_FORMAT = "mambacheck-result"
RESULT_DIR = "expected"
# Every per-request array, in the order the C++ side (model/case_file.cpp) lists them.
ARRAY_ORDER = ("idx_mapping", "num_accepted", "state_idx", "num_scheduled", "num_computed",
               "num_draft", "new_num_computed", "query_start_loc", "src_col", "token_bias",
               "num_accepted_out")

# A launch kind's columns (model/launch_kinds.h), as case.json carries them next to launch.kind
# (CASE_FORMAT.md, "launch"): the decision it makes (family), when the runner launches it
# (phase), where a batch row finds its slot and its block-table row, whether it copies state,
# its unit of work and the arrays it must be given. Everything the adapter does with a kind it
# reads from these, never from the kind's name.
KindColumns = collections.namedtuple(
    "KindColumns", "family phase slots table_rows moves_state work inputs")
COLUMN_VALUES = {
    "family": ("postprocess", "postprocess_align", "precopy", "preprocess_align"),
    "phase": ("pre_step", "post_step"),
    "slots": ("batch_row", "idx_mapping"),
    "table_rows": ("batch_row", "slot"),
    "work": ("batch_rows", "copy_plan"),
}


def _columns(family, phase, slots, table_rows, work, inputs):
    return KindColumns(family, phase, slots, table_rows, family != "preprocess_align", work,
                       inputs)


_SAVE_V2 = ("idx_mapping", "num_accepted", "state_idx", "new_num_computed")
_PRECOPY_V2 = ("idx_mapping", "state_idx", "src_col", "token_bias")
_PRECOPY_V1 = ("state_idx", "src_col", "token_bias")
# The kinds of case files written before case.json carried the columns, and their columns: read
# only for such a case (or an engine launch message, which names the kind alone).
LEGACY_KIND_COLUMNS = {
    "postprocess": _columns("postprocess", "post_step", "batch_row", "batch_row", "batch_rows",
                            ("num_accepted", "state_idx", "num_scheduled", "num_computed",
                             "num_draft")),
    "postprocess_align": _columns("postprocess_align", "post_step", "idx_mapping", "batch_row",
                                  "batch_rows", _SAVE_V2),
    "precopy": _columns("precopy", "pre_step", "idx_mapping", "batch_row", "batch_rows",
                        _PRECOPY_V2),
    "preprocess_align": _columns("preprocess_align", "pre_step", "idx_mapping", "batch_row",
                                 "batch_rows", ("idx_mapping", "num_accepted", "state_idx",
                                                "num_computed", "query_start_loc", "src_col",
                                                "token_bias")),
    "batch_copy": _columns("precopy", "pre_step", "batch_row", "batch_row", "copy_plan",
                           _PRECOPY_V1),
    "precopy_v1": _columns("precopy", "pre_step", "batch_row", "batch_row", "batch_rows",
                           _PRECOPY_V1),
    "postprocess_align_slot_tables": _columns("postprocess_align", "post_step", "idx_mapping",
                                              "slot", "batch_rows", _SAVE_V2),
    "precopy_slot_tables": _columns("precopy", "pre_step", "idx_mapping", "slot", "batch_rows",
                                    _PRECOPY_V2),
}
# The kinds this adapter knows by name (what a worker can announce before any case arrives).
KINDS = tuple(LEGACY_KIND_COLUMNS)
DECISION_FIELDS = ("batch_row", "slot", "tensor", "group", "layer", "state", "src_col",
                   "dst_col", "token_bias", "src_block_id", "dst_block_id", "src_byte_offset",
                   "bytes")
JSON_BYTES_MAX = 256 << 20
ZERO_CHUNK = 64 << 10  # runs of zeros this long become holes (as the C++ writer does)
COPY_CHUNK = 16 << 20


class CaseError(Exception):
    """A case or result directory that cannot be read: one line naming the file and field."""


def array_length(name, num_reqs, num_slots):
    return {"idx_mapping": num_reqs, "query_start_loc": num_reqs + 1}.get(name, num_slots)


def read_json(path):
    try:
        size = path.stat().st_size
        if size > JSON_BYTES_MAX:
            raise CaseError(f"{path}: {size} bytes of JSON, more than {JSON_BYTES_MAX}")
        return json.loads(path.read_text())
    except OSError as e:
        raise CaseError(f"{path}: cannot read: {e.strerror or e}") from None
    except ValueError as e:
        raise CaseError(f"{path}: not JSON: {e}") from None


def npy_header(path):
    """(shape, dtype, data offset in bytes) of a .npy file, checked against its size."""
    try:
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
            elif version in ((2, 0), (3, 0)):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
            else:
                raise CaseError(f"{path}: .npy version {version} is not one this reader knows")
            offset = f.tell()
            size = os.fstat(f.fileno()).st_size
    except OSError as e:
        raise CaseError(f"{path}: cannot read: {e.strerror or e}") from None
    except ValueError as e:
        raise CaseError(f"{path}: not a .npy file: {e}") from None
    if fortran:
        raise CaseError(f"{path}: fortran_order True, expected C order")
    want = offset + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if size != want:
        raise CaseError(f"{path}: {size} bytes, the header declares {want}")
    return tuple(int(n) for n in shape), dtype, offset


def load_npy(path, dtype, shape, mmap=False):
    got_shape, got_dtype, _ = npy_header(path)
    if got_dtype != np.dtype(dtype):
        raise CaseError(f"{path}: dtype {got_dtype.str!r}, expected {np.dtype(dtype).str!r}")
    if got_shape != tuple(shape):
        raise CaseError(f"{path}: shape {got_shape}, expected {tuple(shape)}")
    return np.load(path, mmap_mode="r" if mmap else None)


def field(obj, key, path, where):
    if not isinstance(obj, dict) or key not in obj:
        raise CaseError(f"{path}: {where}{key}: missing")
    return obj[key]


def kind_columns(launch, path, where):
    """The columns of the kind `launch` (a case's launch object or an engine launch message)
    names: carried with it when it has a family, else the legacy table's; CaseError naming
    `where` when it has neither or a value is not one the format knows."""
    kind = field(launch, "kind", path, where)
    if "family" not in launch:
        if kind not in LEGACY_KIND_COLUMNS:
            raise CaseError(f"{path}: {where}kind: {kind!r} is not one of {KINDS} and "
                            f"{where}family is missing")
        return LEGACY_KIND_COLUMNS[kind]
    values = {}
    for name, allowed in COLUMN_VALUES.items():
        value = field(launch, name, path, where)
        if value not in allowed:
            raise CaseError(f"{path}: {where}{name}: {value!r} is not one of {allowed}")
        values[name] = value
    moves_state = field(launch, "moves_state", path, where)
    inputs = field(launch, "inputs", path, where)
    if not isinstance(moves_state, bool):
        raise CaseError(f"{path}: {where}moves_state: expected true or false")
    if not isinstance(inputs, list) or any(name not in ARRAY_ORDER for name in inputs):
        raise CaseError(f"{path}: {where}inputs: expected a list of array names")
    return KindColumns(moves_state=moves_state, inputs=tuple(inputs), **values)


class Case:
    """One launch case: its case.json, block tables, arrays and memory-mapped arenas."""

    def __init__(self, case_dir):
        self.dir = pathlib.Path(case_dir)
        path = self.dir / "case.json"
        meta = read_json(path)
        if field(meta, "format", path, "") != CASE_FORMAT:
            raise CaseError(f"{path}: format: expected {CASE_FORMAT!r}, got {meta['format']!r}")
        if field(meta, "version", path, "") > FORMAT_VERSION:
            raise CaseError(f"{path}: version {meta['version']}: this adapter reads version "
                            f"{FORMAT_VERSION}; use a newer mambacheck_adapter")
        self.meta = meta
        self.config = field(meta, "config", path, "")
        layout = field(meta, "layout", path, "")
        self.tensors = field(layout, "tensors", path, "layout.")
        self.arena_specs = field(layout, "arenas", path, "layout.")
        self.groups = field(layout, "groups", path, "layout.")
        self.metadata = field(meta, "metadata", path, "")
        launch = field(meta, "launch", path, "")
        self.kind = field(launch, "kind", path, "launch.")
        self.columns = kind_columns(launch, path, "launch.")
        self.num_reqs = int(field(launch, "num_reqs", path, "launch."))
        self.num_slots = int(field(launch, "num_slots", path, "launch."))
        geometry = field(launch, "block_table", path, "launch.")
        for key in ("num_rows", "row_width", "row_stride"):
            setattr(self, key, int(field(geometry, key, path, "launch.block_table.")))
        names = field(launch, "arrays", path, "launch.")
        for name in names:
            if name not in ARRAY_ORDER:
                raise CaseError(f"{path}: launch.arrays: unknown array {name!r}")
        if len(self.metadata) != len(self.tensors):
            raise CaseError(f"{path}: metadata: {len(self.metadata)} entries for "
                            f"{len(self.tensors)} tensors")
        self.tables = [load_npy(self.dir / f"block_table_{g}.npy", "<i4",
                                (self.num_rows, self.row_stride))
                       for g in range(len(self.groups))]
        self.arrays = {name: load_npy(self.dir / f"{name}.npy", "<i4",
                                      (array_length(name, self.num_reqs, self.num_slots),))
                       for name in names}
        if self.num_reqs > 0:
            for name in self.columns.inputs:
                if name not in self.arrays:
                    raise CaseError(f"{path}: launch.arrays: {self.kind} needs {name}")
        self.arena_files = [self.dir / f"arena_{i}.npy" for i in range(len(self.arena_specs))]
        self.arena_offsets = []
        for i, (spec, file) in enumerate(zip(self.arena_specs, self.arena_files)):
            shape, dtype, offset = npy_header(file)
            want = (int(spec["num_blocks"]), int(spec["page_bytes"]))
            if dtype != np.dtype("|u1") or shape != want:
                raise CaseError(f"{file}: {dtype.str} {shape}, expected |u1 {want}")
            self.arena_offsets.append(offset)

    def arena_bytes(self, i):
        spec = self.arena_specs[i]
        return int(spec["num_blocks"]) * int(spec["page_bytes"])

    def arena(self, i):
        """Arena i as a read-only memory map of [num_blocks, page_bytes] bytes."""
        return np.load(self.arena_files[i], mmap_mode="r")

    def arena_regions(self, i):
        """(offset, length) of the arena's bytes that may be non-zero (the rest are holes)."""
        offset = self.arena_offsets[i]
        for start, length in data_regions(self.arena_files[i], offset, offset + self.arena_bytes(i)):
            yield start - offset, length


def data_regions(path, start, end):
    """The (offset, length) runs of `path` within [start, end) that hold data, not holes.

    Uses SEEK_DATA/SEEK_HOLE; where the file system cannot say, the whole range is data.
    """
    if end <= start:
        return []
    regions = []
    fd = os.open(path, os.O_RDONLY)
    try:
        pos = start
        while pos < end:
            try:
                data = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError as e:
                if e.errno == 6:  # ENXIO: no data after pos
                    break
                return [(start, end - start)]
            if data >= end:
                break
            hole = min(os.lseek(fd, data, os.SEEK_HOLE), end)
            regions.append((data, hole - data))
            pos = hole
    except AttributeError:  # no SEEK_DATA on this platform
        return [(start, end - start)]
    finally:
        os.close(fd)
    return regions


def copy_sparse(src, dst, patches=()):
    """Copies file `src` to `dst` keeping holes (runs of ZERO_CHUNK zero bytes become holes),
    then writes each (file offset, bytes) of `patches` over it."""
    size = os.path.getsize(src)
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        fout.truncate(size)
        for start, length in data_regions(src, 0, size):
            fin.seek(start)
            pos, end = start, start + length
            while pos < end:
                chunk = fin.read(min(COPY_CHUNK, end - pos))
                if not chunk:
                    raise CaseError(f"{src}: changed while being copied")
                write_skipping_zeros(fout, pos, chunk)
                pos += len(chunk)
        for offset, data in patches:
            fout.seek(offset)
            fout.write(data)


def write_skipping_zeros(f, pos, chunk):
    view = np.frombuffer(chunk, dtype=np.uint8)
    for i in range(0, len(view), ZERO_CHUNK):
        piece = view[i:i + ZERO_CHUNK]
        if piece.any():
            f.seek(pos + i)
            f.write(piece.tobytes())


def write_npy(path, array):
    """An int32 vector as a format 1.0 .npy file (what np.save writes)."""
    np.save(path, np.ascontiguousarray(array, dtype="<i4"), allow_pickle=False)


class Result:
    """What a launch did: status, arrays after it, decisions (if the kernel records them),
    and for each arena the (offset, bytes) ranges that now differ from the case's arena."""

    def __init__(self, status="ok", reason="", arrays=None, decisions=None, arena_patches=None):
        self.status = status
        self.reason = reason
        self.arrays = arrays or {}
        self.decisions = decisions  # None: the kernel under test does not record them
        self.arena_patches = arena_patches or {}  # arena index -> [(offset, bytes)]


def write_result(case, result, out_dir):
    """Writes `out_dir/case.json` and `out_dir/expected/` in the format model::load_result
    reads. result.json is written last, so a directory cut short does not load."""
    out_dir = pathlib.Path(out_dir)
    rdir = out_dir / RESULT_DIR
    if rdir.exists():
        shutil.rmtree(rdir)
    rdir.mkdir(parents=True)
    if (out_dir / "case.json").resolve() != (case.dir / "case.json").resolve():
        shutil.copyfile(case.dir / "case.json", out_dir / "case.json")
    names = []
    for name in ARRAY_ORDER:
        values = result.arrays.get(name)
        if values is None or len(values) == 0:
            continue
        want = array_length(name, case.num_reqs, case.num_slots)
        if len(values) != want:
            raise ValueError(f"result array {name} has {len(values)} entries, the case needs {want}")
        write_npy(rdir / f"{name}.npy", values)
        names.append(name)
    for i, file in enumerate(case.arena_files):
        offset = case.arena_offsets[i]
        patches = [(offset + pos, data) for pos, data in result.arena_patches.get(i, ())]
        copy_sparse(file, rdir / f"arena_{i}.npy", patches)
    doc = {"format": RESULT_FORMAT, "version": FORMAT_VERSION, "status": result.status,
           "unsupported_reason": result.reason, "arrays": names,
           "decisions": result.decisions or [],
           # Not part of the C++ reader's fields (ignored there); the external backend reads
           # it: a kernel that records no decisions is judged on its arrays and bytes.
           "decisions_recorded": result.decisions is not None}
    (rdir / "result.json").write_text(json.dumps(doc, indent=1) + "\n")
    return out_dir


class StoredResult:
    """An `expected/` directory (the oracle's result, or a backend's) as numpy arrays."""

    def __init__(self, case, result_root):
        self.dir = pathlib.Path(result_root) / RESULT_DIR
        path = self.dir / "result.json"
        meta = read_json(path)
        if field(meta, "format", path, "") != RESULT_FORMAT:
            raise CaseError(f"{path}: format: expected {RESULT_FORMAT!r}, got {meta['format']!r}")
        self.status = field(meta, "status", path, "")
        self.reason = field(meta, "unsupported_reason", path, "")
        self.decisions = field(meta, "decisions", path, "")
        self.decisions_recorded = meta.get("decisions_recorded", True)
        self.arrays = {}
        for name in field(meta, "arrays", path, ""):
            if name not in ARRAY_ORDER:
                raise CaseError(f"{path}: arrays: unknown array {name!r}")
            self.arrays[name] = load_npy(self.dir / f"{name}.npy", "<i4",
                                         (array_length(name, case.num_reqs, case.num_slots),))
        self.arena_files = [self.dir / f"arena_{i}.npy" for i in range(len(case.arena_specs))]
        for i, file in enumerate(self.arena_files):
            load_npy(file, "|u1", (int(case.arena_specs[i]["num_blocks"]),
                                   int(case.arena_specs[i]["page_bytes"])), mmap=True)

    def arena(self, i):
        return np.load(self.arena_files[i], mmap_mode="r")


def has_result(directory):
    return (pathlib.Path(directory) / RESULT_DIR / "result.json").is_file()
