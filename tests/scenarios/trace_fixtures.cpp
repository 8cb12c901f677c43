// Fixtures of the trace tests (see trace_fixtures.h).
#include "trace_fixtures.h"

#include "model/presets.h"

#include <gtest/gtest.h>

#include <sstream>

namespace mc::scenarios::testing {

namespace {
model::CacheConfig tiny_config() {
  return {.mamba_block_size = 4, .attn_block_size = 2, .num_spec_tokens = 2, .num_spec_blocks = 2};
}
} // namespace

TraceHeader mixed_header() {
  return {.config = tiny_config(),
          .preset = "tiny-mixed",
          .layout_spec = model::find_preset("tiny-mixed").spec,
          .block_pool_sizes = {32, 20, 16},
          .source = {{"recorder", "hand"}, {"note", "three groups"}}};
}

TraceHeader mamba2_header() {
  return {.config = tiny_config(),
          .preset = "tiny-mamba2",
          .layout_spec = model::find_preset("tiny-mamba2").spec,
          .block_pool_sizes = {32}};
}

std::vector<model::Step> hand_built_steps() {
  using model::Step;
  std::vector<Step> steps;
  // 0: two arrivals; "a" a plain chunked prefill, "b" with a one-block prefix hit.
  steps.push_back(
      Step{.index = 0,
           .new_requests = {{.req_id = "a",
                             .prompt_token_ids = {1, 2, 3, 4, 5, 6, 7, 8, 9},
                             .block_ids = {{1, 2, 3}, {1, 2, 3}, {1, 2, 3}}},
                            {.req_id = "b",
                             .prompt_token_ids = {1, 2, 3, 4, 50, 51},
                             .block_ids = {{0, 4, 5, 6}, {0, 4, 5, 6}, {0, 4, 5, 6}},
                             .num_computed_tokens = 4}},
           .scheduled = {
               {.req_id = "a", .num_scheduled_tokens = 8, .token_ids = {1, 2, 3, 4, 5, 6, 7, 8}},
               {.req_id = "b", .num_scheduled_tokens = 2, .token_ids = {50, 51}}}});
  // 1: "a" finishes its prompt, "b" decodes with two drafts, one accepted.
  steps.push_back(
      Step{.index = 1,
           .cached_requests =
               {{.req_id = "a", .new_block_ids = {{7}, {7}, {7}}, .num_computed_tokens = 8},
                {.req_id = "b", .new_block_ids = {{}, {}, {}}, .num_computed_tokens = 6}},
           .scheduled = {{.req_id = "b",
                          .num_scheduled_tokens = 3,
                          .num_draft_tokens = 2,
                          .token_ids = {60, 61, 62},
                          .num_accepted_tokens = 2},
                         {.req_id = "a", .num_scheduled_tokens = 1, .token_ids = {9}}}});
  // 3 (a gap): "a" decodes with one draft accepted in full; "b" is preempted; "c" arrives.
  steps.push_back(Step{
      .index = 3,
      .new_requests = {{.req_id = "c",
                        .prompt_token_ids = {2147483647, 0},
                        .block_ids = {{8, 9, 10}, {8, 9, 10}, {8, 9, 10}}}},
      .cached_requests = {{.req_id = "a", .new_block_ids = {{}, {}, {}}, .num_computed_tokens = 9}},
      .scheduled = {{.req_id = "a",
                     .num_scheduled_tokens = 2,
                     .num_draft_tokens = 1,
                     .token_ids = {70, 71},
                     .num_accepted_tokens = 2},
                    {.req_id = "c", .num_scheduled_tokens = 2, .token_ids = {2147483647, 0}}},
      .preempted_req_ids = {"b"}});
  // 4: the prefix cache is reset: "b" and "c" come back resumed with whole new tables, "a"
  // waits (it must come back resumed too).
  steps.push_back(Step{
      .index = 4,
      .cached_requests = {{.req_id = "b",
                           .resumed = true,
                           .new_block_ids = {{0, 11, 12, 13}, {0, 11, 12, 13}, {0, 11, 12, 13}},
                           .num_computed_tokens = 0},
                          {.req_id = "c",
                           .resumed = true,
                           .new_block_ids = {{14, 15, 16}, {14, 15, 16}, {14, 15, 15}},
                           .num_computed_tokens = 0}},
      .scheduled = {{.req_id = "c", .num_scheduled_tokens = 2, .token_ids = {2147483647, 0}},
                    {.req_id = "b", .num_scheduled_tokens = 4, .token_ids = {1, 2, 3, 4}}},
      .reset_prefix_cache = true});
  // 5: "a" finished (it was not rescheduled after the reset: aborted while waiting).
  steps.push_back(Step{.index = 5, .finished_req_ids = {"a"}});
  return steps;
}

void expect_same_step(const model::Step& want, const model::Step& got) {
  SCOPED_TRACE("step " + std::to_string(want.index));
  EXPECT_EQ(want.index, got.index);
  EXPECT_EQ(want.planned_during, got.planned_during);
  ASSERT_EQ(want.new_requests.size(), got.new_requests.size());
  for (std::size_t i = 0; i < want.new_requests.size(); ++i) {
    const auto& w = want.new_requests[i];
    const auto& g = got.new_requests[i];
    EXPECT_EQ(w.req_id, g.req_id);
    EXPECT_EQ(w.prompt_token_ids, g.prompt_token_ids);
    EXPECT_EQ(w.block_ids, g.block_ids);
    EXPECT_EQ(w.num_computed_tokens, g.num_computed_tokens);
  }
  ASSERT_EQ(want.cached_requests.size(), got.cached_requests.size());
  for (std::size_t i = 0; i < want.cached_requests.size(); ++i) {
    const auto& w = want.cached_requests[i];
    const auto& g = got.cached_requests[i];
    EXPECT_EQ(w.req_id, g.req_id);
    EXPECT_EQ(w.resumed, g.resumed);
    EXPECT_EQ(w.new_block_ids, g.new_block_ids);
    EXPECT_EQ(w.num_computed_tokens, g.num_computed_tokens);
    EXPECT_EQ(w.num_computed_tokens_optimistic, g.num_computed_tokens_optimistic);
  }
  ASSERT_EQ(want.scheduled.size(), got.scheduled.size());
  for (std::size_t i = 0; i < want.scheduled.size(); ++i) {
    const auto& w = want.scheduled[i];
    const auto& g = got.scheduled[i];
    EXPECT_EQ(w.req_id, g.req_id);
    EXPECT_EQ(w.num_scheduled_tokens, g.num_scheduled_tokens);
    EXPECT_EQ(w.num_draft_tokens, g.num_draft_tokens);
    EXPECT_EQ(w.token_ids, g.token_ids);
    EXPECT_EQ(w.num_accepted_tokens, g.num_accepted_tokens);
  }
  EXPECT_EQ(want.preempted_req_ids, got.preempted_req_ids);
  EXPECT_EQ(want.finished_req_ids, got.finished_req_ids);
  EXPECT_EQ(want.reset_prefix_cache, got.reset_prefix_cache);
}

void expect_same_header(const TraceHeader& want, const TraceHeader& got) {
  EXPECT_EQ(want.version, got.version);
  EXPECT_EQ(want.async_scheduling, got.async_scheduling);
  EXPECT_EQ(want.config.mamba_block_size, got.config.mamba_block_size);
  EXPECT_EQ(want.config.attn_block_size, got.config.attn_block_size);
  EXPECT_EQ(want.config.num_spec_tokens, got.config.num_spec_tokens);
  EXPECT_EQ(want.config.num_spec_blocks, got.config.num_spec_blocks);
  EXPECT_EQ(want.config.mode, got.config.mode);
  EXPECT_EQ(want.config.conv_layout, got.config.conv_layout);
  EXPECT_EQ(want.config.runner, got.config.runner);
  EXPECT_EQ(want.config.tp_size, got.config.tp_size);
  EXPECT_EQ(want.preset, got.preset);
  EXPECT_EQ(want.layout_spec.num_blocks, got.layout_spec.num_blocks);
  ASSERT_EQ(want.layout_spec.groups.size(), got.layout_spec.groups.size());
  for (std::size_t i = 0; i < want.layout_spec.groups.size(); ++i) {
    const model::GroupSpec& w = want.layout_spec.groups[i];
    const model::GroupSpec& g = got.layout_spec.groups[i];
    EXPECT_EQ(w.name, g.name);
    EXPECT_EQ(w.family, g.family);
    EXPECT_EQ(w.params.intermediate_size, g.params.intermediate_size);
    EXPECT_EQ(w.params.n_groups, g.params.n_groups);
    EXPECT_EQ(w.params.num_heads, g.params.num_heads);
    EXPECT_EQ(w.params.head_dim, g.params.head_dim);
    EXPECT_EQ(w.params.state_size, g.params.state_size);
    EXPECT_EQ(w.params.conv_kernel, g.params.conv_kernel);
    EXPECT_EQ(w.params.num_k_heads, g.params.num_k_heads);
    EXPECT_EQ(w.params.num_v_heads, g.params.num_v_heads);
    EXPECT_EQ(w.params.head_k_dim, g.params.head_k_dim);
    EXPECT_EQ(w.params.head_v_dim, g.params.head_v_dim);
    EXPECT_EQ(w.num_layers, g.num_layers);
    EXPECT_EQ(w.conv_elem_size, g.conv_elem_size);
    EXPECT_EQ(w.temporal_elem_size, g.temporal_elem_size);
    EXPECT_EQ(w.page_policy, g.page_policy);
    EXPECT_EQ(w.page_align_bytes, g.page_align_bytes);
  }
  EXPECT_EQ(want.block_pool_sizes, got.block_pool_sizes);
  EXPECT_EQ(want.derived_vocab_size, got.derived_vocab_size);
  EXPECT_EQ(want.source, got.source);
}

std::string write_to_string(const TraceHeader& header, const std::vector<model::Step>& steps) {
  std::ostringstream out;
  TraceWriter writer(out, "mem.jsonl", header);
  for (const model::Step& step : steps)
    writer.write(step);
  EXPECT_EQ(writer.steps_written(), static_cast<std::int64_t>(steps.size()));
  return out.str();
}

std::vector<model::Step> read_all(TraceReader& reader) {
  std::vector<model::Step> steps;
  while (std::optional<model::Step> step = reader.next())
    steps.push_back(std::move(*step));
  return steps;
}

} // namespace mc::scenarios::testing
