// The kernel mutants: deliberate bugs of the kernels, selected at run time with `--mutant NAME`.
// A mutant is one line of MC_KERNEL_MUTANTS below (the enum, the catalogue and the dispatch to
// its kernels are generated from it) and a policy of the same name that redefines one mutation
// point of the kernels (gpu/kernels/mutant_policies.cuh; the points as specified are `Clean`,
// gpu/kernels/clean_policy.cuh). Every kernel body takes a policy type, so the clean kernels
// are the instantiation with Clean and pay nothing for the mutants (DESIGN.md, "Backends and
// kernels under test"). Mutants of the runner's bookkeeping live in gpu/engine/runner_mutant.h.
//
// Every mutant keeps its accesses inside the arenas and block tables of a valid case (a
// wrong byte, never a wild address), so a campaign against it reports a mismatch on the
// host backend instead of crashing the process.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>

namespace mc::gpu {

// X(name, bug class of REFERENCE.md 5 ('A'..'H', 'X' = one of ours), what it breaks)
#define MC_KERNEL_MUTANTS(X)                                                                       \
  X(precopy_guard_by_address, 'D',                                                                 \
    "precopy skips a row when the source and destination BLOCKS are equal (physical "              \
    "addresses compared instead of logical columns), losing aliased same-block shifts")            \
  X(same_block_copy_skipped, 'D',                                                                  \
    "a copy whose source and destination block are the same is recorded but not done, so a "       \
    "same-block conv shift never happens")                                                         \
  X(overlap_copied_backwards, 'D',                                                                 \
    "an overlapping (same-block) flat copy runs from the last byte down: not memmove-safe "        \
    "for the left shift of a conv window (#50729)")                                                \
  X(ds_shift_backwards, 'D',                                                                       \
    "a same-block DS row shift walks the elements from the end: not memmove-safe")                 \
  X(vector_tail_dropped, 'D',                                                                      \
    "the 16-byte vector path stops at the last 16-byte boundary: the tail bytes of a copy "        \
    "are lost")                                                                                    \
  X(vector_head_dropped, 'D',                                                                      \
    "the 16-byte vector path starts at the first 16-byte boundary: the head bytes before it "      \
    "are lost")                                                                                    \
  X(null_block_skipped, 'D',                                                                       \
    "null block (0) confused with the pad (-1): a copy reading block 0 is skipped (#50021)")       \
  X(block_offset_32bit, 'B',                                                                       \
    "block_id x block stride kept in 32 bits: offsets past 4 GiB wrap (#35275)")                   \
  X(temporal_ignores_bias_column, 'F',                                                             \
    "the temporal source is bt(src) like conv, not bt(src + bias): the bias column is "            \
    "ignored (#42406)")                                                                            \
  X(conv_source_at_bias_column, 'F',                                                               \
    "the conv source is the block at column src + bias like temporal, read from its start "        \
    "(#42406)")                                                                                    \
  X(sd_bias_in_elements, 'B',                                                                      \
    "the SD conv source offset is bias x element size instead of bias token rows")                 \
  X(ds_tail_ignores_bias, 'E',                                                                     \
    "each DS dim row is copied from its start, not from its bias (the per-row tail ignores "       \
    "the bias, #38897)")                                                                           \
  X(only_group0_copied, 'X',                                                                       \
    "only the tensors of mamba group 0 are copied (the loop over groups stops after the "          \
    "first); every copy is still recorded")                                                        \
  X(conv_one_row_short, 'X', "a conv copy moves one token of the window less than w - bias")       \
  X(only_first_tensor_copied, 'X',                                                                 \
    "only the first (group, layer, state) tensor of a copying request is copied (all are "         \
    "recorded)")                                                                                   \
  X(decide_reads_reset_accepted, 'D',                                                              \
    "postprocess_align decides a copy from a after its reset to 1 (no launch-time snapshot of "    \
    "num_accepted)")                                                                               \
  X(reset_not_written, 'X',                                                                        \
    "the reset of a to 1 when source and destination columns are equal is not written")            \
  X(reset_on_every_copy, 'X',                                                                      \
    "a is reset to 1 after every post-step copy, not only when the columns are equal")             \
  X(same_column_copied, 'X',                                                                       \
    "a save whose source and destination column are equal with bias 0 still copies (and "          \
    "records) the state onto itself")                                                              \
  X(precopy_ignores_token_bias, 'F', "precopy copies with bias 0 instead of its token_bias")       \
  X(preprocess_curr_floor, 'A',                                                                    \
    "preprocess_align takes the new column as floor((c + q) / B) - 1 instead of cdiv - 1")         \
  X(preprocess_bias_is_accepted, 'F',                                                              \
    "preprocess_align sets token_bias to a instead of max(a - 1, 0)")                              \
  X(preprocess_reset_when_fresh, 'A',                                                              \
    "preprocess_align resets a to 1 also for a request that had no column (old < 0)")              \
  X(preprocess_src_after_update, 'D',                                                              \
    "preprocess_align reads the old column after writing the new one: src_col is the new "         \
    "column, so the precopy never runs")                                                           \
  X(batch_copy_drops_last, 'X', "the batched flat copy (V1 plan) never copies its last entry")

enum class Mutant : std::uint8_t {
  none, // the implementation under test, as specified in model/LAUNCH_KINDS.md
#define MC_MUTANT_ENUMERATOR(name, bug_class, description) name,
  MC_KERNEL_MUTANTS(MC_MUTANT_ENUMERATOR)
#undef MC_MUTANT_ENUMERATOR
};

// One entry of a mutant catalogue: the name users pass to --mutant, the bug class of
// REFERENCE.md 5 it is modelled on ('A'..'H', or 'X' for one of our own), and what it breaks.
struct MutantInfo {
  std::string_view name;
  char bug_class = 'X';
  std::string_view description;
};

// Every kernel mutant except none, in enum order (entry i describes Mutant(i + 1)).
std::span<const MutantInfo> kernel_mutants();
std::string_view to_string(Mutant mutant); // "none" for the clean kernels
std::optional<Mutant> find_kernel_mutant(std::string_view name);

template <Mutant M> using MutantTag = std::integral_constant<Mutant, M>;

// Calls `f(MutantTag<m>{})` with the runtime `mutant` as a compile-time constant: the one
// switch from a selected mutant to its instantiation (host code; nvcc host code too).
template <class F> decltype(auto) visit_mutant(Mutant mutant, F&& f) {
  switch (mutant) {
#define MC_MUTANT_CASE(name, bug_class, description)                                               \
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
