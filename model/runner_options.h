// What both engine runners share as data: the options that say which runner flows a run takes,
// and the record of one launch of a step. The oracle's runner (oracle/engine/runner.h) and the
// GPU side's (gpu/engine/engine_runner.h) each decide for themselves (DESIGN.md, the two
// walls); they are configured and compared in these terms.
#pragma once

#include "model/config.h"
#include "model/launch.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mc::model {

// How the V1 runner moves its pre-step copies (REFERENCE.md 2): the flat copy plan of
// batch_copy, or the fused precopy launch.
enum class V1CopyPath : std::uint8_t { batch_copy, precopy };

struct RunnerOptions {
  RunnerFlavour flavour = RunnerFlavour::v1;
  V1CopyPath v1_copy_path = V1CopyPath::precopy;
  std::int32_t row_stride_extra = 3; // block-table row stride beyond the width (gap poison)
};

struct LaunchRecord {
  LaunchKind kind = LaunchKind::precopy;
  LaunchStatus status = LaunchStatus::ok;
  std::string unsupported_reason;
  std::vector<CopyDecision> decisions;
  RequestArrays requests; // every per-request array after the launch
};

} // namespace mc::model
