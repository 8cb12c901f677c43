"""Runs one case directory on a kernels module, the way vLLM's runner calls the fused kernels.

The buffers are built exactly as the case describes (model/CASE_FORMAT.md): one byte buffer
per arena, every state a strided view into it (block stride = the page, which padding can
make larger than the natural size); one int32 [num_rows, row_stride] buffer per block table
(the stride gap included); the flattened per-(group, layer, state) metadata of REFERENCE.md 1
as int64/int32 arrays holding real device addresses; the per-request int32 arrays. Then the
kernel of the case's kind is launched with the argument list and compile-time flags of the
seed's runner (vllm/v1/worker/mamba_utils.py; README.md of this package, "Calling
convention"), and what it changed is read back.

Every buffer has guard bytes around it. A kernel that writes outside an arena, a
per-request array or a block table is reported (LaunchError) rather than silently
corrupting its neighbour: the writes a wrong copy size or index makes are findings too.
"""

import numpy as np

from . import casefile
from .devices import PAGE_BYTES

COPY_BLOCK_SIZE = 1024  # the seed runner's value
PREPROCESS_BLOCK_SIZE = 128  # requests per program of the preprocess kernel
ARENA_GUARD_LO = PAGE_BYTES
ARENA_GUARD_HI_MAX = 64 << 20
UPLOAD_CHUNK = 64 << 20
GUARD_BYTE = 0xC3
ARRAY_GUARD = 16  # int32 entries before and after every per-request array and table
ARRAY_POISON = np.int32(-0x21524111)  # 0xDEADBEEF

FAMILY_KERNELS = {  # the seed's names: a module with these attributes works unchanged
    "postprocess": "postprocess_mamba_fused_kernel",
    "postprocess_align": "postprocess_mamba_fused_kernel",
    "precopy": "precopy_mamba_align_fused_kernel",
    "preprocess_align": "preprocess_mamba_align_fused_kernel",
}
COPY_PLAN_KERNEL = "batch_memcpy"  # V1's flat copies, planned on the host
# The per-state metadata arguments after state_base_addrs: case.json's field and the dtype.
METADATA_FIELDS = (("block_stride_bytes", np.int64), ("elem_size", np.int32),
                   ("inner_size", np.int64), ("conv_width", np.int32), ("group_index", np.int32),
                   ("ds_row_count", np.int32), ("ds_row_stride_bytes", np.int64))
TABLE_ROWS = casefile.COLUMN_VALUES["table_rows"]  # the values of a module's BLOCK_TABLE_ROWS


class LaunchError(Exception):
    """The kernel under test did something a valid launch never does (it raised, or wrote
    outside its buffers). One line; the worker reports it as `error: ...`."""


class Unsupported(Exception):
    """The launch cannot be expressed (V1's flat copy plan of a DS conv state with a bias)."""


def table_rows(kernels):
    """Where the module's V2 copy kernels find a request's table row: "batch_row" (the seed,
    the default) or "slot" (vLLM #55506), from its BLOCK_TABLE_ROWS."""
    rows = getattr(kernels, "BLOCK_TABLE_ROWS", "batch_row")
    if rows not in TABLE_ROWS:
        raise LaunchError(f"the kernels module's BLOCK_TABLE_ROWS is {rows!r}, expected one of "
                          f"{TABLE_ROWS}")
    return rows


def columns_of(kind):
    """`kind` as casefile.KindColumns: given so, or a kind name this adapter knows."""
    return kind if isinstance(kind, casefile.KindColumns) else casefile.LEGACY_KIND_COLUMNS[kind]


def kernel_name(kind):
    """The attribute of a kernels module that launches `kind` (a name or its columns)."""
    columns = columns_of(kind)
    return COPY_PLAN_KERNEL if columns.work == "copy_plan" else FAMILY_KERNELS[columns.family]


def covers(kernels, kind):
    """Whether the module's kernels implement `kind` (a name or its columns): its kernel exists,
    a fused copy without idx_mapping (V1's precopy) needs a precopy kernel that takes
    HAS_IDX_MAPPING (PRECOPY_HAS_IDX_MAPPING; the seed's kernel always reads idx_mapping), and a
    fused V2 copy's table convention is the module's. V1 rows are their slots, so either
    convention reads the same row; bookkeeping and a host copy plan read no tables in kernels."""
    columns = columns_of(kind)
    if getattr(kernels, kernel_name(columns), None) is None:
        return False
    if not columns.moves_state or columns.work == "copy_plan":
        return True
    if columns.slots == "batch_row":
        has_idx_mapping = bool(getattr(kernels, "PRECOPY_HAS_IDX_MAPPING", False))
        return columns.family != "precopy" or has_idx_mapping
    return table_rows(kernels) == columns.table_rows


