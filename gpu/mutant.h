// The mutant catalogue: every deliberate bug compiled in, selected at run time with
// `--mutant NAME`, as one table of MutantInfo (name, level, bug class, what it breaks) that
// `mambacheck mutants`, every `--mutant` lookup and the docs' listings read. Its two lists
// below, MC_KERNEL_MUTANTS and MC_RUNNER_MUTANTS, are the only place a mutant is named; the
// table, the enums (Mutant here, engine::RunnerMutant) and every dispatch are generated from
// them (DESIGN.md, "Backends and kernels under test").
//
// - A kernel mutant is a policy of the same name that redefines one mutation point of the
//   kernels (gpu/kernels/mutant_policies.cuh; the points as specified are `Clean`,
//   gpu/kernels/clean_policy.cuh). Every kernel body takes a policy type, so the clean kernels
//   are the instantiation with Clean and pay nothing for the mutants. The kernel mutants come
//   in two lists:
//   - MC_KERNEL_MUTANTS_IN_BOUNDS keep their accesses inside the arenas and block tables of a
//     valid case (a wrong byte, never a wild address), so a campaign against one reports a
//     mismatch on the host backend instead of crashing the process;
//   - MC_KERNEL_MUTANTS_OUT_OF_BOUNDS read or write outside them, as real kernel bugs do
//     (MutantInfo::memory_safe false): on the host backend one can kill the process running
//     it, on cuda it poisons the process's CUDA context. Campaigns run each host case in a
//     forked child (fuzz/isolate.h) and replace a cuda process whose context a fault lost
//     (`mambacheck worker`), so these are killed like the others.
// - A runner mutant is a subclass of the engine runner's RunnerDecisions of the same name that
//   redefines one decision of its bookkeeping (gpu/engine/runner_decisions.h,
//   gpu/engine/runner_mutant.h); the runner asks that object once per request or step.
// - A scheduler mutant is a bug of the scheduler or block manager. The oracle's scheduler is
//   the specification and holds no mutation, so such a bug is planted after it: the mutant
//   rewrites each step the oracle scheduled into the step a scheduler with that bug would have
//   sent (harness/scheduler_mutant.h), before the oracle and the backend run it. What catches
//   it is the oracle's checks of the step it is given, as in the replay of a recorded trace.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>

