"""Where a launch's buffers live: the GPU through torch, or host memory through numpy.

Both give the adapter flat byte buffers with real addresses (the kernels under test read
state and block-table addresses out of int64 metadata arrays, REFERENCE.md 1), typed views of
them to pass as kernel arguments, and the two operations that keep big arenas cheap: upload
of the byte ranges a case file holds, and the list of pages where two buffers differ (so only
what a launch changed is read back).

`HostDevice` needs numpy only: kernels written for it (mambacheck_adapter.reference) run on
the CPU at the same addresses-in-metadata convention, which is how CI tests the adapter
without a GPU. `TorchDevice` imports torch when it is created.

`HostDevice` times launches with the wall clock. With MC_HOST_CLOCK=virtual in the environment
it reads HOST_CLOCK instead, a count of microseconds that the host reference kernels advance by
a fixed cost per program they run (and by their deliberate delays, which then do not sleep): a
launch then takes the same time on every machine under any load, so a test of `mambacheck
bench`'s verdicts cannot flake. Only kernels that advance it can be timed so.
"""

import os
import time

import numpy as np

PAGE_BYTES = 4096
DIFF_CHUNK_BYTES = 256 << 20  # pages compared per step (bounds the temporary mask)
RESERVED_BYTES_MAX = 2 << 30  # cached device memory a worker keeps between cases
LATCH_CYCLES_FIRST = 100_000_000  # about 60 ms at an H100's clock: covers 50 queued launches
LATCH_TRIES = 4


HOST_CLOCK_VARIABLE = "MC_HOST_CLOCK"


class HostClock:
    """The clock HostDevice times launches with: the wall clock, or the virtual one."""

    def __init__(self):
        self.virtual_us = 0.0

    @staticmethod
    def is_virtual():
        value = os.environ.get(HOST_CLOCK_VARIABLE, "wall") or "wall"
        if value not in ("wall", "virtual"):
            raise ValueError(f"{HOST_CLOCK_VARIABLE}={value!r}: expected wall or virtual")
        return value == "virtual"

    def now_us(self):
        return self.virtual_us if self.is_virtual() else time.perf_counter_ns() / 1e3

    def advance(self, us):
        """What a host kernel did costs `us` on the virtual clock."""
        self.virtual_us += us

    def delay(self, seconds):
        """A deliberate delay: slept on the wall clock, added to the virtual one."""
        if self.is_virtual():
            self.virtual_us += seconds * 1e6
        else:
            time.sleep(seconds)


HOST_CLOCK = HostClock()


