"""Engine mode of the worker: the launches of a mambacheck engine run, step after step, over
arenas that live for the whole run in shared memory (backends/external_engine.h; README.md,
"Engine protocol").

mambacheck keeps each run's arenas in one shared memory file laid out as
[guard | arena | guard] per arena (guards filled with GUARD_BYTE) and runs the synthetic
forward on them itself; the worker maps the file once when the run opens its session. Each
launch message then carries only the launch: its kind, sizes, block tables and per-request
arrays. The answer carries the arrays after the launch; the arena bytes never travel.

Two ways to hold the arenas:
- `shared` (the host device): the kernels run in place on the mapped file, so mambacheck sees
  their writes without a copy. After each launch the guards are checked.
- `device` (a GPU, or the host for tests of this path): the arenas are device buffers uploaded
  once at open. Before each launch only the pages mambacheck changed since the previous one
  (the forward's writes, found against a host shadow of what the device holds) go up; after it
  only the pages the kernel changed come down into the file (and the guards are checked on
  the device, as for a case).
"""

import json
import mmap
import os
import sys

import numpy as np

from . import casefile, forward, launch
from .devices import PAGE_BYTES, differing_pages

ARENA_MODES = ("shared", "device")


class EngineError(Exception):
    """A message this worker cannot act on (malformed, or a launch without a session)."""


def field(obj, key, what):
    if not isinstance(obj, dict) or key not in obj:
        raise EngineError(f"engine {what}: {key}: missing")
    return obj[key]


class SharedArena:
    """An arena the kernels write in place: a view of the shared file."""

    def __init__(self, file_bytes, index, offset, size, guard_lo, guard_hi):
        self.index = index
        self.size = size
        self.view = file_bytes[offset:offset + size]
        self.guards = (("before", file_bytes[offset - guard_lo:offset], -guard_lo),
                       ("past the end of", file_bytes[offset + size:offset + size + guard_hi],
                        size))
        self.address = int(self.view.ctypes.data) if size else int(file_bytes.ctypes.data)

    def prepare(self):
        pass

    def changes(self):
        """Nothing to copy (the kernel wrote the file); LaunchError if it wrote a guard byte."""
        for side, guard, first in self.guards:
            launch.check_guard_bytes(guard, side, self.index, self.size, first)
        return []


class ResidentArena(launch.DeviceArena):
    """An arena kept on the device for the run, synchronised with the shared file by pages."""

    def __init__(self, device, file_bytes, index, offset, size, page_bytes, stats):
        self.allocate(device, index, size, page_bytes)
        self.stats = stats
        self.view = file_bytes[offset:offset + size]
        self.upload(self.view, 0, size)
        stats["uploaded"] += size
        self.shadow = np.array(self.view)  # what the device holds, as of the last sync
        self.before = None

    def prepare(self):
        """Uploads the pages mambacheck changed since the last launch, then snapshots."""
        for first, last in launch.page_runs(differing_pages(self.view, self.shadow)):
            lo, hi = first * PAGE_BYTES, min(self.size, (last + 1) * PAGE_BYTES)
            self.upload(self.view, lo, hi)
            self.shadow[lo:hi] = self.view[lo:hi]
            self.stats["uploaded"] += hi - lo
        self.before = self.device.clone(self.buf)

    def changes(self):
        """Downloads the pages the kernel changed into the file; [] (nothing left to copy)."""
        for offset, data in super().changes():
            chunk = np.frombuffer(data, dtype=np.uint8)
            self.view[offset:offset + chunk.size] = chunk
            self.shadow[offset:offset + chunk.size] = chunk
            self.stats["downloaded"] += chunk.size
        self.before = None
        return []


class LaunchCase:
    """One engine launch in the terms launch.Launch reads from a casefile.Case."""

    def __init__(self, session, message):
        self.kind = field(message, "kind", "launch")
        try:  # the message's columns, or the legacy table's for a message that names the kind only
            self.columns = casefile.kind_columns(message, "engine launch", "")
        except casefile.CaseError as e:
            raise EngineError(str(e)) from None
        for key in ("num_reqs", "num_slots", "num_rows", "row_width", "row_stride"):
            setattr(self, key, int(field(message, key, "launch")))
        tables = field(message, "tables", "launch")
        if not isinstance(tables, list) or len(tables) != len(session.groups):
            raise EngineError(f"engine launch: tables: expected {len(session.groups)} lists")
        self.tables = [np.asarray(t, dtype=np.int32).reshape(self.num_rows, self.row_stride)
                       for t in tables]
        self.arrays = {}
        for name, values in field(message, "arrays", "launch").items():
            if name not in casefile.ARRAY_ORDER:
                raise EngineError(f"engine launch: arrays: unknown array {name!r}")
            self.arrays[name] = np.asarray(values, dtype=np.int32)
        if self.num_reqs > 0:
            for name in self.columns.inputs:
                if name not in self.arrays:
                    raise EngineError(f"engine launch: {self.kind} needs {name}")
        for key in ("config", "tensors", "metadata", "arena_specs"):  # the session's geometry
            setattr(self, key, getattr(session, key))


