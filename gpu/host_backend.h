// The `host` backend: the kernels' own per-program bodies (gpu/kernels/*.cuh) run on the
// CPU, one program after another in grid order with a one-thread team, over host arenas.
// CI runs the oracle against it; races only show on the `cuda` backend.
#pragma once

#include "gpu/device_types.h"
#include "gpu/mutant.h"
#include "model/launch.h"

#include <cstdint>
#include <vector>

namespace mc::gpu {

// Runs one launch (with the kernels of `mutant`). Throws model::InputError for a malformed or
// invalid case.
model::LaunchResult run_launch_host(const model::LaunchCase& launch,
                                    Mutant mutant = Mutant::none);

// Where a launch runs in place: the arenas at `arena_addrs` (one per layout arena, host
// memory) and the tensor descriptors and units made over those addresses
// (make_tensor_descs, make_units), which a caller running many launches keeps.
struct HostArenas {
  HostArenas(const model::Layout& layout, std::vector<std::uint64_t> arena_addrs);
  std::vector<std::uint64_t> arena_addrs;
  std::vector<TensorDesc> tensors;
  std::vector<UnitRef> units;
};

// The addresses of host arenas, one per arena, as HostArenas::arena_addrs takes them.
std::vector<std::uint64_t> arena_addresses(const std::vector<model::Arena>& arenas);

// Runs a launch that validate_case accepted, in place over `arenas` (the case's own arenas
// are not read). `result.requests` comes in as prepare_request_arrays(launch); status,
// requests and decisions go out (result.arenas is untouched). Throws model::InputError for
// a copy the case makes invalid (validate_fused_copies).
void run_launch_host_in_place(const model::LaunchCase& launch, Mutant mutant,
                              const HostArenas& arenas, model::LaunchResult& result);

} // namespace mc::gpu
