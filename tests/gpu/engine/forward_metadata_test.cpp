// The forward's metadata: the capture sizes, the GPU side's builder on hand-made batches
// (align and all mode, the split, the window, padding and its persistent rows), the oracle's
// derivation agreeing with it, and the comparison naming the row and the field.
#include "gpu/engine/forward_metadata.h"
#include "gpu/engine/runner_mutant.h"
#include "model/forward_metadata.h"
#include "oracle/engine/forward_metadata.h"

#include <gtest/gtest.h>

#include <vector>

namespace mc {
namespace {

model::CacheConfig align_config(std::int32_t num_spec) {
  model::CacheConfig c;
  c.mode = model::CacheMode::align;
  c.mamba_block_size = 4;
  c.num_spec_tokens = num_spec;
  c.num_spec_blocks = num_spec;
  return c;
}

TEST(ForwardMetadata, CaptureSizes) {
  EXPECT_EQ(model::cuda_graph_batch_size(1), 1);
  EXPECT_EQ(model::cuda_graph_batch_size(3), 4);
  EXPECT_EQ(model::cuda_graph_batch_size(5), 8);
  EXPECT_EQ(model::cuda_graph_batch_size(249), 256);
  EXPECT_EQ(model::cuda_graph_batch_size(257), 272);
  EXPECT_EQ(model::cuda_graph_batch_size(512), 512);
  EXPECT_EQ(model::cuda_graph_batch_size(513), std::nullopt);
  EXPECT_EQ(model::cuda_graph_capture_sizes().size(), 51u);
}

// Three rows, batch order: a prefill chunk, a decode with 2 drafts, a decode without.
struct Batch {
  model::GroupBlockIds r0{{7, 8, 9}}, r1{{1, 2, 3, 4, 5}}, r2{{11, 12, 13, 14}};
  model::ScheduledRequest s0{.req_id = "a", .num_scheduled_tokens = 3},
      s1{.req_id = "b", .num_scheduled_tokens = 3, .num_draft_tokens = 2},
      s2{.req_id = "c", .num_scheduled_tokens = 1};
  std::vector<gpu::engine::MetadataInput> gpu_inputs() const {
    return {{.num_computed = 5, .num_scheduled = 3, .row = &r0},
            {.num_computed = 6, .num_scheduled = 3, .num_draft = 2, .num_accepted = 2, .row = &r1},
            {.num_computed = 8, .num_scheduled = 1, .num_accepted = 3, .row = &r2}};
  }
  std::vector<oracle::engine::ForwardRow> oracle_rows() const {
    return {{.scheduled = &s0, .num_computed = 5, .row = &r0},
            {.scheduled = &s1, .num_computed = 6, .num_accepted = 2, .row = &r1},
            {.scheduled = &s2, .num_computed = 8, .num_accepted = 3, .row = &r2}};
  }
};

TEST(ForwardMetadata, AlignSplitsDecodesFirstWithTheirWindows) {
  const Batch batch;
  const gpu::engine::RunnerDecisions clean;
  gpu::engine::MetadataBuilder builder(align_config(2), 1, clean);
  const std::vector<gpu::engine::MetadataInput> in = batch.gpu_inputs();
  const model::ForwardMetadata md = builder.build(in);
  EXPECT_EQ(md.num_decodes, 2);
  EXPECT_EQ(md.num_prefills, 1);
  EXPECT_EQ(md.num_padded, 0); // a step with a prefill runs eagerly
  ASSERT_EQ(md.rows.size(), 3u);
  // Decode b: seq_len 9, window from (9 - 1) // 4 = 2: columns 2..4.
  EXPECT_EQ(md.rows[0].batch_row, 1);
  EXPECT_EQ(md.rows[0].window_start, 2);
  EXPECT_EQ(md.rows[0].state_indices, (std::vector<std::vector<std::int32_t>>{{3, 4, 5}}));
  EXPECT_EQ(md.rows[0].num_accepted, 2);
  // Decode c: seq_len 9, columns 2..4, the last past its row of 4: the table's padding.
  EXPECT_EQ(md.rows[1].batch_row, 2);
  EXPECT_EQ(md.rows[1].state_indices, (std::vector<std::vector<std::int32_t>>{{13, 14, -1}}));
  EXPECT_EQ(md.rows[1].num_accepted, 3);
  // The prefill: seq_len 8, column 1 alone, no count.
  EXPECT_EQ(md.rows[2].batch_row, 0);
  EXPECT_FALSE(md.rows[2].decode);
  EXPECT_EQ(md.rows[2].state_indices, (std::vector<std::vector<std::int32_t>>{{8}}));
  EXPECT_EQ(md.rows[2].num_accepted, 0);
  const std::vector<oracle::engine::ForwardRow> rows = batch.oracle_rows();
  EXPECT_EQ(oracle::engine::derive_forward_metadata(align_config(2), rows), md);
}

TEST(ForwardMetadata, AllModeBlockIndices) {
  const Batch batch;
  model::CacheConfig config = align_config(2);
  config.mode = model::CacheMode::all;
  const gpu::engine::RunnerDecisions clean;
  gpu::engine::MetadataBuilder builder(config, 1, clean);
  const std::vector<gpu::engine::MetadataInput> in = batch.gpu_inputs();
  const model::ForwardMetadata md = builder.build(in);
  ASSERT_EQ(md.rows.size(), 3u);
  // Decode c: c = 8, seq_len 9: last computed cdiv(8, 4) - 1 = 1, first scheduled
  // cdiv(9, 4) - 1 = 2, last scheduled 2; the whole row.
  EXPECT_EQ(md.rows[1].block_idx_last_computed, 1);
  EXPECT_EQ(md.rows[1].block_idx_first_scheduled, 2);
  EXPECT_EQ(md.rows[1].block_idx_last_scheduled, 2);
  EXPECT_EQ(md.rows[1].state_indices, batch.r2);
  // No row keeps a record: every anchor is the fallback (c - 1) // 4 (b, c and a: 1, 1, 1).
  for (const model::ForwardMetadataRow& r : md.rows)
    EXPECT_EQ(r.block_idx_prev_step, 1);
  std::vector<oracle::engine::ForwardRow> rows = batch.oracle_rows();
  for (oracle::engine::ForwardRow& r : rows)
    r.anchor = 1;
  EXPECT_EQ(oracle::engine::derive_forward_metadata(config, rows), md);
  // The off-by-one mutant: the block of the last computed token, 1, named by the comparison.
  const std::unique_ptr<gpu::engine::RunnerDecisions> off =
      gpu::engine::make_runner_decisions(gpu::engine::RunnerMutant::first_scheduled_block_off_by_one);
  gpu::engine::MetadataBuilder wrong(config, 1, *off);
  const std::optional<model::MetadataDifference> d =
      model::first_metadata_difference(wrong.build(in), md);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->row, 1);
  EXPECT_EQ(d->batch_row, 2);
  EXPECT_EQ(d->field, "block_idx_first_scheduled");
  EXPECT_EQ(d->a, "1");
  EXPECT_EQ(d->b, "2");
}

// vLLM's numbers (#41233): B = 4, 3 drafts, a 6-token prefill, then a full decode that
// accepted 2. The next decode (c = 8) anchors at the record (6 + 4 - 1) // 4 = 2; without the
// record the builder falls back to (8 - 1) // 4 = 1. A decode-only batch of one row runs as a
// graph of one: no padding. Without spec decode there is no anchor.
TEST(ForwardMetadata, AllModeAnchorIsTheRecordElseTheFallback) {
  model::CacheConfig config = align_config(3);
  config.mode = model::CacheMode::all;
  const gpu::engine::RunnerDecisions clean;
  const model::GroupBlockIds row{{1, 2, 3, 4, 5, 6, 7}};
  gpu::engine::MetadataInput in{
      .num_computed = 8, .num_scheduled = 4, .num_draft = 3, .num_accepted = 2, .row = &row};
  in.all_record = 2;
  gpu::engine::MetadataBuilder builder(config, 1, clean);
  EXPECT_EQ(builder.build(std::span(&in, 1)).rows.at(0).block_idx_prev_step, 2);
  in.all_record = -1;
  EXPECT_EQ(builder.build(std::span(&in, 1)).rows.at(0).block_idx_prev_step, 1);
  config.num_spec_tokens = 0;
  config.num_spec_blocks = 0;
  in.num_scheduled = 1;
  in.num_draft = 0;
  gpu::engine::MetadataBuilder plain(config, 1, clean);
  EXPECT_EQ(plain.build(std::span(&in, 1)).rows.at(0).block_idx_prev_step, -1);
}

// Padding rows of an all-mode graph step anchor at 0 (graph capture zero-fills the tail), on
// both sides.
TEST(ForwardMetadata, AllModePaddingRowsAnchorAtZero) {
  model::CacheConfig config = align_config(2);
  config.mode = model::CacheMode::all;
  const gpu::engine::RunnerDecisions clean;
  const model::GroupBlockIds r1{{1, 2, 3, 4, 5}}, r2{{6, 7, 8, 9, 10}}, r3{{11, 12, 13, 14, 15}};
  const std::vector<gpu::engine::MetadataInput> in{
      {.num_computed = 9, .num_scheduled = 1, .all_record = 2, .row = &r1},
      {.num_computed = 5, .num_scheduled = 1, .row = &r2},
      {.num_computed = 6, .num_scheduled = 1, .row = &r3}};
  gpu::engine::MetadataBuilder builder(config, 1, clean);
  const model::ForwardMetadata md = builder.build(in);
  ASSERT_EQ(md.num_padded, 1);
  EXPECT_EQ(md.rows[0].block_idx_prev_step, 2);
  EXPECT_EQ(md.rows[1].block_idx_prev_step, 1);
  EXPECT_EQ(md.rows[2].block_idx_prev_step, 1);
  EXPECT_EQ(md.rows[3].block_idx_prev_step, 0);
  const model::ScheduledRequest s{.req_id = "x", .num_scheduled_tokens = 1};
  const std::vector<oracle::engine::ForwardRow> rows{
      {.scheduled = &s, .num_computed = 9, .anchor = 2, .row = &r1},
      {.scheduled = &s, .num_computed = 5, .anchor = 1, .row = &r2},
      {.scheduled = &s, .num_computed = 6, .anchor = 1, .row = &r3}};
  EXPECT_EQ(oracle::engine::derive_forward_metadata(config, rows), md);
}

// A padded prompt tail (#55178): the prompt's last token (c = 8 of 9) with two placeholder
// drafts. The clean builder makes it a decode by its shape, as the oracle does; the mutant
// that classifies rows holding a prompt token as prefills makes it a prefill, and the
// comparison names the field. A row of the same shape past the prompt is a decode for both.
TEST(ForwardMetadata, APaddedPromptTailIsADecode) {
  const model::GroupBlockIds row{{1, 2, 3, 4, 5}};
  gpu::engine::MetadataInput in{
      .num_computed = 8, .num_scheduled = 3, .num_draft = 2, .prompt_token = true, .row = &row};
  const gpu::engine::RunnerDecisions clean;
  gpu::engine::MetadataBuilder builder(align_config(2), 1, clean);
  const model::ForwardMetadata md = builder.build(std::span(&in, 1));
  EXPECT_EQ(md.num_decodes, 1);
  const model::ScheduledRequest s{.req_id = "t", .num_scheduled_tokens = 3, .num_draft_tokens = 2};
  const oracle::engine::ForwardRow fr{.scheduled = &s, .num_computed = 8, .row = &row};
  EXPECT_EQ(oracle::engine::derive_forward_metadata(align_config(2), std::span(&fr, 1)), md);
  const std::unique_ptr<gpu::engine::RunnerDecisions> mutant =
      gpu::engine::make_runner_decisions(gpu::engine::RunnerMutant::padded_tail_as_prefill);
  gpu::engine::MetadataBuilder wrong(align_config(2), 1, *mutant);
  const model::ForwardMetadata bad = wrong.build(std::span(&in, 1));
  EXPECT_EQ(bad.num_prefills, 1);
  const std::optional<model::MetadataDifference> d = model::first_metadata_difference(bad, md);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->field, "num_decodes");
  in.prompt_token = false;
  EXPECT_EQ(wrong.build(std::span(&in, 1)).num_decodes, 1);
}

