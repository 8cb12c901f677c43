// The per-step view of the oracle's beliefs (step_view.h).
#include "harness/step_view.h"

#include "model/errors.h"
#include "model/launch_kinds.h"

#include <fmt/format.h>

namespace mc::harness {
namespace {

// A launch that copies state before the forward (pre_copy) or after it (post_copy); the
// pre-step bookkeeping copies nothing.
bool copies_in(model::LaunchKind kind, model::LaunchPhase phase) {
  const model::LaunchKindInfo& info = model::launch_kind_info(kind);
  return info.moves_state && info.phase == phase;
}

// The copy of batch row `row` in a launch: its columns and bias, and how many states it moved.
std::optional<CopyView> copy_of_row(const oracle::engine::LaunchRecord& launch, std::int32_t row) {
  std::optional<CopyView> copy;
  for (const model::CopyDecision& d : launch.decisions) {
    if (d.batch_row != row) continue;
    if (!copy)
      copy = CopyView{.src_col = d.src_col, .token_bias = d.token_bias, .dst_col = d.dst_col};
    ++copy->states;
  }
  return copy;
}

std::vector<std::int32_t> held_blocks(const oracle::engine::BlockPool& pool) {
  std::vector<std::int32_t> held;
  for (std::int32_t b = 1; b < pool.num_blocks(); ++b)
    if (pool.ref_count(b) > 0) held.push_back(b);
  return held;
}

// Counts before a step, taken from the step's own lists (a prefix hit is the computed count of
// a new or resumed request).
void fill_counts(const model::Step& step, RowView& row) {
  for (const model::NewRequestData& n : step.new_requests)
    if (n.req_id == row.req_id) {
      row.is_new = true;
      row.computed_before = n.num_computed_tokens;
      row.prefix_hit_tokens = n.num_computed_tokens;
      return;
    }
  for (const model::CachedRequestData& c : step.cached_requests)
    if (c.req_id == row.req_id) {
      row.resumed = c.resumed;
      row.computed_before = c.num_computed_tokens;
      row.computed_optimistic = c.num_computed_tokens_optimistic;
      if (c.resumed) row.prefix_hit_tokens = c.num_computed_tokens;
      return;
    }
}

nlohmann::ordered_json copy_json(const std::optional<CopyView>& c) {
  if (!c) return nullptr;
  return {{"src_col", c->src_col},
          {"token_bias", c->token_bias},
          {"dst_col", c->dst_col},
          {"states", c->states}};
}

template <typename T> nlohmann::ordered_json optional_json(const std::optional<T>& v) {
  if (!v) return nullptr;
  return *v;
}

std::string optional_text(const std::optional<std::int32_t>& v) {
  return v ? std::to_string(*v) : "-";
}

std::string copy_text(const std::optional<CopyView>& c) {
  if (!c) return "none";
  return fmt::format("{}{:+}->{} ({})", c->src_col, c->token_bias, c->dst_col, c->states);
}

std::string table_text(const model::GroupBlockIds& table) {
  std::string out;
  for (std::size_t g = 0; g < table.size(); ++g) {
    if (g > 0) out += " | ";
    for (std::size_t i = 0; i < table[g].size(); ++i)
      out += fmt::format("{}{}", i > 0 ? " " : "",
                         table[g][i] == 0 ? "." : std::to_string(table[g][i]));
  }
  return out.empty() ? "(none)" : out;
}

std::string ids_text(const std::vector<std::vector<std::int32_t>>& per_group) {
  std::string out;
  for (std::size_t g = 0; g < per_group.size(); ++g)
    out += fmt::format("{}group {}: [{}]", g > 0 ? ", " : "", g, fmt::join(per_group[g], " "));
  return out;
}

std::string column_copy_text(const std::optional<model::ColumnCopy>& c) {
  return c ? fmt::format("[{}, {}]", c->src_col, c->dst_col) : "no copy";
}

std::optional<CopyView> row_copy_view(const oracle::engine::StepRecord& record, std::int32_t row,
                                      bool pre_step) {
  const model::LaunchPhase phase =
      pre_step ? model::LaunchPhase::pre_step : model::LaunchPhase::post_step;
  for (const oracle::engine::LaunchRecord& l : record.launches)
    if (copies_in(l.kind, phase))
      if (std::optional<CopyView> c = copy_of_row(l, row)) return c;
  return std::nullopt;
}

// The copy as (source column, destination column), or in vLLM's words (`biased`: the column of
// the temporal state copied, the source column plus the token bias).
std::optional<model::ColumnCopy> row_copy(const oracle::engine::StepRecord& record,
                                          std::int32_t row, bool pre_step, bool biased = false) {
  const std::optional<CopyView> c = row_copy_view(record, row, pre_step);
  if (!c) return std::nullopt;
  return model::ColumnCopy{.src_col = c->src_col + (biased ? c->token_bias : 0),
                           .dst_col = c->dst_col};
}

// One group's row as a mask: 1 a block, 0 the null block.
std::vector<std::int32_t> row_mask(const std::vector<std::int32_t>& ids) {
  std::vector<std::int32_t> m;
  m.reserve(ids.size());
  for (const std::int32_t id : ids)
    m.push_back(id == model::kNullBlockId ? 0 : 1);
  return m;
}

// The runner's row of a request, per group.
std::vector<std::vector<std::int32_t>> mask_of(const model::GroupBlockIds* table) {
  std::vector<std::vector<std::int32_t>> mask;
  if (table == nullptr) return mask;
  for (const std::vector<std::int32_t>& group : *table)
    mask.push_back(row_mask(group));
  return mask;
}

// The scheduler's table of a request (the block manager's, nulled where freed or moved), per
// group.
std::vector<std::vector<std::int32_t>> kv_mask_of(const oracle::engine::BlockManager& blocks,
                                                  const std::string& req_id) {
  std::vector<std::vector<std::int32_t>> mask;
  const oracle::engine::RequestBlocks* held = blocks.find(req_id);
  if (held == nullptr) return mask;
  for (const oracle::engine::GroupRow& g : held->groups)
    mask.push_back(row_mask(g.block_ids));
  return mask;
}

std::string mask_text(const std::vector<std::vector<std::int32_t>>& mask) {
  std::string out;
  for (std::size_t g = 0; g < mask.size(); ++g)
    out += fmt::format("{}[{}]", g > 0 ? " " : "", fmt::join(mask[g], ""));
  return out.empty() ? "no table" : out;
}

} // namespace

void StepViewer::before(const OracleSide& oracle) {
  const oracle::engine::BlockManager& blocks = oracle.blocks();
  held_before_.clear();
  registrations_before_.clear();
  for (std::int32_t g = 0; g < blocks.num_groups(); ++g) {
    held_before_.push_back(held_blocks(blocks.pool(g)));
    registrations_before_.push_back(blocks.pool(g).num_registrations());
  }
}

StepView StepViewer::after(OracleSide& oracle, const OracleStep& o) {
  const model::Step& step = o.step;
  StepView view{.step = step.index,
                .frees_held_back = o.record.frees_held_back,
                .preempted = step.preempted_req_ids,
                .finished = step.finished_req_ids,
                .reset_prefix_cache = step.reset_prefix_cache};
  if (step.planned_during >= 0) view.planned_during = step.planned_during;
  if (o.finding) view.finding = o.finding->message;
  for (const oracle::engine::LaunchRecord& l : o.record.launches)
    view.launches.emplace_back(model::to_string(l.kind));
  view.metadata = o.record.metadata;
  for (const std::string& id : step.preempted_req_ids)
    last_read_.erase(id);
  for (const std::string& id : step.finished_req_ids)
    last_read_.erase(id);
  const oracle::engine::OracleRunner& runner = oracle.runner();
  for (std::size_t b = 0; b < step.scheduled.size(); ++b) {
    const model::ScheduledRequest& s = step.scheduled[b];
    RowView row{.batch_row = static_cast<std::int32_t>(b),
                .req_id = s.req_id,
                .scheduled = s.num_scheduled_tokens,
                .drafts = s.num_draft_tokens,
                .accepted = s.num_accepted_tokens};
    fill_counts(step, row);
    if (!row.is_new && !row.resumed)
      if (const auto it = last_read_.find(s.req_id); it != last_read_.end()) {
        row.state_col_before = it->second.state_col;
        row.num_accepted_before = it->second.num_accepted;
      }
    if (const std::optional<oracle::engine::ReadPoint> p = runner.read_point(s.req_id)) {
      row.state_col_after = p->state_idx;
      row.num_accepted_after = p->num_accepted;
      last_read_[s.req_id] = Read{.state_col = p->state_idx, .num_accepted = p->num_accepted};
    }
    row.pre_copy = row_copy_view(o.record, row.batch_row, true);
    row.post_copy = row_copy_view(o.record, row.batch_row, false);
    if (const model::GroupBlockIds* table = runner.row(s.req_id)) row.table = *table;
    view.rows.push_back(std::move(row));
  }
  const oracle::engine::BlockManager& blocks = oracle.blocks();
  MC_ASSERT(static_cast<std::int32_t>(held_before_.size()) == blocks.num_groups());
  for (std::int32_t g = 0; g < blocks.num_groups(); ++g) {
    const oracle::engine::BlockPool& pool = blocks.pool(g);
    std::vector<std::int32_t>& freed = view.freed.emplace_back();
    for (const std::int32_t block : held_before_[static_cast<std::size_t>(g)])
      if (pool.ref_count(block) == 0) freed.push_back(block);
    std::vector<std::int32_t>& cached = view.cached.emplace_back();
    if (const auto since =
            pool.registered_since(registrations_before_[static_cast<std::size_t>(g)]))
      cached.assign(since->begin(), since->end());
  }
  return view;
}

std::vector<Difference> check_expectations(OracleSide& oracle, const OracleStep& o,
                                           std::int64_t& checked) {
  std::vector<Difference> failed;
  const model::Step& step = o.step;
  const oracle::engine::OracleRunner& runner = oracle.runner();
  for (const model::RowExpectation& e : step.expect) {
    std::int32_t row = -1;
    for (std::size_t b = 0; b < step.scheduled.size(); ++b)
      if (step.scheduled[b].req_id == e.req_id) row = static_cast<std::int32_t>(b);
    MC_ASSERT(row >= 0); // the reader checked that every expectation names a scheduled request
    const auto differ = [&](std::string_view field, const std::string& want,
                            const std::string& got) {
      return Difference{.kind = "expectation",
                        .step = step.index,
                        .request = e.req_id,
                        .field = std::string(field),
                        .text = fmt::format("step {}: request {}: expect.{}: the trace expects {}, "
                                            "the oracle has {}",
                                            step.index, e.req_id, field, want, got)};
    };
    // A field compared by value: counted, and a Difference where the oracle has another.
    const auto compare = [&](std::string_view field, const auto& want, const auto& got,
                             const auto& text) {
      ++checked;
      if (got != want) failed.push_back(differ(field, text(want), text(got)));
    };
    const auto int_text = [](std::int32_t v) { return std::to_string(v); };
    if (e.pre_copy)
      compare("pre_copy", *e.pre_copy, row_copy(o.record, row, true), column_copy_text);
    if (e.post_copy)
      compare("post_copy", *e.post_copy, row_copy(o.record, row, false), column_copy_text);
    const std::optional<oracle::engine::ReadPoint> read = runner.read_point(e.req_id);
    if (e.state_col) {
      ++checked;
      if (!read || read->state_idx != *e.state_col)
        failed.push_back(differ("state_col", std::to_string(*e.state_col),
                                read ? std::to_string(read->state_idx) : "no column"));
    }
    if (e.num_accepted) {
      ++checked;
      if (!read || read->num_accepted != *e.num_accepted)
        failed.push_back(differ("num_accepted", std::to_string(*e.num_accepted),
                                read ? std::to_string(read->num_accepted) : "none"));
    }
    if (e.prev_step_anchor) {
      ++checked;
      if (!read || read->anchor != *e.prev_step_anchor)
        failed.push_back(differ("prev_step_anchor", std::to_string(*e.prev_step_anchor),
                                read && read->anchor >= 0 ? std::to_string(read->anchor)
                                                          : "none (not all mode with drafts)"));
    }
    if (e.block_mask)
      compare("block_mask", *e.block_mask, mask_of(runner.row(e.req_id)), mask_text);
    // In vLLM's words (model::RowExpectation).
    if (e.kv_block_mask)
      compare("kv_block_mask", *e.kv_block_mask, kv_mask_of(oracle.blocks(), e.req_id), mask_text);
    if (e.preprocess_copy_idx)
      compare("preprocess_copy_idx", *e.preprocess_copy_idx, row_copy(o.record, row, true, true),
              column_copy_text);
    if (e.postprocess_copy_idx)
      compare("postprocess_copy_idx", *e.postprocess_copy_idx, row_copy(o.record, row, false, true),
              column_copy_text);
    if (e.token_bias) {
      const std::optional<CopyView> c = row_copy_view(o.record, row, true);
      compare("token_bias", *e.token_bias, c ? c->token_bias : 0, int_text);
    }
  }
  return failed;
}

nlohmann::ordered_json to_json(const StepView& v) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const RowView& r : v.rows) {
    nlohmann::ordered_json table = nlohmann::ordered_json::array();
    for (const std::vector<std::int32_t>& group : r.table) {
      nlohmann::ordered_json ids = nlohmann::ordered_json::array();
      for (const std::int32_t id : group)
        ids.push_back(id == 0 ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(id));
      table.push_back(std::move(ids));
    }
    rows.push_back({{"batch_row", r.batch_row},
                    {"req_id", r.req_id},
                    {"new", r.is_new},
                    {"resumed", r.resumed},
                    {"computed_before", r.computed_before},
                    {"computed_optimistic", optional_json(r.computed_optimistic)},
                    {"scheduled", r.scheduled},
                    {"drafts", r.drafts},
                    {"accepted", r.accepted},
                    {"prefix_hit_tokens", optional_json(r.prefix_hit_tokens)},
                    {"state_col_before", optional_json(r.state_col_before)},
                    {"state_col_after", optional_json(r.state_col_after)},
                    {"num_accepted_before", optional_json(r.num_accepted_before)},
                    {"num_accepted_after", optional_json(r.num_accepted_after)},
                    {"pre_copy", copy_json(r.pre_copy)},
                    {"post_copy", copy_json(r.post_copy)},
                    {"table", std::move(table)}});
  }
  nlohmann::ordered_json j{{"step", v.step},
                           {"planned_during", optional_json(v.planned_during)},
                           {"frees_held_back", v.frees_held_back},
                           {"rows", std::move(rows)},
                           {"launches", v.launches},
                           {"preempted", v.preempted},
                           {"finished", v.finished},
                           {"reset_prefix_cache", v.reset_prefix_cache},
                           {"freed", v.freed},
                           {"cached", v.cached}};
  nlohmann::ordered_json md_rows = nlohmann::ordered_json::array();
  for (const model::ForwardMetadataRow& r : v.metadata.rows) {
    nlohmann::ordered_json row{{"batch_row", r.batch_row < 0 ? nlohmann::ordered_json(nullptr)
                                                             : nlohmann::ordered_json(r.batch_row)},
                               {"decode", r.decode},
                               {"window_start", r.window_start},
                               {"state_indices", r.state_indices},
                               {"num_accepted", r.num_accepted}};
    if (r.block_idx_last_scheduled >= 0) {
      row["block_idx_last_computed"] = r.block_idx_last_computed;
      row["block_idx_first_scheduled"] = r.block_idx_first_scheduled;
      row["block_idx_last_scheduled"] = r.block_idx_last_scheduled;
    }
    md_rows.push_back(std::move(row));
  }
  j["metadata"] = {{"num_decodes", v.metadata.num_decodes},
                   {"num_prefills", v.metadata.num_prefills},
                   {"num_padded", v.metadata.num_padded},
                   {"rows", std::move(md_rows)}};
  if (v.finding) j["finding"] = *v.finding;
  return j;
}