namespace mc::gpu {

// X(name, bug class of REFERENCE.md 5 ('A'..'H', 'X' = one of ours), schedule, what it
// breaks), in the order of the catalogue; a number in a description is the vLLM bug it
// re-creates. The schedule says whether a launch that shows the bug shows it every time
// (`deterministic`) or only under some interleavings of the CTAs on cuda (`racy`;
// MutantSchedule). Every kernel mutant: the in-bounds ones, then the out-of-bounds ones.
#define MC_KERNEL_MUTANTS(X) MC_KERNEL_MUTANTS_IN_BOUNDS(X) MC_KERNEL_MUTANTS_OUT_OF_BOUNDS(X)

#define MC_KERNEL_MUTANTS_IN_BOUNDS(X)                                                             \
  X(precopy_guard_by_address, 'D', deterministic,                                                  \
    "precopy skips a row when the source and destination BLOCKS are equal (physical "              \
    "addresses compared instead of logical columns), losing aliased same-block shifts")            \
  X(same_block_copy_skipped, 'D', deterministic,                                                   \
    "a copy whose source and destination block are the same is recorded but not done, so a "       \
    "same-block conv shift never happens")                                                         \
  X(overlap_copied_backwards, 'D', deterministic,                                                  \
    "an overlapping (same-block) flat copy runs from the last byte down: not memmove-safe "        \
    "for the left shift of a conv window (#50729)")                                                \
  X(ds_shift_backwards, 'D', deterministic,                                                        \
    "a same-block DS row shift walks the elements from the end: not memmove-safe")                 \
  X(vector_tail_dropped, 'D', deterministic,                                                       \
    "the 16-byte vector path stops at the last 16-byte boundary: the tail bytes of a copy "        \
    "are lost")                                                                                    \
  X(vector_head_dropped, 'D', deterministic,                                                       \
    "the 16-byte vector path starts at the first 16-byte boundary: the head bytes before it "      \
    "are lost")                                                                                    \
  X(null_block_skipped, 'D', deterministic,                                                        \
    "null block (0) confused with the pad (-1): a copy reading block 0 is skipped (#50021)")       \
  X(block_offset_32bit, 'B', deterministic,                                                        \
    "block_id x block stride kept in 32 bits: offsets past 4 GiB wrap (#35275)")                   \
  X(temporal_ignores_bias_column, 'F', deterministic,                                              \
    "the temporal source is bt(src) like conv, not bt(src + bias): the bias column is "            \
    "ignored (#42406)")                                                                            \
  X(conv_source_at_bias_column, 'F', deterministic,                                                \
    "the conv source is the block at column src + bias like temporal, read from its start "        \
    "(#42406)")                                                                                    \
  X(sd_bias_in_elements, 'B', deterministic,                                                       \
    "the SD conv source offset is bias x element size instead of bias token rows")                 \
  X(ds_tail_ignores_bias, 'E', deterministic,                                                      \
    "each DS dim row is copied from its start, not from its bias (the per-row tail ignores "       \
    "the bias, #38897)")                                                                           \
  X(only_group0_copied, 'X', deterministic,                                                        \
    "only the tensors of mamba group 0 are copied (the loop over groups stops after the "          \
    "first); every copy is still recorded")                                                        \
  X(tables_of_group0, 'X', deterministic,                                                          \
    "every group's blocks are read from group 0's block table: right only where the groups "       \
    "hold the same ids, which vLLM's shared pool never gives them")                                \
  X(conv_one_row_short, 'X', deterministic,                                                        \
    "a conv copy moves one token of the window less than w - bias")                                \
  X(only_first_tensor_copied, 'X', deterministic,                                                  \
    "only the first (group, layer, state) tensor of a copying request is copied (all are "         \
    "recorded)")                                                                                   \
  X(decide_reads_reset_accepted, 'D', deterministic,                                               \
    "postprocess_align decides a copy from a after its reset to 1 (no launch-time snapshot of "    \
    "num_accepted)")                                                                               \
  X(reset_races_other_programs, 'D', racy,                                                         \
    "postprocess_align resets a in place from the CTA copying a row's first tensor, right "        \
    "after it decides, while the row's other CTAs decide from a with no snapshot: one that "       \
    "reads after the write skips its copies (cuda: some schedules, big grids; host: every "        \
    "row whose copy spans two programs)")                                                          \
  X(reset_not_written, 'X', deterministic,                                                         \
    "the reset of a to 1 when source and destination columns are equal is not written")            \
  X(reset_on_every_copy, 'X', deterministic,                                                       \
    "a is reset to 1 after every post-step copy, not only when the columns are equal")             \
  X(same_column_copied, 'X', deterministic,                                                        \
    "a save whose source and destination column are equal with bias 0 still copies (and "          \
    "records) the state onto itself")                                                              \
  X(precopy_ignores_token_bias, 'F', deterministic,                                                \
    "precopy copies with bias 0 instead of its token_bias")                                        \
  X(preprocess_curr_floor, 'A', deterministic,                                                     \
    "preprocess_align takes the new column as floor((c + q) / B) - 1 instead of cdiv - 1")         \
  X(preprocess_bias_is_accepted, 'F', deterministic,                                               \
    "preprocess_align sets token_bias to a instead of max(a - 1, 0)")                              \
  X(preprocess_reset_when_fresh, 'A', deterministic,                                               \
    "preprocess_align resets a to 1 also for a request that had no column (old < 0)")              \
  X(preprocess_src_after_update, 'D', deterministic,                                               \
    "preprocess_align reads the old column after writing the new one: src_col is the new "         \
    "column, so the precopy never runs")                                                           \
  X(batch_copy_drops_last, 'X', deterministic,                                                     \
    "the batched flat copy (V1 plan) never copies its last entry")

#define MC_KERNEL_MUTANTS_OUT_OF_BOUNDS(X)                                                         \
  X(table_row_from_slot, 'X', deterministic,                                                       \
    "V2 kinds read a request's block-table row at its slot idx_mapping[b] instead of its batch "   \
    "row b: another request's blocks, or past the end of the table when a slot is >= num_reqs "    \
    "(V1 kinds, whose slot is the row, and per-slot tables are unchanged)")                        \
  X(slot_table_row_from_batch_row, 'G', deterministic,                                             \
    "with per-request-slot block tables the row is still taken at the batch row b, not found "     \
    "through idx_mapping: another request's or a free slot's blocks (a postprocess deferred "      \
    "under pipeline parallelism copies through a stale batch order, #55951, #55506)")              \
  X(precopy_copies_without_source, 'A', deterministic,                                             \
    "precopy skips only src_col == state_idx, not src_col < 0: a row without a source (-1, "       \
    "on every V1 row that copies nothing) copies from column -1, before its table row")                 \
  X(precopy_reads_unbound_idx_mapping, 'X', deterministic,                                         \
    "precopy's decision reads idx_mapping[b] whether or not the launch bound one: V1's fused "    \
    "precopy has none (HAS_IDX_MAPPING false, a null pointer), so the process running the "       \
    "kernels faults in a decision body")

#define MC_RUNNER_MUTANTS(X)                                                                       \
  X(skip_cleanup_of_resumed, 'A',                                                                  \
    "cleanup drops finished and preempted ids but not resumed ones: a request "                    \
    "force-preempted by reset_prefix_cache resumes with its stale column and accepted "            \
    "count (#35157)")                                                                              \
  X(v2_seed_with_attn_block_size, 'A',                                                             \
    "V2 seeds a new or resumed request's column as (c - 1) // attn_block_size instead "            \
    "of the mamba block size (#53142)")                                                            \
  X(v2_source_column_shifted, 'F',                                                                 \
    "V2 precopy gets src_col + offset with offset 0, as if every state were temporal: "            \
    "the conv source offset becomes a column shift (#42406)")                                      \
  X(accepted_kept_across_preempt, 'A',                                                             \
    "a preempted request's num_accepted is kept and used again when it resumes")                   \
  X(slot_reused_without_reset, 'G',                                                                \
    "a freed slot taken by another request keeps the previous occupant's column and "              \
    "accepted count (persistent buffers not updated in place)")                                    \
  X(prev_c_division, 'A',                                                                          \
    "the prev column (c - 1) / B with C division: 0 instead of -1 for a fresh request")            \
  X(curr_floor_division, 'A',                                                                      \
    "V1 curr column floor((c + s) / B) - 1 instead of cdiv(c + s, B) - 1")                         \
  X(precopy_wrong_slot, 'G',                                                                       \
    "precopy's idx_mapping built with the wrong index: V1 the request slot instead "               \
    "of the batch row, V2 the batch row instead of the request slot")                              \
  X(postprocess_skipped_no_drafts, 'X',                                                            \
    "the post-step save launch skipped when no row of the step carries drafts")                    \
  X(postprocess_reset_dropped, 'X',                                                                \
    "the runner keeps the step's accepted counts instead of the post-step launch's "               \
    "output (its reset of a to 1 after a save is lost)")                                           \
  X(resumed_computed_before_hit, 'A',                                                              \
    "a resumed request's column is computed from num_computed before its prefix hit "              \
    "(0), not from the hit (#33706)")                                                              \
  X(all_boundaries_from_chunk_start, 'H',                                                          \
    "all mode takes a chunk's intermediate states every B tokens from its start (c + "             \
    "B, c + 2B, ...) into the columns from the chunk's first block on, as if the "                 \
    "chunk began on a block boundary: a chunk starting mid-block fills the "                       \
    "block-aligned columns with states of unaligned positions and loses its last "                 \
    "boundary (the unaligned computed tokens not shifted back, #57266)")                           \
  X(all_boundary_count_from_length, 'H',                                                           \
    "all mode counts a chunk's intermediate states as n // B instead of the block "                \
    "boundaries inside (c, c + n): a chunk starting mid-block whose tail passes one "              \
    "more boundary never writes it")                                                               \
  X(all_record_after_any_step, 'A',                                                                \
    "all mode's postprocess records the block of the last scheduled token whenever anything "      \
    "was scheduled, as after a full decode, not only after a decode with drafts: the step "        \
    "after a prefill chunk or a decode without drafts reads its initial state at a "               \
    "speculative column past that block instead of the block of its last computed token")          \
  X(padded_tail_as_prefill, 'A',                                                                   \
    "a row with drafts whose first token is a prompt token (a prompt tail padded with "            \
    "placeholder drafts for a uniform CUDA-graph shape) is classified as a prefill, which "        \
    "keeps the state after the placeholders instead of the one after the real token (#55178)")     \
  X(all_record_full_decodes_only, 'A',                                                             \
    "all mode's postprocess records only after a full decode (1 + num_spec tokens, vLLM "          \
    "#41233 at 6a391a9): after a decode with fewer drafts that rejected one, the next step "       \
    "anchors at the block of its last computed token, where no state of its count lies")           \
  X(zero_draft_rows_off_spec_path, 'A',                                                            \
    "a decode row with no drafts in a run with spec decode is marked -1 and leaves the spec "      \
    "path (as does a whole batch where no row drafted): it carries no accepted count and reads "   \
    "its initial state at window entry 0, the state before the accepted drafts of its last "       \
    "step (#56531)")                                                                               \
  X(accepted_counts_read_after_condense, 'G',                                                      \
    "V1 under async scheduling reads the accepted counts the step in flight copied to the host "   \
    "at the input-batch rows the next step's condense() gave its requests, not at the rows they "  \
    "were written at: a request moved into a finished or unscheduled one's row takes that "        \
    "request's count (#53919, #51571)")                                                            \
  X(graph_dispatch_by_shape, 'G',                                                                  \
    "a batch whose rows all hold 1 + num_spec tokens, one of them a prefill chunk of that "        \
    "length, replays the spec-verify CUDA graph of its size (dispatch by shape) while the "        \
    "builder, which refreshes its persistent buffers only for batches without prefills, leaves "   \
    "the last graph step's block ids and accepted counts in them (#55766)")                        \
  X(forward_reads_column_a, 'X',                                                                   \
    "the forward reads a decode's initial temporal state at entry a of its window instead of "     \
    "a - 1: the state after the first rejected draft, or past the window when every draft "        \
    "was accepted")                                                                                \
  X(first_scheduled_block_off_by_one, 'H',                                                         \
    "all mode's metadata takes block_idx_first_scheduled_token as cdiv(c, B) - 1 (the block of "   \
    "the last computed token) instead of cdiv(c + 1, B) - 1: a chunk starting on a block "         \
    "boundary puts its intermediate states one column early")                                      \
  X(spec_slice_wrong_start, 'A',                                                                   \
    "state_indices_tensor_d is sliced to 1 + num_spec columns from seq_len // B instead of "       \
    "(seq_len - 1) // B: a decode whose last token closes a block gets the window one column "     \
    "late")                                                                                        \
  X(padded_rows_stale_index, 'G',                                                                  \
    "a CUDA-graph step copies its decode rows into the persistent state_indices buffer but "       \
    "leaves the padding rows as an earlier, larger batch left them instead of the null block "     \
    "(persistent buffers not updated in place, #34874, #40648)")                                   \
  X(unbounded_accepted_read, 'D',                                                                  \
    "the forward indexes state_indices_tensor_d[row, a - 1] with no bound: a missing count "       \
    "(no spec decode, num_accepted 0) indexes entry -1, the previous row's last entry or "         \
    "before the tensor, and a count past the row's window a later row's entry (#50021)")           \
  X(block_copies_skipped, 'A',                                                                     \
    "the runner drops the step's block copies (copy_kv_cache_blocks_inplace): a partial-hash hit " \
    "reads its private copy unfilled, and a partial tail's cache entry moves to a block that "     \
    "never received its state")                                                                    \
  X(graph_buffers_reallocated, 'G',                                                                \
    "a CUDA-graph step copies its state indices, accepted counts and inputs into newly "           \
    "allocated buffers instead of the persistent ones its graph was captured with: the replay "    \
    "reads the indices and tokens of the step that captured it (#34874, #40648)")

// X(name, bug class, what it breaks): bugs of the scheduler or block manager, planted as
// rewrites of the steps the oracle's scheduler makes.
#define MC_SCHEDULER_MUTANTS(X)                                                                    \
  X(prefix_hit_one_block_short, 'C',                                                               \
    "a new or resumed request's prefix hit drops its last block: it starts from the cached "       \
    "boundary before the longest one (none when there is none) and recomputes the rest")           \
  X(spec_blocks_left_behind, 'X',                                                                  \
    "when the running block advances past the old speculative blocks, the block manager leaves "   \
    "them where they are (not moved to the end of the table) and takes fresh blocks instead")      \
  X(async_frees_visible_at_once, 'X',                                                              \
    "with async scheduling the block pool makes a free visible at once, at the head of its free "  \
    "queue: a block freed while a step is planned that the step in flight can still read or "      \
    "write (a preempted, aborted or reset request's running or speculative block) is handed out "  \
    "again by that same planning")                                                                 \
  X(hit_lost_at_exact_boundary, 'C',                                                               \
    "a new or resumed request whose cacheable tokens (all but its last) end exactly on a block "   \
    "boundary gets a hit one block short when the longest hit reaches that boundary: it starts "   \
    "from the cached boundary before it and recomputes the block (#50409, #52897)")                \
  X(lookahead_displaces_running_column, 'H',                                                       \
    "align allocation counts the drafter's lookahead tokens (EAGLE/MTP) into the null padding: "   \
    "a chunk without drafts that ends within the lookahead of a page boundary (on it, too) gets "  \
    "a null at its running column and its running block one column right, where the worker, "      \
    "which places the running state from the scheduled tokens alone, does not look (#57605)")      \
  X(hit_leaves_free_entry, 'C',                                                                    \
    "a prefix hit on a cached block nobody holds leaves its free-queue entry valid, so the next "  \
    "take hands the block out again while the hitting request (or a later turn that hit it "       \
    "again) still holds it and reads it: the A->B->A corruption of #50630")

enum class Mutant : std::uint8_t {
  none, // the implementation under test, as specified in model/LAUNCH_KINDS.md
#define MC_MUTANT_ENUMERATOR(name, bug_class, schedule, description) name,
  MC_KERNEL_MUTANTS(MC_MUTANT_ENUMERATOR)
#undef MC_MUTANT_ENUMERATOR
};

// What a mutant breaks: the kernels (a launch is enough to kill it), the engine runner's
// bookkeeping or the scheduler's steps (both killed by the engine-level fuzz).
enum class MutantLevel : std::uint8_t { kernel, runner, scheduler };

// Whether a launch that can show a mutant's bug shows it on every run. `racy`: the bug is a
// data race between the CTAs of one launch, so on cuda the same case fails under some
// schedules and holds under others (more often on big grids); the host backend runs the
// programs one after another in grid order, one fixed schedule, so there it fails on every
// run or on none. Tools use it to expect a nondeterministic classification, and a survivor
// on cuda is no verdict on the fuzzer. Runner mutants are all deterministic.
enum class MutantSchedule : std::uint8_t { deterministic, racy };

// One entry of the catalogue: the name users pass to --mutant, its level, the bug class of
// REFERENCE.md 5 it is modelled on ('A'..'H', or 'X' for one of our own), what it breaks, and
// whether it is racy, and whether it keeps every access inside the case's buffers (false: an
// out-of-bounds kernel mutant, which can crash the process running it).
struct MutantInfo {
  std::string_view name;
  MutantLevel level = MutantLevel::kernel;
  char bug_class = 'X';
  std::string_view description;
  MutantSchedule schedule = MutantSchedule::deterministic;
  bool memory_safe = true;
};

// Every mutant: the kernel mutants in Mutant order, then the runner mutants in RunnerMutant
// order (gpu/engine/runner_mutant.h), then the scheduler mutants in SchedulerMutant order
// (harness/scheduler_mutant.h). Names are unique across the levels.
std::span<const MutantInfo> mutant_catalogue();
const MutantInfo* find_mutant(std::string_view name); // null when no mutant has that name
std::string_view to_string(MutantLevel level);        // "kernel", "runner" or "scheduler"
// The runner part of the catalogue (entry i describes engine::RunnerMutant(i + 1)) and the
// scheduler part (entry i describes harness::SchedulerMutant(i + 1)).
std::span<const MutantInfo> runner_mutants();
std::span<const MutantInfo> scheduler_mutants();
std::string_view to_string(MutantSchedule schedule); // "deterministic" or "racy"

// The kernel part of the catalogue (entry i describes Mutant(i + 1)).
std::span<const MutantInfo> kernel_mutants();
std::string_view to_string(Mutant mutant); // "none" for the clean kernels
std::optional<Mutant> find_kernel_mutant(std::string_view name);

// The mutant named `name` in `entries`, the part of the catalogue whose entry i describes
// E(i + 1) (Mutant, engine::RunnerMutant or harness::SchedulerMutant); E::none for "none".
template <class E>
std::optional<E> find_in_catalogue(std::span<const MutantInfo> entries, std::string_view name) {
  if (name == "none") return E::none;
  for (std::size_t i = 0; i < entries.size(); ++i)
    if (entries[i].name == name) return static_cast<E>(i + 1);
  return std::nullopt;
}

template <Mutant M> using MutantTag = std::integral_constant<Mutant, M>;

// Calls `f(MutantTag<m>{})` with the runtime `mutant` as a compile-time constant: the one
// switch from a selected mutant to its instantiation (host code; nvcc host code too).
template <class F> decltype(auto) visit_mutant(Mutant mutant, F&& f) {
  switch (mutant) {
#define MC_MUTANT_CASE(name, bug_class, schedule, description)                                     \
  case Mutant::name:                                                                               \
    return f(MutantTag<Mutant::name>{});
    MC_KERNEL_MUTANTS(MC_MUTANT_CASE)
#undef MC_MUTANT_CASE
  case Mutant::none:
    break;
  }
  return f(MutantTag<Mutant::none>{});
}

} // namespace mc::gpu
