// run_launch_in_place (launch.h): validate, decide per row, plan per tensor, check races, then
// apply the copies to the case's own arenas. run_launch is the same on a clone of the case.
#include "oracle/launch.h"

#include "model/errors.h"
#include "model/launch_kinds.h"
#include "oracle/copy.h"
#include "oracle/copy_plan.h"
#include "oracle/describe.h"
#include "oracle/kinds.h"
#include "oracle/validate.h"

#include <fmt/format.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mc::oracle {
namespace {

// The row copies a kind decides, from its family; its outputs are written into `requests`.
std::vector<RowCopy> decide(const model::LaunchCase& launch_case, model::RequestArrays& requests) {
  const model::LaunchKindInfo& info = model::launch_kind_info(launch_case.kind);
  switch (info.family) {
  case model::LaunchFamily::postprocess:
    return decide_postprocess(launch_case, requests);
  case model::LaunchFamily::postprocess_align:
    return decide_postprocess_align(launch_case, requests);
  case model::LaunchFamily::precopy:
    return info.work == model::LaunchWork::copy_plan ? decide_batch_copy(launch_case)
                                                     : decide_precopy(launch_case);
  case model::LaunchFamily::preprocess_align:
    decide_preprocess_align(launch_case, requests);
    return {};
  }
  MC_ASSERT(false);
  return {};
}

// V1 plans each copy as one flat (address, bytes) region: a DS conv window shifted by a
// bias is one region per dim row, which the seed cannot express (NotImplementedError,
// class E). The first such decision, named, or nothing.
std::optional<std::string>
flat_copy_unsupported(model::LaunchKind kind, const model::Layout& layout,
                      const std::vector<model::CopyDecision>& decisions) {
  for (const model::CopyDecision& d : decisions) {
    const model::StateTensor& t = layout.tensors[static_cast<std::size_t>(d.tensor)];
    if (t.kind() == model::StateKind::conv && t.conv_layout == model::ConvLayout::DS &&
        d.token_bias > 0)
      return fmt::format("{}: {}, {}: a DS conv state with token bias {} is not one flat copy "
                         "(the seed raises NotImplementedError)",
                         model::to_string(kind), describe_row(d.batch_row, d.slot),
                         describe_tensor(layout, d.tensor), d.token_bias);
  }
  return std::nullopt;
}

} // namespace

model::LaunchResult run_launch_in_place(model::LaunchCase& launch_case, Copies copies) {
  model::validate_launch_shape(launch_case);
  // Outputs go to a copy first: every decision reads the arrays as the launch started, and
  // nothing of the case may change before the last check has passed.
  model::RequestArrays requests_after = launch_case.requests;
  const std::vector<RowCopy> row_copies = decide(launch_case, requests_after);
  std::vector<model::CopyDecision> decisions = plan_copies(launch_case, row_copies);
  validate_no_overlap(launch_case.layout, decisions);
  model::LaunchResult result;
  if (model::launch_kind_info(launch_case.kind).work == model::LaunchWork::copy_plan) {
    if (std::optional<std::string> reason =
            flat_copy_unsupported(launch_case.kind, launch_case.layout, decisions)) {
      result.status = model::LaunchStatus::unsupported;
      result.unsupported_reason = std::move(*reason);
      return result; // nothing copied, no decision recorded, arrays as they came in
    }
  }
  // Every check passed: from here on nothing throws.
  std::swap(launch_case.requests, requests_after);
  if (copies == Copies::apply) apply_copies(launch_case.layout, launch_case.arenas, decisions);
  result.decisions = std::move(decisions);
  return result;
}

model::LaunchResult run_launch(const model::LaunchCase& launch_case) {
  model::LaunchCase after = launch_case.clone(); // sparse arenas stay sparse
  model::LaunchResult result = run_launch_in_place(after);
  result.requests = std::move(after.requests);
  result.arenas = std::move(after.arenas);
  return result;
}

} // namespace mc::oracle
