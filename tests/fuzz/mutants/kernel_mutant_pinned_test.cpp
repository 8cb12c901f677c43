// Every kernel mutant of the catalogue is killed by one pinned case: a generated case whose
// single launch the mutant's kernels get wrong and the clean kernels get right, both asserted.
// The fast guard of each mutant (no campaign, no shrinking); the campaigns that find and shrink
// a counterexample of each are kernel_mutant_kill_test.cpp's and `mambacheck mutants`'.
//
// A pinned case is a failing case of `mambacheck fuzz --backend host --mutant NAME`: its case
// seed and generator size (a finding's first_case_seed and size in the JSON report), drawn with
// the generator preset named here (--focus). Every mutant of the catalogue must have exactly
// one: a mutant added without one fails here with its name. A change to the generator redraws
// every case: a pin that no longer kills its mutant is found again the same way.
#include "fuzz/campaign/kernel_campaign.h"
#include "fuzz/gen_launch.h"
#include "gpu/host_backend.h"
#include "gpu/mutant.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <cstdint>
#include <set>
#include <string>
#include <string_view>

namespace mc::fuzz {
namespace {

struct PinnedCase {
  std::string_view mutant;
  std::uint64_t case_seed = 0;
  int size = 0;
  std::string_view focus = "default"; // gen_options_named
};

// Each the first failing case of `mambacheck fuzz --backend host --mutant NAME --seed 1 --cases
// 300 --max-size 40 --report r.json` (--focus big-offsets for block_offset_32bit, whose bug
// shows only past 4 GiB). For the out-of-bounds mutants the first that is a wrong result, not
// a crash: where a wild read lands depends on the process's memory, a wrong byte does not; the
// one that reads through a null pointer faults wherever it runs, and its pin is a crash.
constexpr PinnedCase kPinned[] = {
    {"precopy_guard_by_address", 21, 20},
    {"same_block_copy_skipped", 21, 20},
    {"overlap_copied_backwards", 37, 36},
    {"ds_shift_backwards", 27, 26},
    {"vector_tail_dropped", 11, 10},
    {"vector_head_dropped", 11, 10},
    {"null_block_skipped", 21, 20},
    {"block_offset_32bit", 1, 0, "big-offsets"},
    {"temporal_ignores_bias_column", 1, 0},
    {"conv_source_at_bias_column", 1, 0},
    {"sd_bias_in_elements", 1, 0},
    {"ds_tail_ignores_bias", 21, 20},
    {"only_group0_copied", 4, 3},
    {"tables_of_group0", 4, 3},
    {"conv_one_row_short", 1, 0},
    {"only_first_tensor_copied", 4, 3},
    {"decide_reads_reset_accepted", 32, 31},
    {"reset_races_other_programs", 40, 39},
    {"reset_not_written", 2, 1},
    {"reset_on_every_copy", 1, 0},
    {"same_column_copied", 2, 1},
    {"precopy_ignores_token_bias", 17, 16},
    {"preprocess_curr_floor", 8, 7},
    {"preprocess_bias_is_accepted", 8, 7},
    {"preprocess_reset_when_fresh", 8, 7},
    {"preprocess_src_after_update", 8, 7},
    {"batch_copy_drops_last", 25, 24},
    {"table_row_from_slot", 24, 23},
    {"slot_table_row_from_batch_row", 32, 31},
    {"precopy_copies_without_source", 16, 15},
    {"precopy_reads_unbound_idx_mapping", 16, 15}, // a read through a null pointer: always a fault
};

// A run of a case in a forked child: an out-of-bounds mutant may fault, and a fault is a
// failure of the case like a wrong byte (a campaign's verdict, fuzz/isolate.h).
constexpr double kCaseSecondsMax = 120.0;

const PinnedCase* pinned_case_of(std::string_view mutant) {
  for (const PinnedCase& p : kPinned)
    if (p.mutant == mutant) return &p;
  return nullptr;
}

LaunchSpec spec_of(const PinnedCase& p) {
  const std::optional<GenOptions> gen = gen_options_named(p.focus);
  EXPECT_TRUE(gen.has_value()) << p.mutant << ": focus " << p.focus;
  return gen_launch_spec(gen.value_or(GenOptions::host_default()))(rc::Random(p.case_seed), p.size)
      .value();
}

CaseVerdict judge(const LaunchSpec& spec, gpu::Mutant mutant) {
  return judge_case_isolated(
      spec,
      [mutant](const model::LaunchCase& launch) { return gpu::run_launch_host(launch, mutant); },
      kCaseSecondsMax);
}

class KernelMutantPinnedCase : public testing::TestWithParam<std::size_t> {};

TEST_P(KernelMutantPinnedCase, FailsWithTheMutantAndHoldsClean) {
  const gpu::MutantInfo& info = gpu::kernel_mutants()[GetParam()];
  const auto mutant = static_cast<gpu::Mutant>(GetParam() + 1);
  ASSERT_EQ(gpu::to_string(mutant), info.name);
  const PinnedCase* pinned = pinned_case_of(info.name);
  ASSERT_NE(pinned, nullptr) << info.name << " has no pinned case: run `mambacheck fuzz --backend "
                             << "host --mutant " << info.name << " --report r.json` and add a "
                             << "finding's first_case_seed and size to kPinned";
  const LaunchSpec spec = spec_of(*pinned);
  const std::string where =
      fmt::format("{}: case seed {} size {} focus {} ({} rows of {})", info.name, pinned->case_seed,
                  pinned->size, pinned->focus, spec.num_reqs, model::to_string(spec.kind));
  const CaseVerdict clean = judge(spec, gpu::Mutant::none);
  EXPECT_FALSE(clean.failure.has_value())
      << where << ": the clean kernels fail: " << *clean.failure;
  const CaseVerdict mutated = judge(spec, mutant);
  EXPECT_TRUE(mutated.failure.has_value())
      << where << ": the mutant's kernels hold (a change to the generator redraws the case: pin "
      << "a case that kills it again)";
}

INSTANTIATE_TEST_SUITE_P(AllKernelMutants, KernelMutantPinnedCase,
                         testing::Range<std::size_t>(0, gpu::kernel_mutants().size()),
                         [](const testing::TestParamInfo<std::size_t>& param) {
                           return std::string(gpu::kernel_mutants()[param.param].name);
                         });

// Each pin names a kernel mutant of the catalogue, once: a renamed or removed mutant leaves no
// pin behind that guards nothing.
TEST(KernelMutantPinnedCases, EachNamesOneKernelMutantOnce) {
  std::set<std::string_view> names;
  for (const PinnedCase& p : kPinned) {
    EXPECT_TRUE(gpu::find_kernel_mutant(p.mutant).has_value())
        << p.mutant << " is no kernel mutant of the catalogue";
    EXPECT_TRUE(names.insert(p.mutant).second) << p.mutant << " is pinned twice";
  }
  EXPECT_EQ(names.size(), gpu::kernel_mutants().size())
      << "pinned cases for " << names.size() << " of the catalogue's kernel mutants";
}

} // namespace
} // namespace mc::fuzz