def differing_pages(a, b):
    """Indices of the PAGE_BYTES pages (the last one possibly short) where a and b differ."""
    full = a.size // PAGE_BYTES * PAGE_BYTES
    pages = []
    for start in range(0, full, DIFF_CHUNK_BYTES):
        end = min(full, start + DIFF_CHUNK_BYTES)
        x = a[start:end].reshape(-1, PAGE_BYTES)
        y = b[start:end].reshape(-1, PAGE_BYTES)
        differ = np.flatnonzero((x != y).any(axis=1))
        if differ.size:
            pages.append(differ + start // PAGE_BYTES)
    if full < a.size and not np.array_equal(a[full:], b[full:]):
        pages.append(np.array([full // PAGE_BYTES]))
    return np.concatenate(pages) if pages else np.zeros(0, dtype=np.int64)


class HostDevice:
    """Buffers are numpy arrays in this process; kernel arguments are numpy views."""

    name = "host"

    def alloc(self, nbytes):
        return np.zeros(nbytes, dtype=np.uint8)

    def fill(self, buf, start, end, value):
        buf[start:end] = value

    def address(self, buf):
        return int(buf.ctypes.data)

    def upload(self, buf, offset, data):
        data = np.asarray(data, dtype=np.uint8)
        buf[offset:offset + data.size] = data

    def download(self, buf, offset, nbytes):
        return np.array(buf[offset:offset + nbytes])

    def clone(self, buf):
        return buf.copy()

    def typed(self, buf, offset, dtype, count):
        return buf[offset:offset + count * np.dtype(dtype).itemsize].view(dtype)

    changed_pages = staticmethod(differing_pages)

    def copy(self, dst, src):
        dst[:] = src

    def time_launches(self, launch, prepare, iters):
        """Time of each of `iters` calls of launch(i) in microseconds, prepare(i) before each
        and outside the time: the host kernels run in this process, so the clock around the
        call is their time (HOST_CLOCK: the wall clock or the virtual one)."""
        virtual = HOST_CLOCK.is_virtual()
        times = []
        for i in range(iters):
            prepare(i)
            start = HOST_CLOCK.now_us()
            launch(i)
            times.append(HOST_CLOCK.now_us() - start)
            if virtual and times[-1] <= 0:
                raise RuntimeError(f"{HOST_CLOCK_VARIABLE}=virtual: the kernels did not advance "
                                   f"the host clock (only host kernels that charge it can be "
                                   f"timed so, e.g. mambacheck_adapter.reference)")
        return times, f"host {'virtual' if virtual else 'wall'} clock per launch"

    def synchronize(self):
        pass

    def release(self, force=False):
        pass

    def tensor(self, values):
        """A kernel argument holding `values` (a numpy array): here a copy of it."""
        return np.array(values)

    def to_numpy(self, t):
        return np.array(t)


class TorchDevice:
    """Buffers are torch uint8 tensors on a CUDA device; kernel arguments are tensor views."""

    name = "cuda"

    def __init__(self, device="cuda"):
        import torch  # only here: CI has numpy alone

        if not torch.cuda.is_available():
            raise RuntimeError("torch reports no CUDA device")
        self.torch = torch
        self.device = torch.device(device)

    def alloc(self, nbytes):
        return self.torch.zeros(nbytes, dtype=self.torch.uint8, device=self.device)

    def fill(self, buf, start, end, value):
        if end > start:
            buf[start:end].fill_(value)

    def address(self, buf):
        return int(buf.data_ptr())

    def upload(self, buf, offset, data):
        host = np.ascontiguousarray(data, dtype=np.uint8)
        if not host.flags.writeable:  # torch.from_numpy wants a writable array
            host = host.copy()
        buf[offset:offset + host.size].copy_(self.torch.from_numpy(host))

    def download(self, buf, offset, nbytes):
        return buf[offset:offset + nbytes].cpu().numpy()

    def clone(self, buf):
        return buf.clone()

    def typed(self, buf, offset, dtype, count):
        size = np.dtype(dtype).itemsize
        return buf[offset:offset + count * size].view(getattr(self.torch, np.dtype(dtype).name))

    def tensor(self, values):
        """A kernel argument holding `values` (a numpy array): a tensor on the device."""
        return self.torch.from_numpy(np.array(values)).to(self.device)

    def to_numpy(self, t):
        return t.detach().cpu().numpy()

    def changed_pages(self, a, b):
        pages = []
        step = DIFF_CHUNK_BYTES
        for start in range(0, a.numel(), step):
            x = a[start:start + step].view(-1, PAGE_BYTES)
            y = b[start:start + step].view(-1, PAGE_BYTES)
            differ = self.torch.nonzero((x != y).any(dim=1)).flatten()
            if differ.numel():
                pages.append(differ.cpu().numpy() + start // PAGE_BYTES)
        return np.concatenate(pages) if pages else np.zeros(0, dtype=np.int64)

    def copy(self, dst, src):
        dst.copy_(src)

    def time_launches(self, launch, prepare, iters):
        """GPU time of each of `iters` launches in microseconds, between CUDA events, with
        prepare(i) queued before each start event. A sleep kernel holds the stream while
        the host queues every launch and event, so the times are the GPU's and not the
        host's submission (Python and Triton's launcher take tens of microseconds a launch):
        the latch discipline of `mambacheck bench`. A latch that ran out before the host
        had queued everything is tried again twice as long, LATCH_TRIES times at most."""
        torch = self.torch
        cycles = LATCH_CYCLES_FIRST
        for _ in range(LATCH_TRIES):
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
            released = torch.cuda.Event()
            self.synchronize()
            torch.cuda._sleep(cycles)
            released.record()
            for i in range(iters):
                prepare(i)
                starts[i].record()
                launch(i)
                ends[i].record()
            held = not released.query()
            self.synchronize()
            if held:
                return ([s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)],
                        "GPU time per launch, queued behind a latch")
            cycles *= 2
        raise RuntimeError(f"the latch never held: queuing {iters} launches took longer than "
                           f"a {cycles // 2}-cycle sleep kernel")

    def synchronize(self):
        self.torch.cuda.synchronize(self.device)

    def release(self, force=False):
        """Returns cached device memory after a big case: several workers share one GPU."""
        if force or self.torch.cuda.memory_reserved(self.device) > RESERVED_BYTES_MAX:
            self.torch.cuda.empty_cache()


def make_device(name):
    if name == "host":
        return HostDevice()
    if name in ("cuda", "torch"):
        return TorchDevice()
    raise ValueError(f"--device: expected cuda or host, got {name!r}")
