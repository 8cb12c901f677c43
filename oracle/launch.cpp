// run_launch (launch.h): validate, decide per row, plan per tensor, check races, then apply
// the copies to clones of the input arenas (sparse arenas stay sparse).
#include "oracle/launch.h"

#include "model/errors.h"
#include "oracle/copy.h"
#include "oracle/copy_plan.h"
#include "oracle/describe.h"
#include "oracle/kinds.h"
#include "oracle/validate.h"

#include <fmt/format.h>

#include <optional>
#include <string>
#include <vector>

namespace mc::oracle {
namespace {

// The row copies a kind decides; its outputs are written into `requests`.
std::vector<RowCopy> decide(const model::LaunchCase& launch_case, model::RequestArrays& requests) {
  switch (launch_case.kind) {
  case model::LaunchKind::postprocess:
    return decide_postprocess(launch_case, requests);
  case model::LaunchKind::postprocess_align:
    return decide_postprocess_align(launch_case, requests);
  case model::LaunchKind::precopy:
    return decide_precopy(launch_case);
  case model::LaunchKind::preprocess_align:
    decide_preprocess_align(launch_case, requests);
    return {};
  case model::LaunchKind::batch_copy:
    return decide_batch_copy(launch_case);
  }
  MC_ASSERT(false);
  return {};
}

// V1 plans each copy as one flat (address, bytes) region: a DS conv window shifted by a
// bias is one region per dim row, which the seed cannot express (NotImplementedError,
// class E). The first such decision, named, or nothing.
std::optional<std::string>
flat_copy_unsupported(const model::Layout& layout,
                      const std::vector<model::CopyDecision>& decisions) {
  for (const model::CopyDecision& d : decisions) {
    const model::StateTensor& t = layout.tensors[static_cast<std::size_t>(d.tensor)];
    if (t.kind() == model::StateKind::conv && t.conv_layout == model::ConvLayout::DS &&
        d.token_bias > 0)
      return fmt::format("batch_copy: {}, {}: a DS conv state with token bias {} is not one flat "
                         "copy (the seed raises NotImplementedError)",
                         describe_row(d.batch_row, d.slot), describe_tensor(layout, d.tensor),
                         d.token_bias);
  }
  return std::nullopt;
}

std::vector<model::Arena> clone_arenas(const std::vector<model::Arena>& arenas) {
  std::vector<model::Arena> out;
  out.reserve(arenas.size());
  for (const model::Arena& arena : arenas)
    out.push_back(arena.clone()); // sparse stays sparse
  return out;
}

} // namespace

model::LaunchResult run_launch(const model::LaunchCase& launch_case) {
  validate_case(launch_case);
  model::LaunchResult result{.requests = launch_case.requests};
  const std::vector<RowCopy> row_copies = decide(launch_case, result.requests);
  std::vector<model::CopyDecision> decisions = plan_copies(launch_case, row_copies);
  validate_no_overlap(launch_case.layout, decisions);
  if (launch_case.kind == model::LaunchKind::batch_copy) {
    if (std::optional<std::string> reason = flat_copy_unsupported(launch_case.layout, decisions)) {
      result.status = model::LaunchStatus::unsupported;
      result.unsupported_reason = std::move(*reason);
      result.arenas = clone_arenas(launch_case.arenas);
      return result; // nothing copied, no decision recorded
    }
  }
  result.arenas = clone_arenas(launch_case.arenas);
  const std::int64_t num_blocks = launch_case.layout.spec.num_blocks;
  for (const model::CopyDecision& d : decisions) {
    const model::StateTensor& t = launch_case.layout.tensors[static_cast<std::size_t>(d.tensor)];
    apply_copy(result.arenas[static_cast<std::size_t>(t.arena)], t, num_blocks, d);
  }
  result.decisions = std::move(decisions);
  return result;
}

} // namespace mc::oracle
