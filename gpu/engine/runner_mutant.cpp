// Each runner mutant's decisions, and the runner part of the catalogue (runner_mutant.h).
#include "gpu/engine/runner_mutant.h"

#include "model/errors.h"

#include <string>
#include <unordered_map>

namespace mc::gpu::engine {

// Each runner mutant: the clean decisions but one (runner_decisions.h).
namespace mutants {

struct skip_cleanup_of_resumed final : RunnerDecisions {
  bool keeps_slot_arrays(SlotHandover handover) const override {
    return handover == SlotHandover::kept_by_resumed;
  }
};

struct v2_seed_with_attn_block_size final : RunnerDecisions {
  std::int32_t prev_column_block_size(const model::CacheConfig& config) const override {
    return config.attn_block_size;
  }
};

struct v2_source_column_shifted final : RunnerDecisions {
  void v2_precopy_sources(model::RequestArrays& arrays) const override {
    for (const std::int32_t slot : arrays.idx_mapping) {
      const auto i = static_cast<std::size_t>(slot);
      if (arrays.src_col[i] < 0) continue;
      arrays.src_col[i] += arrays.token_bias[i];
      arrays.token_bias[i] = 0;
    }
  }
};

struct accepted_kept_across_preempt final : RunnerDecisions {
  void preempted(const std::string& req_id, std::int32_t num_accepted) override {
    kept_[req_id] = num_accepted;
  }
  std::optional<std::int32_t> accepted_at_seed(const std::string& req_id, bool resumed) override {
    const auto kept = kept_.extract(req_id);
    if (kept.empty() || !resumed) return std::nullopt;
    return kept.mapped();
  }

private:
  std::unordered_map<std::string, std::int32_t> kept_; // by preempted request
};

struct slot_reused_without_reset final : RunnerDecisions {
  bool keeps_slot_arrays(SlotHandover handover) const override {
    return handover == SlotHandover::released || handover == SlotHandover::reused;
  }
};

struct prev_c_division final : RunnerDecisions {
  std::int32_t prev_column(std::int32_t c, std::int32_t block_size) const override {
    return (c - 1) / block_size;
  }
};

struct curr_floor_division final : RunnerDecisions {
  std::int32_t curr_column(std::int32_t end, std::int32_t block_size) const override {
    return end / block_size - 1;
  }
};

struct precopy_wrong_slot final : RunnerDecisions {
  std::vector<std::int32_t>
  precopy_idx_mapping(ArraysIndexedBy arrays,
                      const std::vector<std::int32_t>& slots) const override {
    const ArraysIndexedBy wrong =
        arrays == ArraysIndexedBy::slot ? ArraysIndexedBy::batch_row : ArraysIndexedBy::slot;
    return RunnerDecisions::precopy_idx_mapping(wrong, slots);
  }
};

struct postprocess_skipped_no_drafts final : RunnerDecisions {
  bool runs_postprocess(const model::Step& step) const override {
    for (const model::ScheduledRequest& s : step.scheduled)
      if (s.num_draft_tokens > 0) return true;
    return false;
  }
};

struct postprocess_reset_dropped final : RunnerDecisions {
  std::int32_t accepted_after_postprocess(std::int32_t /*launch_out*/,
                                          std::int32_t before) const override {
    return before;
  }
};

struct resumed_computed_before_hit final : RunnerDecisions {
  std::int32_t prev_column_computed(std::int32_t c, bool resumed) const override {
    return resumed ? 0 : c;
  }
};

// Boundaries every B from the chunk's start, into the columns from its first block on.
struct all_boundaries_from_chunk_start final : RunnerDecisions {
  std::vector<AllModeBoundary> all_mode_boundaries(std::int64_t c, std::int64_t n,
                                                   std::int64_t block_size) const override {
    const std::int64_t first = c / block_size;
    const std::int64_t count = model::cdiv(c + n, block_size) - 1 - first;
    std::vector<AllModeBoundary> out;
    for (std::int64_t k = 0; k < count; ++k) {
      const std::int64_t pos = c + (k + 1) * block_size;
      if (pos >= c + n) break;
      out.push_back({.col = static_cast<std::int32_t>(first + k), .pos = pos});
    }
    return out;
  }
};

// As many boundaries as n // B, from the end of the chunk's first block.
struct all_boundary_count_from_length final : RunnerDecisions {
  std::vector<AllModeBoundary> all_mode_boundaries(std::int64_t c, std::int64_t n,
                                                   std::int64_t block_size) const override {
    const std::int64_t first = c / block_size;
    std::vector<AllModeBoundary> out;
    for (std::int64_t k = 0; k < n / block_size; ++k) {
      const std::int64_t pos = (first + k + 1) * block_size;
      MC_ASSERT(c < pos);
      MC_ASSERT(pos <= c + n);
      out.push_back({.col = static_cast<std::int32_t>(first + k), .pos = pos});
    }
    return out;
  }
};

// postprocess_mamba_all recording after every scheduled step as after a full decode.
struct all_record_after_any_step final : RunnerDecisions {
  std::optional<AllModeRecord> all_mode_record(std::int32_t c, std::int32_t n, std::int32_t /*d*/,
                                               const model::CacheConfig& config) const override {
    if (config.num_spec_tokens == 0) return std::nullopt;
    return AllModeRecord{
        .block = static_cast<std::int32_t>((std::int64_t{c} + n - 1) / config.mamba_block_size),
        .drafts = config.num_spec_tokens};
  }
};

// A row with drafts whose first token is a prompt token classified as a prefill (vLLM before
// #55178): a padded prompt tail then keeps the state after its placeholder drafts.
struct padded_tail_as_prefill final : RunnerDecisions {
  bool decode_row(std::int32_t n, std::int32_t d, bool prompt_token,
                  std::int32_t threshold) const override {
    return RunnerDecisions::decode_row(n, d, prompt_token, threshold) && !(d > 0 && prompt_token);
  }
};

// vLLM's postprocess_mamba_all at 6a391a9 (#41233): a record only after a full decode, keyed
// on the query length 1 + num_spec. After a decode with fewer drafts the next step anchors at
// the block of its last computed token, where a rejected draft left no state of its count.
struct all_record_full_decodes_only final : RunnerDecisions {
  std::optional<AllModeRecord> all_mode_record(std::int32_t c, std::int32_t n, std::int32_t d,
                                               const model::CacheConfig& config) const override {
    if (n != 1 + config.num_spec_tokens || config.num_spec_tokens == 0) return std::nullopt;
    return AllModeRecord{
        .block = static_cast<std::int32_t>((std::int64_t{c} + n - 1) / config.mamba_block_size),
        .drafts = d};
  }
};

// The forward's read index one too far: entry a of a decode's window.
struct forward_reads_column_a final : RunnerDecisions {
  std::int32_t accepted_read_index(std::int32_t num_accepted) const override {
    return num_accepted;
  }
};

// block_idx_first_scheduled_token as the block of the last computed token.
struct first_scheduled_block_off_by_one final : RunnerDecisions {
  std::int32_t first_scheduled_block(std::int32_t c, std::int32_t block_size) const override {
    return static_cast<std::int32_t>(model::cdiv(c, block_size) - 1);
  }
};

// The decode window sliced from seq_len // B.
struct spec_slice_wrong_start final : RunnerDecisions {
  std::int32_t decode_window_start(std::int32_t seq_len, std::int32_t block_size) const override {
    return seq_len / block_size;
  }
};

// The persistent CUDA-graph rows past a step's decodes keep what an earlier step left.
struct padded_rows_stale_index final : RunnerDecisions {
  bool pads_graph_rows_with_null() const override { return false; }
};

// state_indices_tensor_d[row, a - 1] indexed with no bound against the row's window.
struct unbounded_accepted_read final : RunnerDecisions {
  bool bounds_accepted_read() const override { return false; }
};

// vLLM's V1 runner and GDN builder before #56531: a decode row that drafted nothing is marked
// -1 (and a batch where no row drafted leaves the spec path whole), so the row carries no
// accepted count and its forward reads window entry 0, where the state before the last step's
// accepted drafts lies.
struct zero_draft_rows_off_spec_path final : RunnerDecisions {
  bool on_spec_path(std::int32_t d) const override { return d > 0; }
};

// vLLM's V1 runner under async scheduling before #53919: the accepted counts copied to the host
// by the step in flight are read at the rows the next step's condense() gave its requests, so
// a request moved into a finished one's row takes that request's count.
struct accepted_counts_read_after_condense final : RunnerDecisions {
  std::int32_t accepted_count_row(std::int32_t /*written*/, std::int32_t now) const override {
    return now;
  }
};

// vLLM's dispatch by batch shape with the builder's refresh keyed on prefills (#55766, open): a
// batch of 1 + num_spec tokens a row in which one row is a prefill chunk of that length replays
// the spec-verify graph on the persistent buffers of the last graph step, another batch's
// block ids and accepted counts.
struct graph_dispatch_by_shape final : RunnerDecisions {
  bool dispatches_graph_by_shape() const override { return true; }
};

// Partial-hash hits without their copies: the hit's column and the moved cache entry hold what
// those blocks held before.
struct block_copies_skipped final : RunnerDecisions {
  bool runs_block_copies() const override { return false; }
};

// A CUDA graph's inputs copied into new buffers every step: the graph reads its capture's.
struct graph_buffers_reallocated final : RunnerDecisions {
  bool updates_graph_buffers_in_place() const override { return false; }
};

} // namespace mutants

std::string_view to_string(RunnerMutant mutant) {
  if (mutant == RunnerMutant::none) return "none";
  const auto i = static_cast<std::size_t>(mutant) - 1;
  MC_ASSERT(i < runner_mutants().size());
  return runner_mutants()[i].name;
}

std::optional<RunnerMutant> find_runner_mutant(std::string_view name) {
  return find_in_catalogue<RunnerMutant>(runner_mutants(), name);
}

std::unique_ptr<RunnerDecisions> make_runner_decisions(RunnerMutant mutant) {
  switch (mutant) {
  case RunnerMutant::none:
    return std::make_unique<RunnerDecisions>();
#define MC_RUNNER_DECISIONS_CASE(name, bug_class, description)                                     \
  case RunnerMutant::name:                                                                         \
    return std::make_unique<mutants::name>();
    MC_RUNNER_MUTANTS(MC_RUNNER_DECISIONS_CASE)
#undef MC_RUNNER_DECISIONS_CASE
  }
  MC_ASSERT(false);
  return nullptr;
}

} // namespace mc::gpu::engine