// A decode that drafted nothing, after a step that accepted 2 tokens, keeps its count: the
// forward reads entry 1 of its window. The runner that sends zero-draft rows off the spec path
// (vLLM before #56531) drops the count, and the comparison names the field; a row with drafts
// keeps it under both.
TEST(ForwardMetadata, AZeroDraftDecodeKeepsItsAcceptedCount) {
  const model::GroupBlockIds row{{1, 2, 3, 4, 5}};
  gpu::engine::MetadataInput in{
      .num_computed = 9, .num_scheduled = 1, .num_draft = 0, .num_accepted = 2, .row = &row};
  const gpu::engine::RunnerDecisions clean;
  gpu::engine::MetadataBuilder builder(align_config(2), 1, clean);
  const model::ForwardMetadata md = builder.build(std::span(&in, 1));
  ASSERT_EQ(md.num_decodes, 1);
  EXPECT_EQ(md.rows[0].num_accepted, 2);
  const model::ScheduledRequest s{.req_id = "t", .num_scheduled_tokens = 1, .num_draft_tokens = 0};
  const oracle::engine::ForwardRow fr{
      .scheduled = &s, .num_computed = 9, .num_accepted = 2, .row = &row};
  EXPECT_EQ(oracle::engine::derive_forward_metadata(align_config(2), std::span(&fr, 1)), md);
  const std::unique_ptr<gpu::engine::RunnerDecisions> mutant =
      gpu::engine::make_runner_decisions(gpu::engine::RunnerMutant::zero_draft_rows_off_spec_path);
  gpu::engine::MetadataBuilder wrong(align_config(2), 1, *mutant);
  const model::ForwardMetadata bad = wrong.build(std::span(&in, 1));
  EXPECT_EQ(bad.rows[0].num_accepted, 0);
  const std::optional<model::MetadataDifference> d = model::first_metadata_difference(bad, md);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->field, "num_accepted");
  in.num_scheduled = 2;
  in.num_draft = 1;
  EXPECT_EQ(wrong.build(std::span(&in, 1)).rows[0].num_accepted, 2);
}

