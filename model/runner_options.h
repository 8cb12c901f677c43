// What both engine runners share as data: the options that say which runner flows a run takes,
// and the record of one launch of a step. The oracle's runner (oracle/engine/runner.h) and the
// GPU side's (gpu/engine/engine_runner.h) each decide for themselves (DESIGN.md, the two
// walls); they are configured and compared in these terms.
#pragma once

#include "model/config.h"
#include "model/launch.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mc::model {

// How the V1 runner moves its pre-step copies (REFERENCE.md 2):
// - batch_copy: the flat copy plan (the seed; vLLM today without drafts);
// - precopy: the seed's V2 pre-copy kernel driven with idx_mapping [0, n) (this project's
//   earlier model of a fused V1 pre-copy), launched when some row copies;
// - precopy_v1: vLLM's V1 fused pre-copy today (with drafts): precopy_v1 with no idx_mapping,
//   launched every step that has rows, src_col -1 and bias 0 on the rows that copy nothing.
enum class V1CopyPath : std::uint8_t { batch_copy, precopy, precopy_v1 };
std::string_view to_string(V1CopyPath path);
std::optional<V1CopyPath> parse_v1_copy_path(std::string_view text);
inline constexpr std::string_view kV1CopyPathNames = "batch_copy, precopy or precopy_v1";

// Where the V2 copy kernels find a request's block-table row (model/LAUNCH_KINDS.md,
// "Indexing"): at its batch row in tables gathered per step (the seed: postprocess_align,
// precopy) or at its slot in the per-request-slot tables (#55506: the _slot_tables kinds).
enum class V2TableRows : std::uint8_t { batch_row, slot };
std::string_view to_string(V2TableRows rows);
std::optional<V2TableRows> parse_v2_table_rows(std::string_view text);
inline constexpr std::string_view kV2TableRowsNames = "batch_row or slot";

struct RunnerOptions {
  RunnerFlavour flavour = RunnerFlavour::v1;
  V1CopyPath v1_copy_path = V1CopyPath::precopy;
  V2TableRows v2_table_rows = V2TableRows::batch_row;
  // V2: the step's postprocess_align runs deferred, as a non-last pipeline-parallel rank runs
  // it: after a later step gathered its batch-ordered tables in its own order
  // (deferred_gather_order). Per-slot arrays and tables are what the step left (a request is
  // in one batch in flight at a time), so only batch-row tables see the other order.
  bool deferred_postprocess = false;
  std::int32_t row_stride_extra = 3; // block-table row stride beyond the width (gap poison)
};

// Whether the step in flight still writes blocks out of step order: V2's deferred postprocess,
// which runs only with drafts (without them the step in flight's kernels come before the next
// step's on the one stream). The flag means nothing to V1.
inline bool postprocess_writes_out_of_order(const RunnerOptions& options,
                                            std::int32_t num_spec_tokens) {
  return options.deferred_postprocess && options.flavour == RunnerFlavour::v2 &&
         num_spec_tokens > 0;
}

// The gather a deferred postprocess finds in the batch-ordered tables: position b holds the
// table row of batch row order[b] of the step that produced it. Modelled as the step's rows
// rotated by one (b + 1 mod n): a later batch that lost or gained a request in front, which
// is what moves rows under pipeline parallelism. One row keeps its place (no reordering).
std::vector<std::int32_t> deferred_gather_order(std::int32_t num_rows);

// The launch kinds a runner with `options` can launch in `mode` (none in all mode: the forward
// alone): what kernels that run it must cover.
std::vector<LaunchKind> runner_launch_kinds(const RunnerOptions& options, CacheMode mode);

struct LaunchRecord {
  LaunchKind kind = LaunchKind::precopy;
  LaunchStatus status = LaunchStatus::ok;
  std::string unsupported_reason;
  std::vector<CopyDecision> decisions;
  RequestArrays requests; // every per-request array after the launch
  bool deferred = false;  // ran as a deferred postprocess (RunnerOptions::deferred_postprocess)
  // false: the kernels report effects only (kernels in another process): `decisions` is empty
  // and only status, arrays and arena bytes are compared.
  bool decisions_recorded = true;
};

} // namespace mc::model
