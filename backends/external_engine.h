// The engine level on kernels in another process: an ExecutorSource (gpu/engine/executor.h)
// whose executors run every launch of a step through an external worker (the adapter command
// `fuzz --external` takes), so that multi-step runs (preemption, resume, prefix hits, resets)
// exercise the kernels under test. The synthetic forward stays in this process.
//
// Nothing but the launch travels per step. Each run's arenas live in one shared memory file
// (memfd), laid out as [guard | arena | guard] per arena, the guards filled with 0xC3: this
// process maps each arena, the worker maps the file once when the run opens its session, and
// its kernels write the arenas in place. Protocol (adapters/python/README.md, "Engine
// protocol"), lines on the same pipes as the kernel-level protocol, which stays as it was; the
// worker announces it with `engine=1` in its greeting:
// - `engine {"op": "open", "shm": "/proc/PID/fd/N", "file_bytes": F, "arenas": [{"offset": O,
//   "size": S, "guard_lo": L, "guard_hi": H}, ...], "case": {config, layout, metadata}}`:
//   answered `ok`; `case` holds the fields of a case directory's case.json that give the
//   geometry (model::case_layout_json);
// - `engine {"op": "launch", "kind": K, "num_reqs": N, "num_slots": S, "num_rows": R,
//   "row_width": W, "row_stride": RS, "tables": [[...], ...], "arrays": {NAME: [...], ...}}`:
//   the block tables (one flat int32 list per group) and the per-request arrays as the launch
//   starts; answered with one JSON line `{"status": "ok"|"unsupported", "reason": "...",
//   "arrays": {NAME: [...]}}` (the arrays after the launch), or `error: MESSAGE` (the kernel
//   raised, or wrote a guard byte of an arena or an array: a finding at the step);
// - `engine {"op": "close"}`: answered `ok`; the worker unmaps the file.
// A worker that dies or runs past the timeout on a launch is a finding at that step
// (KernelFailure "crash" or "timeout") and is started again for the next run; `fatal:` or an
// answer that is not one of these stops the command (ExternalWorkerFailure, exit 3).
//
// On a GPU the worker keeps device copies of the arenas: it uploads the whole arenas once at
// open, then before each launch only the pages this process changed since its last launch (the
// forward's writes, found against its host shadow), and after it downloads only the pages the
// kernel changed into the shared file (the adapter's engine.py).
#pragma once

#include "backends/external_backend.h"
#include "gpu/engine/executor.h"

#include <memory>
#include <vector>

namespace mc::backends {

class ExternalEngineSource final : public gpu::engine::ExecutorSource {
public:
  // Starts the worker; ExternalWorkerFailure when it cannot start or does not serve the engine
  // protocol.
  explicit ExternalEngineSource(ExternalOptions options);

  std::unique_ptr<gpu::engine::Executor> make(const model::Layout& layout) override;
  const std::vector<model::LaunchKind>& kinds() const override { return worker_->kinds(); }

  ExternalWorker& worker() { return *worker_; }

private:
  std::unique_ptr<ExternalWorker> worker_;
};

// `--external COMMAND` of run, replay, the library and gate: the worker started (its stderr
// into `log_file`, or inherited when empty), one line printed about it. ExternalWorkerFailure
// as the constructor.
std::unique_ptr<ExternalEngineSource> start_external_engine(const std::string& command,
                                                            double timeout_seconds,
                                                            const std::filesystem::path& log_file);

} // namespace mc::backends