class Session:
    """One engine run: the shared file mapped, its arenas, the layout's geometry."""

    def __init__(self, message, device, arena_mode):
        case = field(message, "case", "open")
        self.config = field(case, "config", "open case")
        layout = field(case, "layout", "open case")
        self.tensors = field(layout, "tensors", "open case.layout")
        self.arena_specs = field(layout, "arenas", "open case.layout")
        self.groups = field(layout, "groups", "open case.layout")
        self.metadata = field(case, "metadata", "open case")
        regions = field(message, "arenas", "open")
        if len(regions) != len(self.arena_specs):
            raise EngineError(f"engine open: {len(regions)} arena regions for "
                              f"{len(self.arena_specs)} arenas")
        file_bytes = int(field(message, "file_bytes", "open"))
        path = field(message, "shm", "open")
        fd = os.open(path, os.O_RDWR)
        try:
            self.map = mmap.mmap(fd, file_bytes, mmap.MAP_SHARED,
                                 mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        self.bytes = np.frombuffer(self.map, dtype=np.uint8)
        self.stats = {"launches": 0, "uploaded": 0, "downloaded": 0}
        self.arenas = []
        for i, (r, spec) in enumerate(zip(regions, self.arena_specs)):
            offset, size = int(r["offset"]), int(r["size"])
            if arena_mode == "shared":
                self.arenas.append(SharedArena(self.bytes, i, offset, size, int(r["guard_lo"]),
                                               int(r["guard_hi"])))
            else:
                self.arenas.append(ResidentArena(device, self.bytes, i, offset, size,
                                                 int(spec["page_bytes"]), self.stats))

    def run(self, message, kernels, device, run_case):
        case = LaunchCase(self, message)
        for a in self.arenas:
            a.prepare()
        self.stats["launches"] += 1
        result = run_case(case, kernels, device, self.arenas)
        return {"status": result.status, "reason": result.reason,
                "arrays": {name: np.asarray(v).astype(int).tolist()
                           for name, v in result.arrays.items()}}

    def close(self):
        self.arenas = []
        self.bytes = None
        try:
            self.map.close()
        except BufferError:  # a view still exported: the mapping goes with the process
            pass


class Engine:
    """The worker's engine state: at most one open session."""

    def __init__(self, kernels, device, arena_mode, run_case):
        self.kernels = kernels
        self.device = device
        self.arena_mode = arena_mode
        self.run_case = run_case
        self.session = None

    def answer(self, text):
        """The answer line to one `engine JSON` message; raises launch.LaunchError (error:),
        EngineError (error:), or OSError (fatal: the shared file cannot be mapped)."""
        try:
            message = json.loads(text)
        except ValueError as e:
            raise EngineError(f"engine: not JSON: {e}") from None
        op = field(message, "op", "message")
        if op == "open":
            self.close()
            self.session = Session(message, self.device, self.arena_mode)
            return "ok"
        if op == "close":
            self.close()
            return "ok"
        if op == "forward":
            try:
                return json.dumps(forward.answer(message, self.kernels, self.device),
                                  separators=(",", ":"))
            except forward.ForwardError as e:
                raise EngineError(str(e)) from None
        if op == "launch":
            if self.session is None:
                raise EngineError("engine launch: no session open")
            return json.dumps(self.session.run(message, self.kernels, self.device,
                                               self.run_case), separators=(",", ":"))
        raise EngineError(f"engine: unknown op {op!r}")

    def close(self):
        if self.session is not None:
            s = self.session.stats
            if self.arena_mode == "device":
                print(f"engine session: {s['launches']} launches, {s['uploaded']} bytes "
                      f"uploaded, {s['downloaded']} bytes downloaded", file=sys.stderr)
            self.session.close()
            self.session = None