def supported_kinds(kernels):
    return [k for k in casefile.KINDS if covers(kernels, k)]


def round_up(n, m):
    return (n + m - 1) // m * m


class GuardedArray:
    """An int32 array on the device with ARRAY_GUARD poisoned entries on each side."""

    def __init__(self, device, values, what):
        self.device = device
        self.what = what
        self.values = np.ascontiguousarray(values, dtype=np.int32).reshape(-1)
        host = np.full(self.values.size + 2 * ARRAY_GUARD, ARRAY_POISON, dtype=np.int32)
        host[ARRAY_GUARD:ARRAY_GUARD + self.values.size] = self.values
        self.buf = device.alloc(host.nbytes)
        device.upload(self.buf, 0, host.view(np.uint8))
        self.arg = device.typed(self.buf, ARRAY_GUARD * 4, np.int32, self.values.size)
        self.address = device.address(self.buf) + ARRAY_GUARD * 4

    def read_back(self):
        """The values after the launch; LaunchError if a guard entry changed."""
        host = self.device.download(self.buf, 0, (self.values.size + 2 * ARRAY_GUARD) * 4)
        host = host.view(np.int32)
        for side, guard, first in (("before", host[:ARRAY_GUARD], -ARRAY_GUARD),
                                   ("after", host[ARRAY_GUARD + self.values.size:],
                                    self.values.size)):
            bad = np.flatnonzero(guard != ARRAY_POISON)
            if bad.size:
                raise LaunchError(f"the kernel wrote {self.what}[{first + int(bad[0])}], "
                                  f"{side} the array's {self.values.size} entries")
        return np.array(host[ARRAY_GUARD:ARRAY_GUARD + self.values.size])


class DeviceArena:
    """One arena on the device: [guard | arena bytes | guard], rounded up to whole pages."""

    def __init__(self, device, case, index):
        self.allocate(device, index, case.arena_bytes(index),
                      int(case.arena_specs[index]["page_bytes"]))
        arena = case.arena(index).reshape(-1)
        for offset, length in case.arena_regions(index):  # the rest: zeros, the file's holes
            self.upload(arena, offset, offset + length)
        self.before = device.clone(self.buf)

    def allocate(self, device, index, size, page_bytes):
        """The zeroed buffer of `size` arena bytes between guards of GUARD_BYTE."""
        self.device = device
        self.index = index
        self.size = size
        self.guard_hi = round_up(min(max(page_bytes, PAGE_BYTES), ARENA_GUARD_HI_MAX), PAGE_BYTES)
        self.total = round_up(ARENA_GUARD_LO + size + self.guard_hi, PAGE_BYTES)
        self.buf = device.alloc(self.total)
        device.fill(self.buf, 0, ARENA_GUARD_LO, GUARD_BYTE)
        device.fill(self.buf, ARENA_GUARD_LO + size, self.total, GUARD_BYTE)
        self.address = device.address(self.buf) + ARENA_GUARD_LO

    def upload(self, data, start, end):
        """Arena bytes [start, end) from data[start:end], UPLOAD_CHUNK bytes at a time."""
        for lo in range(start, end, UPLOAD_CHUNK):
            hi = min(end, lo + UPLOAD_CHUNK)
            self.device.upload(self.buf, ARENA_GUARD_LO + lo, data[lo:hi])

    def changes(self):
        """(offset, bytes) runs of the arena the launch changed, whole pages at a time;
        LaunchError if it wrote a guard byte."""
        pages = self.device.changed_pages(self.buf, self.before)
        patches = []
        for first, last in page_runs(pages):
            start, end = first * PAGE_BYTES, (last + 1) * PAGE_BYTES
            self.check_guard(start, end)
            lo, hi = max(start, ARENA_GUARD_LO), min(end, ARENA_GUARD_LO + self.size)
            if hi > lo:
                patches.append((lo - ARENA_GUARD_LO,
                                self.device.download(self.buf, lo, hi - lo).tobytes()))
        return patches

    def check_guard(self, start, end):
        for lo, hi, side in ((0, ARENA_GUARD_LO, "before"),
                             (ARENA_GUARD_LO + self.size, self.total, "past the end of")):
            lo, hi = max(lo, start), min(hi, end)
            if hi > lo:
                check_guard_bytes(self.device.download(self.buf, lo, hi - lo), side, self.index,
                                  self.size, lo - ARENA_GUARD_LO)