std::string explain(const StepView& v) {
  std::string out =
      fmt::format("step {}: {} rows; launches: {}{}{}\n", v.step, v.rows.size(),
                  v.launches.empty() ? "none" : fmt::format("{}", fmt::join(v.launches, ", ")),
                  v.reset_prefix_cache ? "; reset_prefix_cache" : "",
                  v.planned_during ? fmt::format("; planned during step {} ({} frees held back)",
                                                 *v.planned_during, v.frees_held_back)
                                   : "");
  out +=
      fmt::format("{:>3} {:<12} {:<7} {:>8} {:>6} {:>6} {:>3} {:>6} {:>9} {:>5} {:<18} {:<18} {}\n",
                  "row", "request", "kind", "computed", "sched", "drafts", "acc", "hit", "col", "a",
                  "pre-copy", "post-copy", "block table (. = null)");
  for (const RowView& r : v.rows) {
    const std::string kind = r.is_new ? "new" : r.resumed ? "resumed" : "running";
    out += fmt::format(
        "{:>3} {:<12} {:<7} {:>8} {:>6} {:>6} {:>3} {:>6} {:>9} {:>5} {:<18} {:<18} {}\n",
        r.batch_row, r.req_id, kind, r.computed_before, r.scheduled, r.drafts, r.accepted,
        optional_text(r.prefix_hit_tokens),
        fmt::format("{}->{}", optional_text(r.state_col_before), optional_text(r.state_col_after)),
        fmt::format("{}->{}", optional_text(r.num_accepted_before),
                    optional_text(r.num_accepted_after)),
        copy_text(r.pre_copy), copy_text(r.post_copy), table_text(r.table));
  }
  if (!v.preempted.empty()) out += fmt::format("preempted: {}\n", fmt::join(v.preempted, " "));
  if (!v.finished.empty()) out += fmt::format("finished: {}\n", fmt::join(v.finished, " "));
  out += fmt::format("freed: {}\ncached: {}\n", ids_text(v.freed), ids_text(v.cached));
  out += "copies read src_col+token_bias->dst_col (states moved)\n";
  out += fmt::format("forward metadata: {} decodes, {} prefills, {} CUDA-graph padding rows\n",
                     v.metadata.num_decodes, v.metadata.num_prefills, v.metadata.num_padded);
  for (const model::ForwardMetadataRow& r : v.metadata.rows)
    out += fmt::format("  {}\n", model::describe_metadata_row(r));
  if (v.finding) out += fmt::format("FINDING: {}\n", *v.finding);
  return out;
}

} // namespace mc::harness
