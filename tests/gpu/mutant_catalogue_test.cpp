// The kernel mutant catalogue: names unique and lookups round-trip, entries in enum order,
// every bug class one of REFERENCE.md 5's (or X), and the clean kernels unchanged by it.
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
  EXPECT_EQ(static_cast<std::size_t>(Mutant::batch_copy_drops_last), kernel_mutants().size());
  EXPECT_EQ(to_string(static_cast<Mutant>(kernel_mutants().size() + 1)), "none"); // out of range
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
