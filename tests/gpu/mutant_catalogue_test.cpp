// The mutant catalogue: one table of kernel then runner mutants, names unique across both
// levels; the kernel part's lookups round-trip, its entries follow the enum, every bug class
// is one of REFERENCE.md 5's (or X), only the racy mutant is flagged racy.
#include "gpu/mutant.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace mc::gpu {
namespace {

TEST(KernelMutantCatalogue, HasAtLeastEighteenNamedEntries) {
  EXPECT_GE(kernel_mutants().size(), 18u);
  EXPECT_EQ(to_string(Mutant::none), "none");
  EXPECT_EQ(find_kernel_mutant("none"), Mutant::none);
}

TEST(KernelMutantCatalogue, NamesUniqueAndLookupsRoundTrip) {
  std::set<std::string> names;
  for (std::size_t i = 0; i < kernel_mutants().size(); ++i) {
    const MutantInfo& info = kernel_mutants()[i];
    const auto mutant = static_cast<Mutant>(i + 1);
    EXPECT_TRUE(names.insert(std::string(info.name)).second) << info.name;
    EXPECT_NE(info.name, "none");
    EXPECT_EQ(to_string(mutant), info.name);
    EXPECT_EQ(find_kernel_mutant(info.name), mutant) << info.name;
    EXPECT_FALSE(info.description.empty()) << info.name;
    EXPECT_NE(std::string("ABCDEFGHX").find(info.bug_class), std::string::npos) << info.name;
  }
  EXPECT_EQ(find_kernel_mutant("no_such_mutant"), std::nullopt);
  EXPECT_EQ(find_kernel_mutant(""), std::nullopt);
}

TEST(KernelMutantCatalogue, OrderFollowsTheEnum) {
  EXPECT_EQ(kernel_mutants().front().name, "precopy_guard_by_address");
  EXPECT_EQ(static_cast<std::size_t>(Mutant::precopy_reads_unbound_idx_mapping),
            kernel_mutants().size());
  EXPECT_EQ(to_string(static_cast<Mutant>(kernel_mutants().size() + 1)), "none"); // out of range
}

// The in-bounds list first, then the out-of-bounds one: only its entries are not memory-safe.
TEST(KernelMutantCatalogue, OutOfBoundsMutantsComeLastAndSaySo) {
  std::set<std::string> unsafe;
  bool seen_unsafe = false;
  for (const MutantInfo& info : mutant_catalogue()) {
    if (!info.memory_safe) unsafe.insert(std::string(info.name));
    if (info.level == MutantLevel::kernel) {
      EXPECT_TRUE(!seen_unsafe || !info.memory_safe) << info.name << " after an unsafe one";
      seen_unsafe = seen_unsafe || !info.memory_safe;
    }
  }
  EXPECT_EQ(unsafe, (std::set<std::string>{"table_row_from_slot", "slot_table_row_from_batch_row",
                                           "precopy_copies_without_source",
                                           "precopy_reads_unbound_idx_mapping"}));
  EXPECT_EQ(static_cast<std::size_t>(Mutant::batch_copy_drops_last), kernel_mutants().size() - 4);
}

TEST(MutantCatalogue, KernelThenRunnerThenSchedulerMutantsInOneTable) {
  const std::span<const MutantInfo> all = mutant_catalogue();
  const std::span<const MutantInfo> kernel = kernel_mutants();
  const std::span<const MutantInfo> runner = runner_mutants();
  const std::span<const MutantInfo> scheduler = scheduler_mutants();
  ASSERT_GT(all.size(), kernel.size());
  EXPECT_EQ(all.size(), kernel.size() + runner.size() + scheduler.size());
  EXPECT_EQ(runner.data(), all.data() + kernel.size());
  EXPECT_EQ(scheduler.data(), runner.data() + runner.size());
  std::set<std::string> names;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const MutantInfo& info = all[i];
    const MutantLevel level = i < kernel.size()                   ? MutantLevel::kernel
                              : i < kernel.size() + runner.size() ? MutantLevel::runner
                                                                  : MutantLevel::scheduler;
    EXPECT_EQ(info.level, level) << i;
    EXPECT_TRUE(names.insert(std::string(info.name)).second) << info.name;
    EXPECT_EQ(find_mutant(info.name), &info) << info.name;
  }
  EXPECT_EQ(kernel.data(), all.data());
  EXPECT_EQ(runner.back().name, "graph_buffers_reallocated");
  EXPECT_EQ(all.back().name, "hit_leaves_free_entry");
  EXPECT_EQ(find_mutant("none"), nullptr);
  EXPECT_EQ(find_mutant("no_such_mutant"), nullptr);
  EXPECT_EQ(to_string(MutantLevel::kernel), "kernel");
  EXPECT_EQ(to_string(MutantLevel::runner), "runner");
  EXPECT_EQ(to_string(MutantLevel::scheduler), "scheduler");
}

// The schedule flag: the one racy kernel mutant says so; every runner mutant (sequential
// bookkeeping) is deterministic.
TEST(MutantCatalogue, OnlyTheRacyResetIsScheduleDependent) {
  std::set<std::string> racy;
  for (const MutantInfo& info : mutant_catalogue())
    if (info.schedule == MutantSchedule::racy) racy.insert(std::string(info.name));
  EXPECT_EQ(racy, std::set<std::string>{"reset_races_other_programs"});
  const MutantInfo* info = find_mutant("reset_races_other_programs");
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->level, MutantLevel::kernel);
  EXPECT_EQ(find_kernel_mutant(info->name), Mutant::reset_races_other_programs);
  EXPECT_EQ(to_string(MutantSchedule::racy), "racy");
  EXPECT_EQ(to_string(MutantSchedule::deterministic), "deterministic");
}

TEST(KernelMutantCatalogue, VisitPassesTheMutantAsAConstant) {
  for (std::size_t i = 0; i <= kernel_mutants().size(); ++i) {
    const auto mutant = static_cast<Mutant>(i);
    const Mutant seen = visit_mutant(mutant, [](auto m) { return decltype(m)::value; });
    EXPECT_EQ(seen, mutant);
  }
}

} // namespace
} // namespace mc::gpu
