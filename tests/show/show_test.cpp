// Golden structure of the pictures: for known small cases the HTML holds the labels, cells,
// arrows and grids it must (a label or an arrow that goes missing fails a test), counted
// exactly.
#include "show/engine_view.h"
#include "show/kernel_view.h"
#include "show/pictures.h"

#include "model/layout.h"
#include "oracle/launch.h"

#include <gtest/gtest.h>

#include <string>

namespace mc::show {
namespace {

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

// One mamba2-like group (a conv and a temporal state per layer), 2 layers, SD conv.
model::LaunchCase small_batch_copy() {
  model::GroupSpec g{.name = "g",
                     .family = model::Family::mamba2,
                     .params = {.intermediate_size = 4, .n_groups = 1, .num_heads = 2,
                                .head_dim = 2, .state_size = 2, .conv_kernel = 4},
                     .num_layers = 2,
                     .conv_elem_size = 2,
                     .temporal_elem_size = 4};
  model::CacheConfig config{.mamba_block_size = 4, .attn_block_size = 2, .num_spec_tokens = 2,
                            .num_spec_blocks = 2};
  model::LaunchCase c;
  c.layout = model::build_layout(config, model::LayoutSpec{.groups = {g}, .num_blocks = 16});
  c.kind = model::LaunchKind::batch_copy;
  c.num_reqs = 2;
  c.num_slots = 2;
  for (const model::ArenaSpec& a : c.layout.arenas) {
    c.arenas.emplace_back(a.size_bytes());
    c.arenas.back().poison();
  }
  model::BlockTable t = model::BlockTable::make(2, 4, 4);
  const std::int32_t rows[2][4] = {{5, 6, 0, -1}, {7, 7, 8, -1}};
  for (std::int32_t r = 0; r < 2; ++r)
    for (std::int32_t col = 0; col < 4; ++col)
      t.at(r, col) = rows[r][col];
  c.block_tables.groups.push_back(t);
  c.requests.src_col = {0, -1};
  c.requests.token_bias = {1, 0};
  c.requests.state_idx = {1, 0};
  return c;
}

TEST(ShowKernel, TablesArrowsAliasesAndBytes) {
  const model::LaunchCase c = small_batch_copy();
  const model::LaunchResult expected = oracle::run_launch(c);
  ASSERT_EQ(expected.decisions.size(), 4u); // row 0: conv and temporal of two layers
  model::LaunchResult actual = expected.clone();
  // One wrong byte in the destination block (6) of tensor 0 (group 0 layer 0 conv).
  const model::StateTensor& t0 = c.layout.tensors[0];
  actual.arenas[static_cast<std::size_t>(t0.arena)].data()[t0.block_offset_bytes(6) + 1] ^=
      std::byte{0xff};
  // And a decision that writes the wrong column.
  actual.decisions[1].dst_col = 2;
  const std::string html = kernel_report_html({.launch = c,
                                               .expected = expected,
                                               .actual = &actual,
                                               .actual_name = "test backend",
                                               .header = {.title = "tiny", .reproduce = "repro"}});
  EXPECT_TRUE(html.starts_with("<!DOCTYPE html>"));
  EXPECT_EQ(count(html, "<script"), 1u);
  EXPECT_EQ(count(html, "http"), 0u); // self-contained: nothing fetched
  EXPECT_EQ(count(html, "id=\"legend\""), 1u);
  EXPECT_EQ(count(html, ">the null block (0)<"), 1u);
  EXPECT_EQ(count(html, "<dt>reproduce</dt><dd class=\"mono\">repro</dd>"), 1u);
  // Rows: labels, the copy of row 0, no copy in row 1, its alias.
  EXPECT_EQ(count(html, ">row 0 \u00b7 slot 0<"), 1u);
  EXPECT_EQ(count(html, ">row 1 \u00b7 slot 1<"), 1u);
  EXPECT_EQ(count(html, ">expected: col 0+1 -&gt; 1 (4 states)<"), 1u);
  EXPECT_EQ(count(html, ">expected: no copy<"), 1u);
  EXPECT_EQ(count(html, ">aliases a block in two columns<"), 1u);
  EXPECT_EQ(count(html, "class=\"blk alias\""), 2u); // block 7 in columns 0 and 1 of row 1
  // Cells: 8 columns in all, one null block, two pad slots.
  EXPECT_EQ(count(html, "data-t=\"column "), 8u);
  EXPECT_EQ(count(html, ">null</text>"), 1u);
  EXPECT_EQ(count(html, ">pad</text>"), 2u);
  // Arrows: expected conv (column 0) and temporal (column 0 + 1) into column 1; the actual
  // decisions differ, so theirs are drawn dashed below: conv 0 -> 1, layer 0's temporal
  // 1 -> 2 (the wrong column) and layer 1's temporal 1 -> 1.
  EXPECT_EQ(count(html, "class=\"arr exp\""), 2u);
  EXPECT_EQ(count(html, "class=\"arr act\""), 3u);
  EXPECT_EQ(count(html, ">c+1</text>"), 2u);
  EXPECT_EQ(count(html, ">t+1</text>"), 3u);
  EXPECT_EQ(count(html, "marker-end=\"url(#ah-exp)\""), 2u);
  EXPECT_EQ(count(html, "class=\"rowbad\""), 2u); // the legend's swatch and row 0
  // The byte grid of tensor 0, block 6: one element of 2 bytes differs, axes as the text report.
  EXPECT_EQ(count(html, "id=\"bytes-t0-b6\""), 1u);
  EXPECT_EQ(count(html, "1 (tensor, block) pair differs"), 1u);
  EXPECT_EQ(count(html, "class=\"be\""), 2u); // the legend's swatch and the element
  EXPECT_EQ(count(html, "class=\"ba\""), 2u);
  EXPECT_EQ(count(html, "token row \u2193"), 2u);
  EXPECT_EQ(count(html, "channel \u2192"), 2u);
  EXPECT_EQ(count(html, ">actual (test backend)<"), 2u); // the arrow note and the grid
}

TEST(ShowKernel, WithoutABackendOnlyTheOracleIsDrawn) {
  const model::LaunchCase c = small_batch_copy();
  const std::string html = kernel_picture(c, {}, {}, "none", {.title = "oracle only"});
  EXPECT_EQ(count(html, "class=\"arr exp\""), 2u);
  EXPECT_EQ(count(html, "class=\"arr act\""), 0u);
  EXPECT_EQ(count(html, "the backend was not run"), 1u);
  EXPECT_EQ(count(html, "class=\"grid\""), 0u);
}

TEST(ShowKernel, RowsAlikeCollapse) {
  model::LaunchCase c = small_batch_copy();
  // Row 1 made like row 0 in all but its blocks: one row drawn, "1 rows like this: 1".
  c.block_tables.groups[0].at(1, 0) = 9;
  c.block_tables.groups[0].at(1, 1) = 10;
  c.block_tables.groups[0].at(1, 2) = 0;
  c.requests.src_col = {0, 0};
  c.requests.state_idx = {1, 1};
  c.requests.token_bias = {1, 1};
  const model::LaunchResult expected = oracle::run_launch(c);
  const std::string html = kernel_report_html({.launch = c, .expected = expected});
  EXPECT_EQ(count(html, ">row 0 \u00b7 slot 0<"), 1u);
  EXPECT_EQ(count(html, ">row 1 \u00b7 slot 1<"), 0u);
  EXPECT_EQ(count(html, ">1 rows like this: 1<"), 1u);
}

TEST(ShowEngine, LibraryScenarioAgainstAKernelMutant) {
  EnginePictureOptions o;
  o.replay.kernel_mutant = gpu::Mutant::ds_tail_ignores_bias;
  o.header.title = "engine";
  const std::string html = engine_picture(
      std::string(MC_SOURCE_DIR) + "/scenarios/library/e-ds-with-bias.jsonl", o);
  // 14 steps (the oracle's views go on past the backend's difference), 3 request lanes.
  EXPECT_EQ(count(html, "class=\"steppanel\""), 14u);
  EXPECT_EQ(count(html, "class=\"stepcol"), 14u);
  EXPECT_EQ(count(html, "class=\"stepcol failcol\" data-step=\"2\""), 1u);
  EXPECT_EQ(count(html, "data-initial-step=\"2\""), 1u);
  EXPECT_EQ(count(html, "<a href=\"#bytes\">"), 1u);
  EXPECT_EQ(count(html, "first difference</text>"), 1u);
  for (const char* lane : {">a</text>", ">b</text>", ">c</text>"})
    EXPECT_EQ(count(html, lane), 1u) << lane;
  EXPECT_GT(count(html, "class=\"arr pre\""), 0u);
  EXPECT_GT(count(html, "class=\"arr post\""), 0u);
  EXPECT_EQ(count(html, ">step 2 (the first difference)</h3>"), 1u);
  EXPECT_EQ(count(html, "MISMATCH at step 2 (line 4)"), 2u); // header and outcome
  EXPECT_EQ(count(html, "id=\"bytes-t0-b2\""), 1u);
  EXPECT_EQ(count(html, "channel \u2193"), 2u); // DS conv: channel rows, token columns
}

TEST(ShowEngine, CleanReplayHasNoFailure) {
  EnginePictureOptions o;
  const std::string html = engine_picture(
      std::string(MC_SOURCE_DIR) + "/scenarios/library/d-null-and-pad.jsonl", o);
  EXPECT_EQ(count(html, "failcol\" data-step"), 0u);
  EXPECT_EQ(count(html, "every step held: no bytes differ"), 1u);
  EXPECT_EQ(count(html, "class=\"steppanel\""), 8u);
}

TEST(ShowHtml, EscapesAndRanges) {
  EXPECT_EQ(escape("<a href=\"x\">&'\x01"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;\\x01");
  const std::int64_t values[] = {1, 2, 3, 5, 7, 8};
  EXPECT_EQ(ranges_text(values), "1-3, 5, 7-8");
  EXPECT_EQ(ranges_text(values, 2), "1-3, 5, ...");
}

} // namespace
} // namespace mc::show
