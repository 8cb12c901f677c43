// The check of every pre-step copy source against the ground truth (class A: a stale or
// mis-seeded column is caught where it is used, with the column's history in the message).
#include "model/block_table.h"
#include "model/errors.h"
#include "oracle/engine/runner.h"
#include "oracle/engine/runner_step.h"
#include "oracle/engine/state_io.h"

#include <fmt/format.h>

namespace mc::oracle::engine {

std::string describe(const SeedNote& note) {
  switch (note.origin) {
  case SeedNote::Origin::derived:
    return fmt::format("was derived as (num_computed - 1) // {}", note.divisor);
  case SeedNote::Origin::kept:
    return "comes from the request's mamba_state_idx entry of its last step";
  case SeedNote::Origin::seeded:
    return fmt::format("was seeded this step as ({} - 1) // {} = {}", note.num_computed,
                       note.divisor, note.state_idx);
  case SeedNote::Origin::kept_slot:
    return "is the slot's state_idx of its last step";
  }
  MC_ASSERT(false);
  return {};
}

bool OracleRunner::check_copy_sources(StepCtx& ctx, const std::vector<std::int32_t>& src_col,
                                      const std::vector<std::int32_t>& dst_col,
                                      const std::vector<std::int32_t>& token_bias,
                                      const std::vector<SeedNote>& seed_note) {
  for (std::size_t b = 0; b < ctx.step.scheduled.size(); ++b) {
    if (src_col[b] < 0 || src_col[b] == dst_col[b]) continue;
    const std::string& id = ctx.step.scheduled[b].req_id;
    const std::int32_t c = ctx.num_computed[b];
    const RequestTruth& truth = *ctx.truth[b];
    for (std::size_t i = 0; i < layout_.tensors.size(); ++i) {
      const model::StateTensor& t = layout_.tensors[i];
      const bool temporal = t.kind() == model::StateKind::temporal;
      const std::int32_t col = src_col[b] + (temporal ? token_bias[b] : 0);
      const auto& ids = ctx.state[b]->row[static_cast<std::size_t>(t.group)];
      const std::int32_t block = col >= 0 && col < static_cast<std::int32_t>(ids.size())
                                     ? ids[static_cast<std::size_t>(col)]
                                     : model::kPadSlot;
      std::optional<std::string> wrong;
      if (block <= model::kNullBlockId || block >= layout_.spec.num_blocks || c <= 0) {
        wrong = block == model::kNullBlockId ? "it holds the null block"
                : c <= 0                     ? "the request has no computed tokens to copy"
                                             : "it lies outside the row (a pad slot)";
      } else {
        const auto tensor = static_cast<std::int32_t>(i);
        wrong = temporal
                    ? states_->check_temporal(
                          tensor, block, truth.hashes[static_cast<std::size_t>(c)], truth.hashes)
                    : states_->check_conv(
                          tensor, block, conv_history_[i], c, token_bias[b],
                          {.head = std::span(truth.tokens).first(static_cast<std::size_t>(c))});
        ctx.rec.bytes_checked += t.natural_bytes;
      }
      if (!wrong) continue;
      ctx.rec.finding = make_finding(
          layout_, FindingKind::wrong_copy_source, ctx.step.index, id, static_cast<std::int32_t>(i),
          col, block,
          fmt::format("the pre-step copy {} -> {} (token bias {}) reads a wrong source: {}; the "
                      "source column {}",
                      src_col[b], dst_col[b], token_bias[b], *wrong, describe(seed_note[b])),
          fmt::format("the state after {} tokens", c));
      return false;
    }
  }
  return true;
}

} // namespace mc::oracle::engine
