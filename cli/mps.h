// NVIDIA MPS for a campaign's cuda case workers (`fuzz --mps auto|on|off`). Without it every
// worker holds a CUDA context of its own and the GPU runs one context at a time, so past two
// workers per GPU the switches cost more than the host work they overlap. Under an MPS server
// the workers' kernels and copies share the GPU at once: on an H200 with 16 cores the default
// kernel campaign's 20,000 cases ran at 279 cases/s with 1 worker, 182 with 16 workers alone
// and 1,695 with 16 under MPS (docs/measurements.md, "Parallel cases").
//
// A campaign uses the daemon the user runs where CUDA_MPS_PIPE_DIRECTORY is set (and names a
// running one: else it goes without MPS, since a context would come up without it), else starts
// one of its own (nvidia-cuda-mps-control -d, found on PATH) with its pipe and log directories
// in a fresh directory under /tmp, so that only this campaign's processes connect to it, and
// quits it when the campaign ends (an interrupt included; a campaign killed with SIGKILL
// leaves it running, and `echo quit | CUDA_MPS_PIPE_DIRECTORY=DIR/pipe
// nvidia-cuda-mps-control` stops it). Before the workers start, a probe process makes a CUDA
// context through it; where that fails or takes over 30 s (an MPS server cannot start on a GPU
// another user's serves) the campaign runs without MPS and says why.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

namespace mc::cli {

// Whether MPS can be had here: a daemon of the user's (CUDA_MPS_PIPE_DIRECTORY set) or the
// control program on PATH.
bool mps_available();

class MpsSession {
public:
  // The user's daemon, or one started for this campaign; nullptr with `why_not` set where
  // neither gives a working CUDA context.
  static std::unique_ptr<MpsSession> start(std::string& why_not);
  ~MpsSession();
  MpsSession(const MpsSession&) = delete;
  MpsSession& operator=(const MpsSession&) = delete;

  // "MPS: started nvidia-cuda-mps-control for this campaign (/tmp/mc-mps-...)" or "MPS: the
  // daemon at ...": for the campaign's first lines.
  std::string line() const;

  // Quits a daemon this campaign started (also run at exit, for a campaign that exits early).
  void stop();

private:
  MpsSession() = default;
  bool own_ = false;
  std::filesystem::path dir_; // own: holds pipe/ and log/
  std::string control_;       // own: the control program's path
  std::string pipe_;
};

} // namespace mc::cli
