// The picture of one kernel launch (`mambacheck show CASE_DIR`, the report.html of a kernel
// counterexample): per batch row the block-table row of every group, the oracle's copy
// decision as an arrow from source to destination column with its token bias (the backend's,
// where it differs, as a dashed arrow under it), num_accepted before and after (the reset),
// rows that alias a block (one block in two columns) or share one with another row
// highlighted; rows that behave alike collapsed into one; then every differing state block
// as a byte grid, expected beside actual, and the per-request arrays.
//
// Nothing here decides a copy: the decisions are the results' (the oracle's run_launch and the
// backend's), the picture only draws them.
#pragma once

#include "model/launch.h"
#include "show/html.h"

#include <string>

namespace mc::show {

struct KernelReport {
  const model::LaunchCase& launch;
  const model::LaunchResult& expected;          // the oracle's result
  const model::LaunchResult* actual = nullptr;  // the backend's; null when it did not run
  std::string actual_name = "actual";           // "host, mutant ds_tail_ignores_bias"
  Header header;
};

inline constexpr std::int32_t kRowsDrawnMax = 48;

std::string kernel_report_html(const KernelReport& report);

} // namespace mc::show
