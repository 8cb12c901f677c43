// The `cuda` backend: the kernels of gpu/kernels/ launched on the GPU over device copies of
// the case's arenas, block tables and per-request arrays; the result is downloaded.
// This header needs no CUDA: in a build without nvcc (MC_HAVE_CUDA undefined) the library
// behind it says so (cuda_available() is false, run_launch_cuda throws).
#pragma once

#include "gpu/device_memory.h"
#include "gpu/device_types.h"
#include "gpu/mutant.h"
#include "model/launch.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace mc::gpu {

// True when this build has CUDA and a device is visible.
bool cuda_available();

// The CUDA devices this process can see (0 where none is); nullopt in a build without CUDA,
// which cannot count them.
std::optional<int> cuda_device_count();

// Makes device `ordinal` (0..cuda_device_count() - 1) this thread's device: where every later
// launch of this thread runs. Throws model::EnvironmentError when it cannot.
void use_cuda_device(int ordinal);

// Checks the variables that tune the cuda backend (MC_FUSED_START, MC_DEVICE_BUFFER_REUSE):
// a bad value throws model::InputError naming it, before any work starts. Nothing to check in a
// build without CUDA.
void check_cuda_environment();

// Whether this process can still run kernels after a failed call: false once an error has
// left its CUDA context unusable for good (an illegal address, a kernel fault: "sticky"
// errors), or in a build without CUDA. A process in that state must be replaced.
bool cuda_context_usable();

// Runs one launch on device 0 (with the kernels of `mutant`). Throws model::EnvironmentError
// when there is no device (or the build has no CUDA, "built without CUDA") and
// model::InputError for an invalid case.
model::LaunchResult run_launch_cuda(const model::LaunchCase& launch,
                                    Mutant mutant = Mutant::none);

// Where a launch runs in place on the device (CUDA builds only; the cuda engine executor keeps
// one for a whole run): the device arenas at `arena_addrs`, the tensor descriptors and units
// made over those addresses (make_tensor_descs, make_units), on the host and uploaded.
struct DeviceArenas {
  DeviceArenas(const model::Layout& layout, std::vector<std::uint64_t> arena_addrs);
  std::vector<std::uint64_t> arena_addrs;
  std::vector<TensorDesc> tensors;
  std::vector<UnitRef> units;
  DeviceBuffer device_tensors;
  DeviceBuffer device_units;
};

// Runs a launch that validate_case_arrays accepted, in place over `arenas` (the case's own
// arenas are not read) and waits for it. `result.requests` comes in as
// prepare_request_arrays(launch); status, requests and decisions go out (result.arenas is
// untouched). Throws model::InputError for a copy the case makes invalid
// (validate_fused_copies) and model::EnvironmentError for a failed CUDA call.
void run_launch_cuda_in_place(const model::LaunchCase& launch, Mutant mutant,
                              const DeviceArenas& arenas, model::LaunchResult& result);

} // namespace mc::gpu
