// The runner mutant catalogue (runner_mutant.h).
#include "gpu/engine/runner_mutant.h"

#include "model/errors.h"

#include <array>

namespace mc::gpu::engine {
namespace {

constexpr std::array kCatalogue = {
    MutantInfo{"skip_cleanup_of_resumed", 'A',
               "cleanup drops finished and preempted ids but not resumed ones: a request "
               "force-preempted by reset_prefix_cache resumes with its stale column and accepted "
               "count (#35157)"},
    MutantInfo{"v2_seed_with_attn_block_size", 'A',
               "V2 seeds a new or resumed request's column as (c - 1) // attn_block_size instead "
               "of the mamba block size (#53142)"},
    MutantInfo{"v2_source_column_shifted", 'F',
               "V2 precopy gets src_col + offset with offset 0, as if every state were temporal: "
               "the conv source offset becomes a column shift (#42406)"},
    MutantInfo{"accepted_kept_across_preempt", 'A',
               "a preempted request's num_accepted is kept and used again when it resumes"},
    MutantInfo{"slot_reused_without_reset", 'G',
               "a freed slot taken by another request keeps the previous occupant's column and "
               "accepted count (persistent buffers not updated in place)"},
    MutantInfo{"prev_c_division", 'A',
               "the prev column (c - 1) / B with C division: 0 instead of -1 for a fresh request"},
    MutantInfo{"curr_floor_division", 'A',
               "V1 curr column floor((c + s) / B) - 1 instead of cdiv(c + s, B) - 1"},
    MutantInfo{"precopy_wrong_slot", 'G',
               "precopy's idx_mapping built with the wrong index: V1 the request slot instead "
               "of the batch row, V2 the batch row instead of the request slot"},
    MutantInfo{"postprocess_skipped_no_drafts", 'X',
               "the post-step save launch skipped when no row of the step carries drafts"},
    MutantInfo{"postprocess_reset_dropped", 'X',
               "the runner keeps the step's accepted counts instead of the post-step launch's "
               "output (its reset of a to 1 after a save is lost)"},
    MutantInfo{"resumed_computed_before_hit", 'A',
               "a resumed request's column is computed from num_computed before its prefix hit "
               "(0), not from the hit (#33706)"},
    MutantInfo{"all_boundaries_from_chunk_start", 'H',
               "all mode takes a chunk's intermediate states every B tokens from its start (c + "
               "B, c + 2B, ...) into the columns from the chunk's first block on, as if the "
               "chunk began on a block boundary: a chunk starting mid-block fills the "
               "block-aligned columns with states of unaligned positions and loses its last "
               "boundary (the unaligned computed tokens not shifted back, #57266)"},
    MutantInfo{"all_boundary_count_from_length", 'H',
               "all mode counts a chunk's intermediate states as n // B instead of the block "
               "boundaries inside (c, c + n): a chunk starting mid-block whose tail passes one "
               "more boundary never writes it"},
};

static_assert(kCatalogue.size() ==
              static_cast<std::size_t>(RunnerMutant::all_boundary_count_from_length));

} // namespace

std::span<const MutantInfo> runner_mutants() { return kCatalogue; }

std::string_view to_string(RunnerMutant mutant) {
  if (mutant == RunnerMutant::none) return "none";
  const auto i = static_cast<std::size_t>(mutant) - 1;
  MC_ASSERT(i < kCatalogue.size());
  return kCatalogue[i].name;
}

std::optional<RunnerMutant> find_runner_mutant(std::string_view name) {
  if (name == "none") return RunnerMutant::none;
  for (std::size_t i = 0; i < kCatalogue.size(); ++i)
    if (kCatalogue[i].name == name) return static_cast<RunnerMutant>(i + 1);
  return std::nullopt;
}

} // namespace mc::gpu::engine
