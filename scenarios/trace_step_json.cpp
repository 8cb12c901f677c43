// Step lines: writing with defaults left out, reading with types, presence and unknown keys
// checked (FORMAT.md, "Step lines").
#include "scenarios/trace_step_json.h"

#include "model/layout.h"
#include "scenarios/derived_prompt.h"
#include "scenarios/trace.h"

#include <algorithm>
#include <limits>

namespace mc::scenarios {
namespace {

using ojson = nlohmann::ordered_json;
constexpr std::int32_t kInt32Min = std::numeric_limits<std::int32_t>::min();
constexpr std::int32_t kInt32Max = std::numeric_limits<std::int32_t>::max();

bool all_empty(const model::GroupBlockIds& ids) {
  for (const auto& row : ids)
    if (!row.empty()) return false;
  return true;
}

ojson new_to_json(const model::NewRequestData& r) {
  ojson out = {{"req_id", r.req_id}, {"prompt_token_ids", r.prompt_token_ids}};
  if (r.num_computed_tokens != 0) out["num_computed_tokens"] = r.num_computed_tokens;
  out["block_ids"] = r.block_ids;
  if (!r.attention_block_ids.empty()) out["attention_block_ids"] = r.attention_block_ids;
  return out;
}

ojson cached_to_json(const model::CachedRequestData& r) {
  ojson out = {{"req_id", r.req_id}};
  if (r.resumed) out["resumed"] = true;
  if (r.resumed || !all_empty(r.new_block_ids)) out["new_block_ids"] = r.new_block_ids;
  out["num_computed_tokens"] = r.num_computed_tokens;
  if (r.num_computed_tokens_optimistic)
    out["num_computed_tokens_optimistic"] = *r.num_computed_tokens_optimistic;
  if (!all_empty(r.attention_block_ids)) out["attention_block_ids"] = r.attention_block_ids;
  if (!r.held_block_ids.empty()) out["held_block_ids"] = r.held_block_ids;
  return out;
}

ojson scheduled_to_json(const model::ScheduledRequest& r) {
  ojson out = {{"req_id", r.req_id}, {"num_scheduled_tokens", r.num_scheduled_tokens}};
  if (r.num_draft_tokens != 0) out["num_draft_tokens"] = r.num_draft_tokens;
  out["token_ids"] = r.token_ids;
  if (r.num_accepted_tokens != 1) out["num_accepted_tokens"] = r.num_accepted_tokens;
  return out;
}

template <typename T, typename ToJson>
void put_list(ojson& out, const char* key, const std::vector<T>& items, ToJson to_json) {
  if (items.empty()) return;
  ojson list = ojson::array();
  for (const T& item : items)
    list.push_back(to_json(item));
  out[key] = std::move(list);
}

// One list per group of the layout (or as many as `declared` says), of values in min..max
// (block ids, or a mask of 0 and 1).
model::GroupBlockIds group_lists_from_json(const Field& f, std::size_t num_groups,
                                           std::int32_t min = kInt32Min,
                                           std::int32_t max = kInt32Max,
                                           std::string_view declared = "the layout has") {
  if (f.array_size(model::kGroupsMax) != num_groups)
    f.fail("{} groups, {} {}", f.value().size(), declared, num_groups);
  model::GroupBlockIds ids(num_groups);
  for (std::size_t g = 0; g < num_groups; ++g)
    ids[g] = f[g].int32_list(min, max, kBlockIdsPerRowMax);
  return ids;
}

std::vector<std::int32_t> prompt_from_json(const Field& f, std::int32_t vocab_size) {
  if (f.has("prompt_token_ids")) {
    for (const char* key : {"prompt_len", "prefix_id", "prefix_len", "suffix_id"})
      if (f.has(key)) f[key].fail("give either prompt_token_ids or a derived prompt, not both");
    return f["prompt_token_ids"].int32_list(0, kInt32Max, kPromptTokensMax);
  }
  if (!f.has("prompt_len")) f.fail("needs prompt_token_ids, or prompt_len and prefix_id");
  DerivedPrompt p{.prompt_len = f["prompt_len"].int32(1, kPromptTokensMax)};
  p.prefix_id = static_cast<std::uint32_t>(f["prefix_id"].integer(0, 0xFFFFFFFF));
  p.prefix_len = f.has("prefix_len") ? f["prefix_len"].int32(0, p.prompt_len) : p.prompt_len;
  if (p.prefix_len < p.prompt_len)
    p.suffix_id = static_cast<std::uint32_t>(f["suffix_id"].integer(0, 0xFFFFFFFF));
  else if (f.has("suffix_id"))
    f["suffix_id"].fail("unused: prefix_len covers the whole prompt");
  return derive_prompt(p, vocab_size);
}

// The attention groups' ids: no null block or pad among them, `num` lists (none: empty).
model::GroupBlockIds attention_ids_from_json(const Field& f, std::size_t num) {
  if (num == 0) f.fail("unknown field: the header's scheduler declares no attention_groups");
  return group_lists_from_json(f, num, 1, kInt32Max, "the header's scheduler declares");
}

model::NewRequestData new_from_json(const Field& f, std::size_t num_groups,
                                    std::int32_t vocab_size, std::size_t attention_groups) {
  f.expect_object({"req_id", "prompt_token_ids", "prompt_len", "prefix_id", "prefix_len",
                   "suffix_id", "num_computed_tokens", "block_ids", "attention_block_ids"});
  model::NewRequestData r{.req_id = f["req_id"].string(kReqIdBytesMax)};
  r.prompt_token_ids = prompt_from_json(f, vocab_size);
  r.block_ids = group_lists_from_json(f["block_ids"], num_groups);
  if (f.has("attention_block_ids"))
    r.attention_block_ids = attention_ids_from_json(f["attention_block_ids"], attention_groups);
  else if (attention_groups > 0)
    f.fail("needs attention_block_ids (the header's scheduler declares attention groups)");
  if (f.has("num_computed_tokens"))
    r.num_computed_tokens = f["num_computed_tokens"].int32(kInt32Min, kInt32Max);
  return r;
}

model::CachedRequestData cached_from_json(const Field& f, std::size_t num_groups,
                                          std::int32_t version, std::size_t attention_groups) {
  if (version >= kTraceFormatVersionContract)
    f.expect_object({"req_id", "resumed", "new_block_ids", "num_computed_tokens",
                     "num_computed_tokens_optimistic", "attention_block_ids", "held_block_ids"});
  else if (version >= kTraceFormatVersionAsync)
    f.expect_object({"req_id", "resumed", "new_block_ids", "num_computed_tokens",
                     "num_computed_tokens_optimistic"});
  else
    f.expect_object({"req_id", "resumed", "new_block_ids", "num_computed_tokens"});
  model::CachedRequestData r{.req_id = f["req_id"].string(kReqIdBytesMax)};
  r.resumed = f.has("resumed") && f["resumed"].boolean();
  if (f.has("new_block_ids"))
    r.new_block_ids = group_lists_from_json(f["new_block_ids"], num_groups);
  else if (r.resumed)
    fail_field(f.path() + ".new_block_ids",
               "missing (required for a resumed request: its whole new table)");
  else
    r.new_block_ids.assign(num_groups, {});
  r.num_computed_tokens = f["num_computed_tokens"].int32(kInt32Min, kInt32Max);
  if (f.has("num_computed_tokens_optimistic"))
    r.num_computed_tokens_optimistic =
        f["num_computed_tokens_optimistic"].int32(kInt32Min, kInt32Max);
  if (f.has("attention_block_ids"))
    r.attention_block_ids = attention_ids_from_json(f["attention_block_ids"], attention_groups);
  else if (attention_groups > 0)
    r.attention_block_ids.assign(attention_groups, {});
  if (f.has("held_block_ids"))
    r.held_block_ids = group_lists_from_json(f["held_block_ids"], num_groups);
  return r;
}

model::ScheduledRequest scheduled_from_json(const Field& f) {
  f.expect_object(
      {"req_id", "num_scheduled_tokens", "num_draft_tokens", "token_ids", "num_accepted_tokens"});
  model::ScheduledRequest r{.req_id = f["req_id"].string(kReqIdBytesMax),
                            .num_scheduled_tokens =
                                f["num_scheduled_tokens"].int32(kInt32Min, kInt32Max)};
  if (f.has("num_draft_tokens"))
    r.num_draft_tokens = f["num_draft_tokens"].int32(kInt32Min, kInt32Max);
  r.token_ids = f["token_ids"].int32_list(0, kInt32Max, kScheduledTokensMax);
  if (f.has("num_accepted_tokens"))
    r.num_accepted_tokens = f["num_accepted_tokens"].int32(kInt32Min, kInt32Max);
  return r;
}

ojson copy_to_json(const std::optional<model::ColumnCopy>& c) {
  if (!c) return nullptr;
  return ojson::array({c->src_col, c->dst_col});
}

ojson expect_to_json(const std::vector<model::RowExpectation>& expect) {
  ojson out = ojson::object();
  for (const model::RowExpectation& e : expect) {
    ojson row = ojson::object();
    if (e.pre_copy) row["pre_copy"] = copy_to_json(*e.pre_copy);
    if (e.post_copy) row["post_copy"] = copy_to_json(*e.post_copy);
    if (e.state_col) row["state_col"] = *e.state_col;
    if (e.num_accepted) row["num_accepted"] = *e.num_accepted;
    if (e.prev_step_anchor) row["prev_step_anchor"] = *e.prev_step_anchor;
    if (e.block_mask) row["block_mask"] = *e.block_mask;
    if (e.kv_block_mask) row["kv_block_mask"] = *e.kv_block_mask;
    if (e.preprocess_copy_idx) row["preprocess_copy_idx"] = copy_to_json(*e.preprocess_copy_idx);
    if (e.postprocess_copy_idx) row["postprocess_copy_idx"] = copy_to_json(*e.postprocess_copy_idx);
    if (e.token_bias) row["token_bias"] = *e.token_bias;
    out[e.req_id] = std::move(row);
  }
  return out;
}

// No copy is null here and [-1, -1] in vLLM's own tests (its fused preprocess buffers hold -1
// on rows that copy nothing), so a table copied from them reads as written.
std::optional<model::ColumnCopy> copy_from_json(const Field& f) {
  if (f.value().is_null()) return std::nullopt;
  if (f.array_size(2) != 2) f.fail("expected [src_col, dst_col], [-1, -1] or null");
  const std::int32_t src = f[0].int32(-1, kInt32Max);
  const std::int32_t dst = f[1].int32(-1, kInt32Max);
  if (src == -1 && dst == -1) return std::nullopt;
  if (src == -1 || dst == -1) f.fail("expected [src_col, dst_col], [-1, -1] or null");
  return model::ColumnCopy{.src_col = src, .dst_col = dst};
}

} // namespace

model::RowExpectation expectation_fields_from_json(const Field& f, model::RequestId req_id,
                                                   std::size_t num_groups) {
  model::RowExpectation e{.req_id = std::move(req_id)};
  if (f.has("pre_copy")) e.pre_copy = copy_from_json(f["pre_copy"]);
  if (f.has("post_copy")) e.post_copy = copy_from_json(f["post_copy"]);
  if (f.has("state_col")) e.state_col = f["state_col"].int32(0, kInt32Max);
  if (f.has("num_accepted")) e.num_accepted = f["num_accepted"].int32(1, 1 + model::kSpecTokensMax);
  if (f.has("prev_step_anchor")) e.prev_step_anchor = f["prev_step_anchor"].int32(0, kInt32Max);
  if (f.has("block_mask")) e.block_mask = group_lists_from_json(f["block_mask"], num_groups, 0, 1);
  if (f.has("kv_block_mask"))
    e.kv_block_mask = group_lists_from_json(f["kv_block_mask"], num_groups, 0, 1);
  if (f.has("preprocess_copy_idx"))
    e.preprocess_copy_idx = copy_from_json(f["preprocess_copy_idx"]);
  if (f.has("postprocess_copy_idx"))
    e.postprocess_copy_idx = copy_from_json(f["postprocess_copy_idx"]);
  if (f.has("token_bias")) e.token_bias = f["token_bias"].int32(0, model::kSpecTokensMax);
  return e;
}

namespace {

std::vector<model::RowExpectation> expect_from_json(const Field& f, std::size_t num_groups) {
  if (!f.value().is_object()) f.fail("expected an object keyed by request id");
  if (f.value().size() > kRequestsPerStepMax) f.fail("more than {} requests", kRequestsPerStepMax);
  std::vector<model::RowExpectation> out;
  for (const auto& item : f.value().items()) {
    if (item.key().starts_with("x_")) continue;
    const Field row = f[item.key()];
    row.expect_object(scenarios::kExpectationFields);
    out.push_back(expectation_fields_from_json(row, item.key(), num_groups));
  }
  return out;
}

template <typename T, typename FromJson>
std::vector<T> list_from_json(const Field& root, const char* key, FromJson from_json) {
  std::vector<T> out;
  if (!root.has(key)) return out;
  const Field list = root[key];
  const std::size_t size = list.array_size(kRequestsPerStepMax);
  out.reserve(size);
  for (std::size_t i = 0; i < size; ++i)
    out.push_back(from_json(list[i]));
  return out;
}

} // namespace

std::string step_to_line(const model::Step& step) {
  ojson out = {{"index", step.index}};
  if (step.planned_during >= 0) out["planned_during"] = step.planned_during;
  put_list(out, "new_requests", step.new_requests, new_to_json);
  put_list(out, "cached_requests", step.cached_requests, cached_to_json);
  put_list(out, "scheduled", step.scheduled, scheduled_to_json);
  if (!step.preempted_req_ids.empty()) out["preempted_req_ids"] = step.preempted_req_ids;
  if (!step.finished_req_ids.empty()) out["finished_req_ids"] = step.finished_req_ids;
  if (step.reset_prefix_cache) out["reset_prefix_cache"] = true;
  put_list(out, "block_copies", step.block_copies, [](const model::BlockCopy& c) {
    return ojson::array({c.group, c.src, c.dst});
  });
  if (!step.expect.empty()) out["expect"] = expect_to_json(step.expect);
  // Invalid UTF-8 in a request id is replaced, never a throw while writing; the checker
  // rejects control characters before this is reached.
  return out.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

model::Step step_from_json(const Field& root, std::size_t num_groups,
                           std::int32_t derived_vocab_size, std::int32_t version,
                           std::size_t attention_groups) {
  if (version >= kTraceFormatVersionCopies)
    root.expect_object({"index", "planned_during", "new_requests", "cached_requests", "scheduled",
                        "preempted_req_ids", "finished_req_ids", "reset_prefix_cache",
                        "block_copies", "expect"});
  else if (version >= kTraceFormatVersionAsync)
    root.expect_object({"index", "planned_during", "new_requests", "cached_requests", "scheduled",
                        "preempted_req_ids", "finished_req_ids", "reset_prefix_cache", "expect"});
  else if (version >= kTraceFormatVersionExpect)
    root.expect_object({"index", "new_requests", "cached_requests", "scheduled",
                        "preempted_req_ids", "finished_req_ids", "reset_prefix_cache", "expect"});
  else
    root.expect_object({"index", "new_requests", "cached_requests", "scheduled",
                        "preempted_req_ids", "finished_req_ids", "reset_prefix_cache"});
  model::Step step{.index = root["index"].integer(0, kStepIndexMax)};
  if (root.has("planned_during"))
    step.planned_during = root["planned_during"].integer(0, kStepIndexMax);
  step.new_requests =
      list_from_json<model::NewRequestData>(root, "new_requests", [&](const Field& f) {
        return new_from_json(f, num_groups, derived_vocab_size, attention_groups);
      });
  step.cached_requests =
      list_from_json<model::CachedRequestData>(root, "cached_requests", [&](const Field& f) {
        return cached_from_json(f, num_groups, version, attention_groups);
      });
  step.scheduled = list_from_json<model::ScheduledRequest>(root, "scheduled", scheduled_from_json);
  const auto id = [](const Field& f) { return f.string(kReqIdBytesMax); };
  step.preempted_req_ids = list_from_json<model::RequestId>(root, "preempted_req_ids", id);
  step.finished_req_ids = list_from_json<model::RequestId>(root, "finished_req_ids", id);
  step.reset_prefix_cache = root.has("reset_prefix_cache") && root["reset_prefix_cache"].boolean();
  step.block_copies = list_from_json<model::BlockCopy>(root, "block_copies", [&](const Field& f) {
    // [group, source block, destination block]; the blocks are checked against the pool later.
    const std::vector<std::int32_t> v = f.int32_list(0, kInt32Max, 3);
    if (v.size() != 3) f.fail("expected [group, source block, destination block]");
    if (static_cast<std::size_t>(v[0]) >= num_groups)
      f.fail("group {} of a copy: the layout has {} groups", v[0], num_groups);
    return model::BlockCopy{.group = v[0], .src = v[1], .dst = v[2]};
  });
  if (root.has("expect")) {
    step.expect = expect_from_json(root["expect"], num_groups);
    check_expectations(step);
  }
  return step;
}

void check_expectations(const model::Step& step) {
  for (std::size_t i = 0; i < step.expect.size(); ++i) {
    const std::string& id = step.expect[i].req_id;
    const bool scheduled =
        std::any_of(step.scheduled.begin(), step.scheduled.end(),
                    [&](const model::ScheduledRequest& r) { return r.req_id == id; });
    if (!scheduled) fail_field("expect." + id, "request '{}' is not scheduled in this step", id);
    for (std::size_t j = 0; j < i; ++j)
      if (step.expect[j].req_id == id) fail_field("expect." + id, "named twice");
  }
}

} // namespace mc::scenarios