def check_guard_bytes(guard, side, index, size, first):
    """LaunchError if a byte of `guard`, the bytes of arena `index` from `first` on (relative
    to its start), is not GUARD_BYTE."""
    bad = np.flatnonzero(guard != GUARD_BYTE)
    if bad.size:
        raise LaunchError(f"the kernel wrote {side} arena {index} ({size} bytes): byte "
                          f"{first + int(bad[0])} relative to its start")


def page_runs(pages):
    """Runs (first, last) of consecutive page indices."""
    if len(pages) == 0:
        return []
    pages = np.sort(np.asarray(pages, dtype=np.int64))
    breaks = np.flatnonzero(np.diff(pages) != 1)
    firsts = np.concatenate(([pages[0]], pages[breaks + 1]))
    lasts = np.concatenate((pages[breaks], [pages[-1]]))
    return list(zip(firsts.tolist(), lasts.tolist()))


class Launch:
    """The device buffers of one case and the seed's launch of its kind. `arenas`, when given,
    are arenas that outlive the launch (an engine session's, engine.py): objects with `index`,
    `address` and `changes()`; else each arena is built from the case's files."""

    def __init__(self, case, device, arenas=None):
        self.case = case
        self.device = device
        self._keep = []  # device buffers the metadata views point into
        self.arenas = (arenas if arenas is not None else
                       [DeviceArena(device, case, i) for i in range(len(case.arena_specs))])
        self.tables = [GuardedArray(device, t, f"block_table_{g}")
                       for g, t in enumerate(case.tables)]
        arrays = {name: np.array(values) for name, values in case.arrays.items()}
        if case.columns.family == "postprocess" and "num_accepted" in arrays:
            # The runner initialises the output to the input before the launch.
            arrays["num_accepted_out"] = arrays["num_accepted"].copy()
        self.arrays = {name: GuardedArray(device, v, name) for name, v in arrays.items()}
        self.meta = self.metadata_args()

    def int_array(self, values, dtype):
        host = np.ascontiguousarray(values, dtype=dtype)
        buf = self.device.alloc(max(host.nbytes, 8))
        self.device.upload(buf, 0, host.view(np.uint8))
        self._keep.append(buf)
        return self.device.typed(buf, 0, dtype, host.size)

    def metadata_args(self):
        """The seed's flattened metadata, in its argument order, with device addresses."""
        m = self.case.metadata
        base = [(self.arenas[e["arena"]].address + int(e["base_addr"])) % (1 << 64) for e in m]
        return [
            self.int_array([t.address for t in self.tables], np.int64),  # block_table_ptrs
            self.case.row_stride,  # block_table_stride_req (elements)
            self.int_array(np.array(base, dtype=np.uint64).view(np.int64), np.int64),
            *(self.int_array([e[key] for e in m], dtype) for key, dtype in METADATA_FIELDS),
        ]

    def arg(self, name):
        return self.arrays[name].arg if name in self.arrays else None

    def run(self, kernels):
        """Launches the case's kind; returns (status, reason)."""
        c = self.case
        if c.num_reqs == 0:  # the seed's launchers return before launching
            return "ok", ""
        grid = (c.num_reqs, len(c.tensors))
        columns = c.columns
        kernel = getattr(kernels, kernel_name(columns), None)
        if kernel is None:
            raise LaunchError(f"the kernels module has no {kernel_name(columns)} "
                              f"(needed for {c.kind} cases)")
        if not covers(kernels, columns):
            raise LaunchError(f"the kernels module does not implement {c.kind} (its "
                              f"BLOCK_TABLE_ROWS is {table_rows(kernels)!r}, "
                              f"PRECOPY_HAS_IDX_MAPPING "
                              f"{bool(getattr(kernels, 'PRECOPY_HAS_IDX_MAPPING', False))})")
        block_size = int(c.config["mamba_block_size"])
        copy_flags = {"COPY_BLOCK_SIZE": getattr(kernels, "COPY_BLOCK_SIZE", COPY_BLOCK_SIZE),
                      "CONV_STATE_DIM_FIRST": c.config["conv_layout"] == "DS"}
        a = self.arg
        if columns.family == "postprocess":
            kernel[grid](a("num_accepted"), a("state_idx"), a("num_scheduled"),
                         a("num_computed"), a("num_draft"), *self.meta,
                         a("num_accepted_out"), None, c.num_reqs, block_size=block_size,
                         **copy_flags)
        elif columns.family == "postprocess_align":
            # The tables are the case's (gathered by batch row, or one row per slot): the
            # module's kernel reads them by its own convention.
            kernel[grid](a("num_accepted"), a("state_idx"), None, a("new_num_computed"), None,
                         *self.meta, None, a("idx_mapping"), c.num_reqs, block_size=block_size,
                         **copy_flags, HAS_IDX_MAPPING=True, PRECOMPUTED_NEW_COMPUTED=True)
        elif columns.work == "copy_plan":
            src, dst, sizes = self.flat_copy_plan()
            if sizes:
                kernel(self.int_array(src, np.int64), self.int_array(dst, np.int64),
                       self.int_array(sizes, np.int64))
        elif columns.family == "precopy" and columns.slots == "idx_mapping":
            kernel[grid](a("state_idx"), a("src_col"), a("token_bias"), *self.meta,
                         a("idx_mapping"), c.num_reqs, **copy_flags)
        elif columns.family == "precopy":
            # vLLM's V1 runner: run_fused_precopy(..., idx_mapping=None).
            kernel[grid](a("state_idx"), a("src_col"), a("token_bias"), *self.meta, None,
                         c.num_reqs, **copy_flags, HAS_IDX_MAPPING=False)
        else:
            block = getattr(kernels, "PREPROCESS_BLOCK_SIZE", PREPROCESS_BLOCK_SIZE)
            kernel[((c.num_reqs + block - 1) // block,)](
                a("idx_mapping"), a("state_idx"), a("num_computed"), a("query_start_loc"),
                a("num_accepted"), a("src_col"), a("token_bias"), c.num_reqs,
                BLOCK_SIZE=block, MAMBA_BLOCK_SIZE=block_size)
        return "ok", ""

    def flat_copy_plan(self):
        """V1's copy specs (preprocess_mamba with get_conv_copy_spec/get_temporal_copy_spec),
        planned on the host as the runner does: (src addresses, dst addresses, bytes).
        Raises Unsupported for a DS conv state with a bias, as the seed raises
        NotImplementedError."""
        c = self.case
        src_col, dst_col, bias = (c.arrays["src_col"], c.arrays["state_idx"],
                                  c.arrays["token_bias"])
        plan = ([], [], [])
        for row in range(c.num_reqs):
            src, dst, b = int(src_col[row]), int(dst_col[row]), int(bias[row])
            if src < 0 or src == dst:
                continue
            for t, (tensor, m) in enumerate(zip(c.tensors, c.metadata)):
                table = c.tables[tensor["group"]]
                base = self.arenas[m["arena"]].address + int(m["base_addr"])
                stride, elem = int(m["block_stride_bytes"]), int(m["elem_size"])
                width, inner = int(m["conv_width"]), int(m["inner_size"])
                if tensor["kind"] == "temporal":
                    src_addr = base + int(table[row, src + b]) * stride
                    nbytes = inner * elem
                elif tensor["conv_layout"] == "DS":
                    if b > 0:
                        raise Unsupported(f"{c.kind}: row {row}, tensor {t}: a DS conv state "
                                          f"with token bias {b} is not one flat copy")
                    src_addr = base + int(table[row, src]) * stride
                    nbytes = int(tensor["natural_bytes"])
                else:
                    src_addr = base + int(table[row, src]) * stride + b * inner * elem
                    nbytes = max(width - b, 0) * inner * elem
                plan[0].append(src_addr % (1 << 64))
                plan[1].append((base + int(table[row, dst]) * stride) % (1 << 64))
                plan[2].append(nbytes)
        return (np.array(plan[0], dtype=np.uint64).view(np.int64),
                np.array(plan[1], dtype=np.uint64).view(np.int64), plan[2])

    def read_back(self, status, reason):
        """The result: arrays after the launch, arena changes; guard writes raise."""
        self.device.synchronize()
        for g, table in enumerate(self.tables):
            after = table.read_back()
            changed = np.flatnonzero(after != table.values)
            if changed.size:
                row, col = divmod(int(changed[0]), self.case.row_stride)
                raise LaunchError(f"the kernel wrote block_table_{g}[{row}, {col}]")
        arrays = {name: a.read_back() for name, a in self.arrays.items()}
        patches = {a.index: a.changes() for a in self.arenas}
        return casefile.Result(status=status, reason=reason, arrays=arrays,
                               arena_patches={i: p for i, p in patches.items() if p})


def run_case(case, kernels, device, arenas=None):
    """Runs `case` (a casefile.Case, or an engine launch: engine.py) on `kernels` (an object
    with the seed's kernel names) on `device`; returns a casefile.Result. LaunchError when the
    kernel misbehaves."""
    launch = Launch(case, device, arenas)
    try:
        status, reason = launch.run(kernels)
    except Unsupported as e:
        status, reason = "unsupported", str(e)
    except LaunchError:
        raise
    except Exception as e:  # the kernel under test raised: a finding, reported in one line
        raise LaunchError(f"the kernel raised {type(e).__name__}: "
                          f"{str(e).strip().splitlines()[0] if str(e).strip() else ''}") from e
    return launch.read_back(status, reason)