// Two rows of 1 + 3 tokens, one a prefill chunk: the clean builder splits a decode and a
// prefill and the step runs eagerly; dispatched by shape (vLLM #55766) it replays the graph
// for 2 on what the last graph step (two decodes of other requests) left in the buffers.
TEST(ForwardMetadata, AGraphShapedBatchWithAPrefillRunsEagerly) {
  const model::GroupBlockIds old_rows[2] = {{{11, 12, 13, 14, 15, 16}}, {{21, 22, 23, 24, 25, 26}}};
  const model::GroupBlockIds rows[2] = {{{1, 2, 3, 4, 5, 6}}, {{7, 8, 9, 10, 11, 12}}};
  const std::vector<gpu::engine::MetadataInput> decodes{{.num_computed = 5,
                                                         .num_scheduled = 4,
                                                         .num_draft = 3,
                                                         .num_accepted = 2,
                                                         .row = &old_rows[0]},
                                                        {.num_computed = 6,
                                                         .num_scheduled = 4,
                                                         .num_draft = 3,
                                                         .num_accepted = 3,
                                                         .row = &old_rows[1]}};
  const std::vector<gpu::engine::MetadataInput> mixed{
      {.num_computed = 9, .num_scheduled = 4, .num_draft = 3, .num_accepted = 1, .row = &rows[0]},
      {.num_computed = 8,
       .num_scheduled = 4,
       .num_draft = 0,
       .prompt_token = true,
       .row = &rows[1]}};
  for (const auto mutant :
       {gpu::engine::RunnerMutant::none, gpu::engine::RunnerMutant::graph_dispatch_by_shape}) {
    const std::unique_ptr<gpu::engine::RunnerDecisions> decisions =
        gpu::engine::make_runner_decisions(mutant);
    gpu::engine::MetadataBuilder builder(align_config(3), 1, *decisions);
    const model::ForwardMetadata graph = builder.build(decodes);
    ASSERT_EQ(graph.num_decodes, 2);
    ASSERT_EQ(graph.rows[1].state_indices,
              (std::vector<std::vector<std::int32_t>>{{23, 24, 25, 26}}));
    const model::ForwardMetadata md = builder.build(mixed);
    if (mutant == gpu::engine::RunnerMutant::none) {
      EXPECT_EQ(md.num_decodes, 1);
      EXPECT_EQ(md.num_prefills, 1);
      EXPECT_EQ(md.num_padded, 0);
      EXPECT_EQ(md.rows[1].state_indices, (std::vector<std::vector<std::int32_t>>{{9}}));
    } else {
      EXPECT_EQ(md.num_decodes, 2);
      EXPECT_EQ(md.num_prefills, 0);
      ASSERT_EQ(md.rows.size(), 2U);
      EXPECT_EQ(md.rows[1].batch_row, 1);
      EXPECT_TRUE(md.rows[1].decode);
      EXPECT_EQ(md.rows[1].state_indices,
                (std::vector<std::vector<std::int32_t>>{{23, 24, 25, 26}}));
      EXPECT_EQ(md.rows[1].num_accepted, 3);
    }
  }
}

