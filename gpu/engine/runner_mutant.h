// The runner mutants: deliberate bugs in the host-side bookkeeping of the engine runner
// (columns, slots, accepted counts, which launches run with which arrays), selected at run
// time with `--mutant NAME`. The kernels are untouched (their mutants are gpu::Mutant,
// gpu/mutant.h). A runner mutant is a RunnerDecisions (runner_decisions.h) that redefines the
// one decision it gets wrong; the runner asks its decisions object at every mutation point, so
// its own code names no mutant. Each is modelled on a bug class of REFERENCE.md 5 and must be
// killed by the engine-level fuzz (fuzz/engine/engine_fuzz.h).
#pragma once

#include "gpu/engine/runner_decisions.h"
#include "gpu/mutant.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

namespace mc::gpu::engine {

enum class RunnerMutant : std::uint8_t {
  none,                          // the runner as specified (engine_runner.h)
  skip_cleanup_of_resumed,       // A #35157: a resumed id keeps its stale column and accepted count
  v2_seed_with_attn_block_size,  // A #53142: V2 seeds the column with the attention block size
  v2_source_column_shifted,      // F #42406: conv source treated like temporal (offset as column)
  accepted_kept_across_preempt,  // A: num_accepted survives a preemption into the resume
  slot_reused_without_reset,     // G: a reused slot keeps its previous occupant's arrays
  prev_c_division,               // A: prev column (c - 1) / B truncates: 0, not -1, for c = 0
  curr_floor_division,           // A: curr column floor((c + s) / B) - 1 instead of cdiv - 1
  precopy_wrong_slot,            // G: precopy idx_mapping names the wrong slot for a row
  postprocess_skipped_no_drafts, // X: the post-step launch skipped when no row has drafts
  postprocess_reset_dropped,     // X: the reset of a to 1 by the post-step launch is not kept
  resumed_computed_before_hit,   // A #33706: a resumed request's column ignores its prefix hit
  all_boundaries_from_chunk_start, // H #57266: all-mode intermediate states every B from c
  all_boundary_count_from_length,  // H: all-mode intermediate state count n // B
};

// Every runner mutant except none, in enum order (entry i describes RunnerMutant(i + 1)).
std::span<const MutantInfo> runner_mutants();
std::string_view to_string(RunnerMutant mutant); // "none" for the clean runner
std::optional<RunnerMutant> find_runner_mutant(std::string_view name);

// The runner's decisions under `mutant`: the specified ones for RunnerMutant::none.
std::unique_ptr<RunnerDecisions> make_runner_decisions(RunnerMutant mutant);

} // namespace mc::gpu::engine
