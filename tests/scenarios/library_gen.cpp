// Writes the scenario library (scenarios/library/*.jsonl): each scenario is a small run of the
// oracle's own engine, with hand-picked requests, options and step edits (a forced acceptance,
// a reset of the prefix cache), recorded with TraceWriter; its header's `source.scenario` says
// what it guards and which mutants it must catch (harness/library.h).
//
//   scenario_library_gen OUT_DIR          writes every scenario
//   scenario_library_gen OUT_DIR --check  writes nothing; exit 1 when a file in OUT_DIR differs
// The traces are deterministic, so the check (ctest scenarios.library_fresh) proves the
// committed files are what this program writes. The mutant lists are verified by
// harness_library_test (each scenario fails on each of its mutants).
#include "harness/scheduler_mutant.h"
#include "model/errors.h"
#include "model/presets.h"
#include "model/prng.h"
#include "oracle/engine/driver.h"
#include "scenarios/trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>

namespace {

using namespace mc;
using oracle::engine::RequestSpec;

struct Scenario {
  std::string name;
  char bug_class = 'X';
  std::string guards;
  std::vector<std::string> kernel_mutants;
  std::vector<std::string> runner_mutants;
  // Bugs of the scheduler or block manager: a replay judges the steps a trace holds, so these
  // are proven here, when the trace is written (and by scenarios.library_fresh): the same
  // scenario scheduled through the mutant's edit must end in a finding.
  std::vector<std::string> scheduler_mutants;
  std::string preset = "tiny-mamba2";
  std::function<void(model::CacheConfig&, model::LayoutSpec&)> tweak;
  oracle::engine::EngineOptions options;
  std::vector<RequestSpec> requests;
  std::int64_t steps = 200;
  bool must_finish = true; // every request finished within `steps`
  // Called before each step (may ask for a reset) and on the scheduled step (may edit it).
  std::function<void(oracle::engine::Engine&, std::int64_t)> before;
  std::function<void(model::Step&, const std::vector<RequestSpec>&)> edit;
  // Big offsets without a big generator: the engine runs on the tweaked layout's small pool,
  // and the trace names every real block id plus `block_id_offset` in a pool of
  // `trace_num_blocks` (inline layout, not the preset's). Replay follows the recorded ids.
  std::int32_t block_id_offset = 0;
  std::int64_t trace_num_blocks = 0;
};

// A request: `prompt_len` tokens whose first `shared` come from family `family` (same family,
// same tokens), then its own; `output_len` more tokens to generate; a few spare for drafts.
RequestSpec request(std::string id, std::int64_t arrival, std::int32_t prompt_len,
                    std::int32_t output_len, std::int32_t family = -1, std::int32_t shared = 0) {
  RequestSpec r{.req_id = id,
                .num_prompt_tokens = prompt_len,
                .max_len = prompt_len + output_len,
                .arrival_step = arrival};
  const auto own = static_cast<std::int32_t>(std::hash<std::string>{}(id) % 1000);
  for (std::int32_t i = 0; i < r.max_len + model::kSpecTokensMax + 2; ++i)
    r.tokens.push_back(i < shared ? (family * 37 + i * 11) % 509 : (own * 13 + i * 7 + 1) % 503);
  return r;
}

oracle::engine::EngineOptions small_options(std::int32_t budget = 16, std::int32_t running = 4) {
  oracle::engine::EngineOptions o;
  o.scheduler.token_budget = budget;
  o.scheduler.max_running = running;
  o.scheduler.full_drafts_per_million = 1'000'000;
  return o;
}

const RequestSpec& spec_of(const std::vector<RequestSpec>& requests, const std::string& id) {
  for (const RequestSpec& r : requests)
    if (r.req_id == id) return r;
  MC_ASSERT(false);
  return requests.front();
}

// Decode rows of request i accept 1 + (i + step) % (1 + drafts): every acceptance, in turn.
void cycle_acceptance(model::Step& step, const std::vector<RequestSpec>& requests) {
  std::unordered_map<std::string, std::int32_t> computed;
  for (const auto& c : step.cached_requests)
    computed[c.req_id] = c.num_computed_tokens;
  for (std::size_t i = 0; i < step.scheduled.size(); ++i) {
    model::ScheduledRequest& row = step.scheduled[i];
    if (row.num_draft_tokens == 0 || !computed.contains(row.req_id)) continue;
    const RequestSpec& spec = spec_of(requests, row.req_id);
    // A padded prompt tail's drafts are placeholders: never accepted.
    if (computed.at(row.req_id) < spec.num_prompt_tokens) continue;
    const auto a = static_cast<std::int32_t>(1 + (static_cast<std::int64_t>(i) + step.index) %
                                                     (1 + row.num_draft_tokens));
    oracle::engine::force_acceptance(row, computed.at(row.req_id), spec.tokens, a);
  }
}

// Production block sizes (B = 256 .. 2048) on the tiny layout: long prompts prefilled in
// block-aligned chunks that cross several boundaries, prefix hits of many blocks, 3 to 7 drafts
// with every acceptance in turn, and pools small enough to preempt and resume.
Scenario production(std::string name, std::int32_t block_size, std::int32_t drafts,
                    model::RunnerFlavour runner, std::int64_t pool_blocks,
                    std::int32_t token_budget) {
  Scenario s{.name = std::move(name), .bug_class = 'A'};
  s.tweak = [=](model::CacheConfig& c, model::LayoutSpec& spec) {
    c.mamba_block_size = block_size;
    c.num_spec_tokens = drafts;
    c.num_spec_blocks = drafts;
    c.runner = runner;
    spec.num_blocks = pool_blocks;
  };
  s.options = small_options(token_budget, 3);
  s.edit = cycle_acceptance;
  s.steps = 4000;
  return s;
}

std::vector<Scenario> production_scenarios() {
  std::vector<Scenario> out;
  const auto v1 = model::RunnerFlavour::v1;
  const auto v2 = model::RunnerFlavour::v2;
  {
    Scenario s = production("p-b560-v1-precopy-chunked-prefill", 560, 3, v1, 24, 2800);
    s.runner_mutants = {"prev_c_division", "curr_floor_division", "postprocess_skipped_no_drafts",
                        "postprocess_reset_dropped", "v2_seed_with_attn_block_size"};
    s.guards = "B = 560, 3 drafts, V1 fused precopy: a 5600-token prompt prefilled in chunks of "
               "up to 2800 tokens (five boundaries a chunk), then decodes that cross a boundary "
               "with each acceptance; a second request hits 5 cached blocks of the first";
    s.requests = {request("a", 0, 5600, 700, 1, 5600), request("b", 14, 3000, 600, 1, 3000)};
    out.push_back(std::move(s));
  }
  {
    Scenario s = production("p-b560-v1-batch-copy", 560, 3, v1, 24, 2800);
    s.runner_mutants = {"prev_c_division", "curr_floor_division", "postprocess_skipped_no_drafts",
                        "postprocess_reset_dropped", "v2_seed_with_attn_block_size"};
    s.guards = "B = 560, 3 drafts, V1 flat batch_copy plan: the same prefill and decode "
               "crossings as the precopy scenario, through the copy list";
    s.options.runner.v1_copy_path = oracle::engine::V1CopyPath::batch_copy;
    s.requests = {request("a", 0, 5600, 700, 1, 5600), request("b", 14, 3000, 600, 1, 3000)};
    out.push_back(std::move(s));
  }
  {
    Scenario s = production("p-b560-v2-preempt-resume", 560, 3, v2, 12, 2800);
    s.runner_mutants = {"v2_source_column_shifted",
                        "slot_reused_without_reset",
                        "precopy_wrong_slot",
                        "prev_c_division",
                        "postprocess_skipped_no_drafts",
                        "postprocess_reset_dropped",
                        "v2_seed_with_attn_block_size"};
    s.guards = "B = 560, 3 drafts, V2 slots on a 12-block pool: three long requests sharing a "
               "prefix preempt each other and resume from prefix hits; slots are reused";
    s.requests = {request("a", 0, 2300, 900, 2, 2240), request("b", 1, 2400, 900, 2, 2240),
                  request("c", 2, 1700, 900, 2, 1120)};
    out.push_back(std::move(s));
  }
  {
    Scenario s = production("p-b256-v1-five-drafts-preempt", 256, 5, v1, 14, 1024);
    s.runner_mutants = {"resumed_computed_before_hit", "slot_reused_without_reset",
                        "precopy_wrong_slot",          "prev_c_division",
                        "curr_floor_division",         "postprocess_skipped_no_drafts",
                        "postprocess_reset_dropped",   "v2_seed_with_attn_block_size"};
    s.guards = "B = 256, 5 drafts, V1 fused precopy on a 14-block pool: decodes cross "
               "boundaries with up to 6 tokens a step while requests are preempted and resume "
               "with and without accepted drafts";
    s.requests = {request("a", 0, 1500, 700, 3, 1024), request("b", 0, 1300, 700, 3, 1024),
                  request("c", 3, 1100, 700, 3, 768)};
    out.push_back(std::move(s));
  }
  {
    Scenario s = production("p-b1024-v2-seven-drafts", 1024, 7, v2, 24, 4096);
    s.runner_mutants = {"v2_source_column_shifted", "slot_reused_without_reset", "prev_c_division",
                        "postprocess_skipped_no_drafts", "v2_seed_with_attn_block_size"};
    s.guards = "B = 1024, 7 drafts, V2: one 4096-token chunk crosses four boundaries, a prefix "
               "hit of 4 blocks, decodes of up to 8 tokens across a boundary";
    s.requests = {request("a", 0, 5000, 1300, 4, 4500), request("b", 9, 4600, 1200, 4, 4500)};
    out.push_back(std::move(s));
  }
  {
    Scenario s = production("p-b560-v1-padded-prompt-tail", 560, 3, v1, 24, 1120);
    s.runner_mutants = {"padded_tail_as_prefill"};
    s.guards = "B = 560, 3 drafts, V1 fused precopy, padded prompt tails (vLLM's "
               "pad_spec_decode): while a decodes with drafts, b's 1121-token prompt goes in "
               "as chunks ending on block boundaries and then its last token alone, sent with 3 "
               "placeholder drafts so the batch keeps the 1 + 3 graph shape; the row is a "
               "decode, none of the placeholders is accepted, and the state kept is the one "
               "after the real token (#55178)";
    s.options.scheduler.pad_prompt_tails = true;
    s.requests = {request("a", 0, 1200, 300), request("b", 3, 1121, 200)};
    out.push_back(std::move(s));
  }
  {
    Scenario s = production("p-b560-v1-zero-draft-rows", 560, 3, v1, 24, 1120);
    s.runner_mutants = {"zero_draft_rows_off_spec_path"};
    s.guards = "B = 560, 3 drafts, V1 fused precopy, proposals of 0 to 2 drafts: decodes that "
               "drafted nothing follow decodes that accepted drafts, so their state lies past "
               "window entry 0; they stay on the spec path with their accepted count, and a "
               "batch in which no row drafted keeps it too (#56531)";
    s.options.scheduler.full_drafts_per_million = 0;
    s.requests = {request("a", 0, 1200, 300), request("b", 3, 1121, 200)};
    out.push_back(std::move(s));
  }
  {
    Scenario s = production("p-b560-v1-async-condensed-batch", 560, 3, v1, 32, 1120);
    s.runner_mutants = {"accepted_counts_read_after_condense"};
    s.guards = "B = 560, 3 drafts, V1 under async scheduling: four requests decode with drafts "
               "while the first ones finish, so condense() moves the last rows of the input "
               "batch into their rows; each accepted count reaches the host a step late, in "
               "the buffer its step wrote by its own rows, and is read at the row it was "
               "written at (#53919, #51571)";
    s.options.scheduler.async_scheduling = true;
    s.edit = nullptr; // the scheduler's own acceptance: an edit would fight the optimistic count
    s.requests = {request("a", 0, 600, 40), request("b", 0, 700, 90), request("c", 1, 800, 300),
                  request("d", 1, 900, 300)};
    out.push_back(std::move(s));
  }
  {
    Scenario s = production("p-b560-v1-graph-shaped-prefill", 560, 3, v1, 24, 564);
    s.runner_mutants = {"graph_dispatch_by_shape"};
    s.guards = "B = 560, 3 drafts, V1, a 564-token budget: a decodes alone (4 tokens a step, "
               "CUDA-graph steps), then b's 564-token prompt goes in as a 560-token chunk and "
               "a 4-token one beside a's decode, a batch of the spec-verify graph's shape (2 "
               "rows of 1 + 3 tokens) that holds a prefill; it runs eagerly, where a dispatch "
               "by shape would replay the graph on the buffers of a's last graph step (#55766)";
    s.requests = {request("a", 0, 40, 200), request("b", 20, 564, 12), request("c", 60, 1124, 12)};
    out.push_back(std::move(s));
  }
  {
    Scenario s = production("p-b560-v1-hit-at-exact-boundary", 560, 3, v1, 24, 2800);
    s.bug_class = 'C';
    s.scheduler_mutants = {"hit_lost_at_exact_boundary"};
    s.guards = "B = 560, 3 drafts, V1: a's 5601-token prompt is prefilled in chunks of 2800, "
               "caching the boundaries at 2800 and 5600; b, the same prompt, can cache all but "
               "its last token, exactly 10 blocks, and hits all 10 (a block lost at that exact "
               "boundary is #50409)";
    s.requests = {request("a", 0, 5601, 300, 1, 5601), request("b", 6, 5601, 200, 1, 5601)};
    out.push_back(std::move(s));
  }
  {
    Scenario s = production("p-b560-v1-eagle-lookahead", 560, 3, v1, 24, 560);
    s.bug_class = 'H';
    s.scheduler_mutants = {"lookahead_displaces_running_column"};
    s.guards = "B = 560, 3 drafts with an EAGLE/MTP drafter (a lookahead of 3): prompts "
               "prefilled in chunks of one block, each ending on a page boundary, whose running "
               "state goes to column cdiv(end, B) - 1; null padding counted with the lookahead "
               "would put a null there (#57605)";
    s.options.scheduler.drafter_prunes_last_block = true;
    s.requests = {request("a", 0, 1700, 120), request("b", 3, 1200, 100)};
    out.push_back(std::move(s));
  }
  {
    Scenario s = production("p-b560-v1-a-b-a", 560, 3, v1, 24, 1120);
    s.bug_class = 'C';
    s.scheduler_mutants = {"hit_leaves_free_entry"};
    s.guards = "B = 560, 3 drafts, V1: a caches the boundary at 1120 and retires it, b (another "
               "chat) revives it with a hit, and a's next turn, whose prompt is a's whole "
               "sequence, hits it again: #50630's A->B->A order, with pool takes in between";
    RequestSpec a = request("a", 0, 1200, 100, 1, 1200);
    RequestSpec a2 = request("a2", 40, 1400, 60);
    std::copy(a.tokens.begin(), a.tokens.begin() + a.max_len, a2.tokens.begin());
    s.requests = {a, request("b", 8, 1320, 100, 1, 1120), a2};
    out.push_back(std::move(s));
  }
  {
    Scenario s = production("p-b560-v1-partial-hash-hit", 560, 3, v1, 24, 1120);
    s.runner_mutants = {"block_copies_skipped"};
    s.guards = "B = 560, 3 drafts, V1, prefix hashes every 16 tokens (vLLM's partial-hash "
               "hits): a's 1210-token prompt stops its chunk at 1200, its last hash boundary, "
               "whose state is cached from the running block and copied away when a runs on; "
               "b shares a's first 1205 tokens and hits those 1200 mid-block, taking a private "
               "copy of the cached block before it writes it";
    s.options.scheduler.hash_block_size = 16;
    s.requests = {request("a", 0, 1210, 100, 1, 1210), request("b", 8, 1400, 100, 1, 1205)};
    out.push_back(std::move(s));
  }
  {
    Scenario s = production("p-b2048-v1-batch-copy", 2048, 3, v1, 16, 8192);
    s.runner_mutants = {"prev_c_division", "curr_floor_division", "postprocess_skipped_no_drafts",
                        "postprocess_reset_dropped", "v2_seed_with_attn_block_size"};
    s.guards = "B = 2048, 3 drafts, V1 batch_copy: a 9000-token prompt in chunks of 8192, a "
               "prefix hit of 4 blocks, decodes across a boundary";
    s.options.runner.v1_copy_path = oracle::engine::V1CopyPath::batch_copy;
    s.requests = {request("a", 0, 9000, 2400, 5, 8500), request("b", 6, 8400, 2000, 5, 8500)};
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<Scenario> all_scenarios() {
  std::vector<Scenario> out;
  {
    Scenario s{.name = "a-stale-index-after-reset",
               .bug_class = 'A',
               .guards = "reset_prefix_cache force-preempts running requests without listing "
                         "them as preempted; they come back resumed with a smaller table, and "
                         "their old column and accepted count must be dropped (#35157)",
               .kernel_mutants = {"temporal_ignores_bias_column", "conv_source_at_bias_column"},
               .runner_mutants = {"skip_cleanup_of_resumed"}};
    s.options = small_options(16, 3);
    s.requests = {request("a", 0, 9, 30), request("b", 0, 6, 30), request("c", 1, 13, 30)};
    s.before = [](oracle::engine::Engine& e, std::int64_t i) {
      if (i == 9 || i == 16) e.request_reset_prefix_cache();
    };
    s.edit = cycle_acceptance;
    out.push_back(std::move(s));
  }
  {
    Scenario s{.name = "a-resume-after-preemption",
               .bug_class = 'A',
               .guards = "a pool too small for the batch: decoding requests are preempted (blocks "
                         "freed, computed back to 0) and resume later, some with a prefix hit; "
                         "nothing of the old slot (column, accepted count) may survive",
               .runner_mutants = {"resumed_computed_before_hit"}};
    s.tweak = [](model::CacheConfig& c, model::LayoutSpec& spec) {
      c.runner = model::RunnerFlavour::v2;
      spec.num_blocks = 8;
    };
    s.options = small_options(20, 4);
    s.requests = {request("a", 0, 6, 24, 5, 6), request("b", 0, 7, 24, 5, 6),
                  request("c", 0, 9, 24, 5, 8), request("d", 0, 5, 24)};
    s.edit = cycle_acceptance;
    out.push_back(std::move(s));
  }
  {
    Scenario s{.name = "a-accepted-after-preemption",
               .bug_class = 'A',
               .guards = "the first steps of a generated V2 run on a 12-block pool (as `run "
                         "--runner v2 --pool-blocks 12` makes): a request preempted after a "
                         "decode that accepted drafts resumes from a prefix hit; its accepted "
                         "count must start again at 1",
               .runner_mutants = {"accepted_kept_across_preempt", "slot_reused_without_reset"}};
    s.tweak = [](model::CacheConfig& c, model::LayoutSpec& spec) {
      c.runner = model::RunnerFlavour::v2;
      spec.num_blocks = 12;
    };
    auto rng = model::SplitMix64::from_seed(1);
    s.requests =
        oracle::engine::generate_workload(s.options.workload, 40, model::kSpecTokensMax + 2, rng);
    s.steps = 40;
    s.must_finish = false;
    out.push_back(std::move(s));
  }
  {
    Scenario s{.name = "a-v2-seeded-column",
               .bug_class = 'A',
               .guards = "V2 seeds a new or resumed request's column with (c - 1) // B using the "
                         "MAMBA block size (attn_block_size 2 here, B 4): prefix hits and resumes "
                         "with c > 0 (#53142, #55507, #33706)",
               .kernel_mutants = {"decide_reads_reset_accepted"},
               .runner_mutants = {"v2_seed_with_attn_block_size", "resumed_computed_before_hit",
                                  "prev_c_division"}};
    s.tweak = [](model::CacheConfig& c, model::LayoutSpec& spec) {
      c.runner = model::RunnerFlavour::v2;
      spec.num_blocks = 12;
    };
    s.options = small_options(16, 4);
    s.requests = {request("p0", 0, 14, 12, 1, 14), request("p1", 6, 17, 10, 1, 14),
                  request("p2", 7, 11, 12, 1, 9), request("q0", 8, 15, 14),
                  request("q1", 9, 10, 12, 1, 9)};
    s.edit = cycle_acceptance;
    out.push_back(std::move(s));
  }
  {
    Scenario s{.name = "d-same-block-conv-shift",
               .bug_class = 'D',
               .guards = "a post-step save whose source and destination columns are the same "
                         "block shifts the conv window inside one block: it must behave as "
                         "memmove (#50729); the reset of a to 1 is an output only",
               .kernel_mutants = {"same_block_copy_skipped", "reset_not_written",
                                  "reset_on_every_copy", "same_column_copied"}};
    s.options = small_options(24, 4);
    s.requests = {request("a", 0, 5, 24), request("b", 0, 6, 24), request("c", 0, 7, 24)};
    s.edit = cycle_acceptance;
    out.push_back(std::move(s));
  }
  {
    Scenario s{.name = "d-aliased-columns",
               .bug_class = 'D',
               .guards = "in V2 a growing table moves its old speculative blocks to the end: the "
                         "runner's row then holds one physical block in two columns, and the "
                         "precopy guard must compare columns, not addresses",
               .kernel_mutants = {"precopy_ignores_token_bias", "preprocess_src_after_update",
                                  "preprocess_bias_is_accepted", "preprocess_curr_floor"},
               .runner_mutants = {"v2_source_column_shifted", "postprocess_reset_dropped"}};
    s.tweak = [](model::CacheConfig& c, model::LayoutSpec&) {
      c.runner = model::RunnerFlavour::v2;
    };
    s.options = small_options(24, 4);
    s.requests = {request("a", 0, 7, 26), request("b", 0, 4, 26), request("c", 2, 9, 20)};
    s.edit = cycle_acceptance;
    out.push_back(std::move(s));
  }
  {
    Scenario s{.name = "d-temporal-natural-size",
               .bug_class = 'D',
               .guards =
                   "tiny-mixed: three groups with padded shared pages (conv, temporal and kda "
                   "states side by side): a copy moves a state's natural size, never the "
                   "page stride (the next state in the page stays untouched)",
               .kernel_mutants = {"conv_one_row_short"},
               .preset = "tiny-mixed"};
    s.tweak = [](model::CacheConfig& c, model::LayoutSpec&) {
      c.num_spec_tokens = 0; // tiny-mixed's short_conv group keeps no drafts
      c.num_spec_blocks = 0;
    };
    s.options = small_options(16, 4);
    s.requests = {request("a", 0, 9, 20), request("b", 0, 6, 20, 2, 6),
                  request("c", 3, 11, 12, 2, 8)};
    out.push_back(std::move(s));
  }
  {
    Scenario s{.name = "e-ds-with-bias",
               .bug_class = 'E',
               .guards = "DS conv layout (dim, state_len) with spec decode: the fused copies "
                         "shift each dim row by the bias (a flat copy cannot: #38897, #45473, "
                         "#49291)",
               .kernel_mutants = {"ds_tail_ignores_bias"}};
    s.tweak = [](model::CacheConfig& c, model::LayoutSpec&) {
      c.conv_layout = model::ConvLayout::DS;
    };
    s.options = small_options(24, 4);
    s.requests = {request("a", 0, 5, 24), request("b", 0, 10, 20), request("c", 1, 7, 22)};
    s.edit = cycle_acceptance;
    out.push_back(std::move(s));
  }
  {
    Scenario s{.name = "c-chunk-ending-mid-block",
               .bug_class = 'C',
               .guards = "prompts chunked under a small budget whose last chunk ends mid-block: "
                         "only block-boundary states are registered for reuse, and a second "
                         "request hits them (a boundary published from a mid-block chunk would be "
                         "caught as a wrong cached state)",
               .runner_mutants = {"curr_floor_division"}};
    s.options = small_options(6, 3);
    s.options.scheduler.full_drafts_per_million = 0;
    s.requests = {request("a", 0, 15, 6, 3, 15), request("b", 12, 18, 6, 3, 15),
                  request("c", 13, 10, 6, 3, 10)};
    out.push_back(std::move(s));
  }
  {
    Scenario s{
        .name = "a-decode-crossing-each-acceptance",
        .bug_class = 'A',
        .guards = "decodes with 2 drafts crossing a block boundary with a = 1, 2 and 3 in "
                  "turn, V1 with the flat batch_copy plan: the pre-step column move, the "
                  "bias a - 1 and the post-step save at every acceptance",
        .kernel_mutants = {"overlap_copied_backwards", "conv_one_row_short", "sd_bias_in_elements"},
        .runner_mutants = {"postprocess_skipped_no_drafts"}};
    s.options = small_options(24, 4);
    s.options.runner.v1_copy_path = oracle::engine::V1CopyPath::batch_copy;
    s.requests = {request("a", 0, 3, 20), request("b", 0, 4, 20), request("c", 0, 2, 20)};
    s.edit = cycle_acceptance;
    out.push_back(std::move(s));
  }
  {
    Scenario s{.name = "g-v2-slot-reuse",
               .bug_class = 'G',
               .guards = "V2 request slots freed by finished and preempted requests are reused "
                         "by later ones: a persistent per-slot array must be rewritten, never "
                         "kept from the previous occupant (#34874, #40648)",
               .runner_mutants = {"slot_reused_without_reset", "precopy_wrong_slot"}};
    s.tweak = [](model::CacheConfig& c, model::LayoutSpec& spec) {
      c.runner = model::RunnerFlavour::v2;
      spec.num_blocks = 14;
    };
    s.options = small_options(16, 3);
    for (int i = 0; i < 8; ++i)
      s.requests.push_back(request(fmt::format("r{}", i), i * 3, 3 + i % 5, 5 + i % 4));
    s.edit = cycle_acceptance;
    out.push_back(std::move(s));
  }
  {
    Scenario s{.name = "d-null-and-pad",
               .bug_class = 'D',
               .guards = "a batch of rows of different widths (pads -1 past each row) with null "
                         "blocks (0) inside the rows: copies of real blocks next to nulls, never a "
                         "null or a pad confused with a block (#50021)",
               .kernel_mutants = {"only_first_tensor_copied"}};
    s.options = small_options(32, 4);
    s.requests = {request("long", 0, 30, 12), request("short", 0, 2, 12),
                  request("mid", 1, 13, 10)};
    s.edit = cycle_acceptance;
    out.push_back(std::move(s));
  }
  {
    // One mamba2 layer whose shared page is padded to 1 MiB: 4200 blocks make a 4.1 GiB
    // arena, and the blocks the trace names (4100 and up) start past 2^32 bytes.
    Scenario s{.name = "b-offsets-past-4gib",
               .bug_class = 'B',
               .guards = "block ids near the top of a 4200-block pool whose page stride is 1 MiB: "
                         "every copy and write lands past byte 2^32 of a 4.1 GiB arena, so "
                         "block_id x stride must be computed in 64 bits (needs ~8.5 GiB of host "
                         "memory to replay: the oracle's arena and the backend's)",
               .kernel_mutants = {"block_offset_32bit"},
               .block_id_offset = 4100,
               .trace_num_blocks = 4200};
    s.tweak = [](model::CacheConfig&, model::LayoutSpec& spec) {
      spec.groups[0].num_layers = 1;
      spec.groups[0].page_align_bytes = std::int64_t{1} << 20;
      spec.num_blocks = 48;
    };
    s.options = small_options(12, 2);
    s.requests = {request("a", 0, 5, 10), request("b", 0, 7, 9)};
    s.edit = cycle_acceptance;
    out.push_back(std::move(s));
  }
  {
    Scenario s{
        .name = "h-all-mode-prefill",
        .bug_class = 'H',
        .guards = "\"all\" mode keeps every block's state: a 7-token budget cuts a "
                  "prompt at 7, 14 and 21, so chunks start mid-block and cross two block "
                  "boundaries; each block-aligned intermediate state goes to its own "
                  "block's column, and a later request's prefix hit reuses one (#57266)",
        .runner_mutants = {"all_boundaries_from_chunk_start", "all_boundary_count_from_length"},
        .preset = "tiny-gdn"};
    s.tweak = [](model::CacheConfig& c, model::LayoutSpec&) {
      c.mode = model::CacheMode::all;
      c.num_spec_tokens = 0;
      c.num_spec_blocks = 0;
    };
    s.options = small_options(7, 3);
    s.requests = {request("a", 0, 22, 6, 4, 22), request("b", 6, 17, 6, 4, 13),
                  request("c", 7, 9, 6)};
    out.push_back(std::move(s));
  }
  {
    Scenario s{.name = "a-all-mode-drafts",
               .bug_class = 'A',
               .guards =
                   "\"all\" mode with 2 drafts, B 4: decodes accept 1, 2 and 3 tokens in turn "
                   "and cross block boundaries with each; a full decode records the block of its "
                   "last scheduled token and the next step reads there (that block when every "
                   "draft was accepted, a columns past it otherwise), while a step after a "
                   "prefill chunk (one of them as long as a full decode) reads the block of its "
                   "last computed token; a later request hits a block a decode filled",
               .runner_mutants = {"all_record_after_any_step"}};
    s.tweak = [](model::CacheConfig& c, model::LayoutSpec&) { c.mode = model::CacheMode::all; };
    s.options = small_options(16, 3);
    // d's prompt is a's first 13 tokens, 8 of them a's outputs: its prefix hit (12 tokens)
    // ends in a block that a's decodes filled.
    s.requests = {request("a", 0, 5, 14, 6, 19), request("b", 0, 3, 12), request("c", 1, 6, 10),
                  request("d", 12, 13, 6, 6, 13)};
    s.edit = cycle_acceptance;
    out.push_back(std::move(s));
  }
  {
    Scenario s{.name = "a-all-mode-trimmed-drafts",
               .bug_class = 'A',
               .guards =
                   "\"all\" mode with 2 drafts, B 4, a 5-token budget shared by two decoding "
                   "requests: the second one's decodes are trimmed to 1 draft, as vLLM's "
                   "scheduler trims drafts to the budget, and some reject it; the record of a "
                   "trimmed decode keeps its draft count, so the next step reads the column past "
                   "its last block (vLLM keeps a record only after 1 + num_spec tokens and reads "
                   "the block of the last computed token, #41233)",
               .runner_mutants = {"all_record_full_decodes_only"}};
    s.tweak = [](model::CacheConfig& c, model::LayoutSpec&) { c.mode = model::CacheMode::all; };
    s.options = small_options(5, 2);
    s.requests = {request("a", 0, 5, 14), request("b", 0, 6, 14)};
    s.edit = cycle_acceptance;
    out.push_back(std::move(s));
  }
  {
    Scenario s{.name = "a-all-mode-drafts-reset",
               .bug_class = 'A',
               .guards =
                   "\"all\" mode with 3 drafts on tiny-gdn: reset_prefix_cache force-preempts "
                   "decoding requests that hold a record of their last full decode; the first "
                   "to come back recomputes their shared prefix, the later ones resume from a "
                   "prefix hit of it, and cleanup must have dropped their records (#35157): "
                   "they read the hit block, not a column past their old last block",
               .runner_mutants = {"skip_cleanup_of_resumed", "all_record_after_any_step"},
               .preset = "tiny-gdn"};
    s.tweak = [](model::CacheConfig& c, model::LayoutSpec&) {
      c.mode = model::CacheMode::all;
      c.num_spec_tokens = 3;
      c.num_spec_blocks = 3;
    };
    s.options = small_options(16, 3);
    s.requests = {request("a", 0, 9, 24, 3, 8), request("b", 0, 10, 20, 3, 8),
                  request("c", 2, 11, 20, 3, 8)};
    s.before = [](oracle::engine::Engine& e, std::int64_t i) {
      if (i == 6 || i == 11) e.request_reset_prefix_cache();
    };
    s.edit = cycle_acceptance;
    out.push_back(std::move(s));
  }
  for (Scenario& s : production_scenarios())
    out.push_back(std::move(s));
  return out;
}

// `step` with every real block id (not the null block 0) moved up by `offset`.
model::Step with_block_offset(model::Step step, std::int32_t offset) {
  const auto shift = [offset](model::GroupBlockIds& groups) {
    for (auto& ids : groups)
      for (std::int32_t& id : ids)
        if (id > 0) id += offset;
  };
  for (auto& r : step.new_requests)
    shift(r.block_ids);
  for (auto& r : step.cached_requests)
    shift(r.new_block_ids);
  return step;
}

std::string render(const Scenario& s) {
  const model::Preset& preset = model::find_preset(s.preset);
  model::CacheConfig config = preset.config;
  model::LayoutSpec spec = preset.spec;
  if (s.tweak) s.tweak(config, spec);
  oracle::engine::EngineOptions options = s.options;
  options.runner.flavour = config.runner; // the tweak's flavour drives the engine
  const model::Layout layout = model::build_layout(config, spec);
  scenarios::TraceHeader header{.config = config, .preset = s.preset, .layout_spec = spec};
  if (s.trace_num_blocks != 0) { // an inline layout with the bigger pool
    header.preset.clear();
    header.layout_spec.num_blocks = s.trace_num_blocks;
  }
  header.source = {{"recorder", "scenario_library_gen (tests/scenarios/library_gen.cpp)"},
                   {"scenario",
                    {{"name", s.name},
                     {"bug_class", std::string(1, s.bug_class)},
                     {"guards", s.guards},
                     {"kernel_mutants", s.kernel_mutants},
                     {"runner_mutants", s.runner_mutants}}}};
  if (!s.scheduler_mutants.empty())
    header.source["scenario"]["scheduler_mutants"] = s.scheduler_mutants;
  if (options.runner.v1_copy_path == oracle::engine::V1CopyPath::batch_copy)
    header.source["scenario"]["v1_copy_path"] = "batch_copy";
  if (options.scheduler.async_scheduling) scenarios::set_async_model_contract(header);
  scenarios::set_hash_unit(header, options.scheduler.hash_block_size);
  if (options.scheduler.drafter_prunes_last_block) { // the replay counts the lookahead's rows
    header.contract.eagle = true;
    header.version = scenarios::kTraceFormatVersionContract;
  }
  std::ostringstream text;
  scenarios::TraceWriter writer(text, s.name, header);
  oracle::engine::Engine engine(layout, s.requests, 7, options);
  for (std::int64_t i = 0; i < s.steps; ++i) {
    if (s.before) s.before(engine, i);
    const bool more = engine.step([&](model::Step& step) {
      if (s.edit) s.edit(step, s.requests);
    });
    writer.write(with_block_offset(engine.last_step(), s.block_id_offset));
    if (engine.report().first_finding)
      throw std::runtime_error(s.name + ": the oracle found " +
                               engine.report().first_finding->message);
    if (!more) break;
  }
  if (s.must_finish && !engine.scheduler().done())
    throw std::runtime_error(s.name + ": not finished in time");
  for (const std::string& name : s.scheduler_mutants) {
    const auto mutant = harness::find_scheduler_mutant(name);
    if (!mutant) throw std::runtime_error(s.name + ": no scheduler mutant " + name);
    oracle::engine::Engine buggy(layout, s.requests, 7, options);
    const auto edit = harness::scheduler_mutant_edit(*mutant, buggy);
    for (std::int64_t i = 0; i < s.steps && !buggy.report().first_finding; ++i) {
      if (s.before) s.before(buggy, i);
      const bool more = buggy.step([&](model::Step& step) {
        if (s.edit) s.edit(step, s.requests);
        edit(step);
      });
      if (!more) break;
    }
    if (!buggy.report().first_finding)
      throw std::runtime_error(s.name + ": scheduler mutant " + name + " held");
  }
  return text.str();
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3 || (argc == 3 && std::string(argv[2]) != "--check")) {
    std::cerr << "usage: scenario_library_gen OUT_DIR [--check]\n";
    return 2;
  }
  const std::string dir = argv[1];
  const bool check = argc == 3;
  int stale = 0;
  try {
    for (const Scenario& s : all_scenarios()) {
      const std::string text = render(s);
      const std::string path = dir + "/" + s.name + ".jsonl";
      if (check) {
        std::ifstream in(path, std::ios::binary);
        std::ostringstream have;
        have << in.rdbuf();
        if (have.str() != text) {
          std::cerr << path << ": differs from what scenario_library_gen writes\n";
          ++stale;
        }
        continue;
      }
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out << text;
      std::cout << path << "\n";
    }
  } catch (const std::exception& e) {
    std::cerr << "scenario_library_gen: " << e.what() << "\n";
    return 1;
  }
  return stale == 0 ? 0 : 1;
}
