// Where a launch's kernels run: one vocabulary for every command and layer (`--backend`, the
// case workers a campaign starts, the GPU-side engine's executor, reports).
//   oracle    the CPU oracle itself (kernel-level checks of one launch only)
//   host      the kernels' bodies on the CPU, in grid order
//   cuda      the kernels on a CUDA device
//   external  a worker process's kernels (`--external`); never a `--backend` name
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace mc::model {

enum class Backend : std::uint8_t { oracle, host, cuda, external };

std::string_view to_string(Backend backend);
std::optional<Backend> find_backend(std::string_view name);

} // namespace mc::model