TEST(ForwardMetadata, PaddingRowsCarryTheNullBlockAfterALargerBatch) {
  model::GroupBlockIds rows[5] = {{{1}}, {{2}}, {{3}}, {{4}}, {{5}}};
  std::vector<gpu::engine::MetadataInput> five, three;
  for (int i = 0; i < 5; ++i)
    five.push_back({.num_computed = 2, .num_scheduled = 1, .row = &rows[i]});
  three.assign(five.begin(), five.begin() + 3);
  for (const auto mutant : {gpu::engine::RunnerMutant::none,
                            gpu::engine::RunnerMutant::padded_rows_stale_index}) {
    const std::unique_ptr<gpu::engine::RunnerDecisions> decisions =
        gpu::engine::make_runner_decisions(mutant);
    gpu::engine::MetadataBuilder builder(align_config(0), 1, *decisions);
    const model::ForwardMetadata first = builder.build(five); // padded to 8
    EXPECT_EQ(first.num_padded, 3);
    EXPECT_EQ(first.rows[5].state_indices, (std::vector<std::vector<std::int32_t>>{{0}}));
    const model::ForwardMetadata second = builder.build(three); // padded to 4
    ASSERT_EQ(second.num_padded, 1);
    EXPECT_EQ(second.rows[3].batch_row, -1);
    // The clean builder nulls the padding row; the mutant leaves the 4th row of the step before.
    EXPECT_EQ(second.rows[3].state_indices,
              (std::vector<std::vector<std::int32_t>>{
                  {mutant == gpu::engine::RunnerMutant::none ? 0 : 4}}));
  }
}

} // namespace
} // namespace mc
