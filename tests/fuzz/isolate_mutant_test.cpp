// The out-of-bounds kernel mutant table_row_from_slot on the host backend, each case judged
// (fuzz/run_case.h) in a child process (fuzz/isolate.h): with a slot past the table's rows it
// faults, and the line names the block table it read past (or no buffer, for a read far
// past it); with a slot that is another row it is a plain mismatch. Neither takes this
// process down.
#include "fuzz/isolate.h"
#include "fuzz/run_case.h"
#include "gpu/host_backend.h"
#include "gpu/mutant.h"
#include "tests/gpu/case_helpers.h"

#include <gtest/gtest.h>

#include <fmt/format.h>
#include <signal.h>

#include <cstdint>
#include <string>

namespace mc::fuzz {
namespace {

using model::LaunchKind;

// mamba2 with conv (3 rows x 8 fp16) and temporal (2x2x2 fp32) states, each in its own arena.
model::Layout mamba2_layout() {
  return gpu::test::small_mamba2_layout();
}

// A precopy of `rows` batch rows over `slots` slots, row b mapped to slot `slot_of(b)` and
// copying column 0 to column 1 of its own table row (blocks 1 + 2b -> 2 + 2b).
template <class SlotOf>
model::LaunchCase precopy_case(std::int32_t rows, std::int32_t slots, std::int32_t row_stride,
                               SlotOf slot_of) {
  model::LaunchCase c =
      gpu::test::make_case(mamba2_layout(), LaunchKind::precopy, rows, 2, row_stride);
  c.num_slots = slots;
  c.requests.src_col.assign(static_cast<std::size_t>(slots), -1);
  c.requests.state_idx.assign(static_cast<std::size_t>(slots), 0);
  c.requests.token_bias.assign(static_cast<std::size_t>(slots), 0);
  for (std::int32_t b = 0; b < rows; ++b) {
    const std::int32_t slot = slot_of(b);
    gpu::test::set_row(c, b, {1 + 2 * b, 2 + 2 * b});
    c.requests.idx_mapping.push_back(slot);
    c.requests.src_col[static_cast<std::size_t>(slot)] = 0;
    c.requests.state_idx[static_cast<std::size_t>(slot)] = 1;
  }
  return c;
}

// The case judged against the mutant in a child: "held", "mismatch", ... as the payload.
IsolatedOutcome judge_isolated(const model::LaunchCase& c, gpu::Mutant mutant) {
  return run_isolated([&] {
    const CaseOutcome outcome = run_case(c, [mutant](const model::LaunchCase& launch) {
      return gpu::run_launch_host(launch, mutant);
    });
    return outcome.failed() ? fmt::format("failed: {}", *outcome.failure()) : std::string("held");
  });
}

TEST(IsolatedMutant, SlotFarPastTheTableFaultsInNoBuffer) {
  constexpr std::int32_t kSlots = 1 << 19;
  constexpr std::int32_t kStride = 1024; // one row is 4 KiB: slot kSlots - 1 is ~2 GiB on
  const model::LaunchCase c =
      precopy_case(1, kSlots, kStride, [](std::int32_t) { return kSlots - 1; });
  EXPECT_EQ(judge_isolated(c, gpu::Mutant::none).payload, "held");

  const IsolatedOutcome out = judge_isolated(c, gpu::Mutant::table_row_from_slot);
  ASSERT_EQ(out.end, IsolatedEnd::signaled) << out.message << "\n" << out.stderr_text;
  EXPECT_EQ(out.signal, SIGSEGV);
  // The first read of the row is group 0's conv source, column 0 of row kSlots - 1: 2 GiB
  // past the table, too far to pin on any buffer (model/address_ranges.h). The host reads a
  // copy of the table that ends at a page boundary (gpu/guarded_tables.h): one row of 4 KiB
  // starts a page before it, so the read is at a page boundary too.
  const std::string prefix = "killed by SIGSEGV (invalid memory reference) at address 0x";
  const std::string suffix = " (in no buffer of the case)";
  ASSERT_GT(out.message.size(), prefix.size() + suffix.size()) << out.message;
  EXPECT_EQ(out.message.substr(0, prefix.size()), prefix) << out.message;
  EXPECT_EQ(out.message.substr(out.message.size() - suffix.size()), suffix) << out.message;
  const std::uint64_t read = std::stoull(
      out.message.substr(prefix.size(), out.message.size() - prefix.size() - suffix.size()),
      nullptr, 16);
  EXPECT_EQ(read % 4096, 0u) << out.message;
}

// A slot one past the table's rows reads just past its end: the host backend's tables end
// against a page nothing may read (gpu/guarded_tables.h), so that read faults, on every run,
// and the line names the table.
TEST(IsolatedMutant, SlotJustPastTheTableFaultsNamingTheTable) {
  // 2 rows of 1024 columns: the table is 8 KiB, row 2 starts at its end.
  const model::LaunchCase c =
      precopy_case(2, 3, 1024, [](std::int32_t b) { return b == 0 ? 2 : 0; });
  EXPECT_EQ(judge_isolated(c, gpu::Mutant::none).payload, "held");
  for (int run = 0; run < 3; ++run) {
    const IsolatedOutcome out = judge_isolated(c, gpu::Mutant::table_row_from_slot);
    ASSERT_EQ(out.end, IsolatedEnd::signaled) << out.message << "\n" << out.payload;
    EXPECT_EQ(out.signal, SIGSEGV);
    // Row 0's first read: group 0's conv source, column 0 of row 2, the first byte past the
    // table (the address itself changes from run to run).
    const std::string suffix = "(0 bytes past the end of block table of group 0)";
    ASSERT_GE(out.message.size(), suffix.size()) << out.message;
    EXPECT_EQ(out.message.substr(out.message.size() - suffix.size()), suffix) << out.message;
    EXPECT_EQ(out.message.substr(0, 51), "killed by SIGSEGV (invalid memory reference) at add")
        << out.message;
  }
}

TEST(IsolatedMutant, SlotThatIsAnotherRowIsAMismatch) {
  // 3 rows over 4 slots, rows 0 and 1 swapped (each reads the other's blocks), row 2 in slot 2.
  const model::LaunchCase c = precopy_case(3, 4, 2, [](std::int32_t b) {
    return b == 0 ? 1 : b == 1 ? 0 : 2;
  });
  EXPECT_EQ(judge_isolated(c, gpu::Mutant::none).payload, "held");
  const IsolatedOutcome out = judge_isolated(c, gpu::Mutant::table_row_from_slot);
  ASSERT_TRUE(out.returned()) << out.message;
  EXPECT_EQ(out.payload.substr(0, 8), "failed: ") << out.payload;
}

// V1 kinds pass the row as the slot: the mutant reads what the clean kernels read.
TEST(IsolatedMutant, V1KindsAreUnchanged) {
  model::LaunchCase c = gpu::test::make_case(mamba2_layout(), LaunchKind::postprocess, 2, 4, 4);
  gpu::test::set_row(c, 0, {1, 2, 3, 0});
  gpu::test::set_row(c, 1, {4, 5, 6, 0});
  // B 4: running 5 + 4 - 1 = 8, a 1: new 8, aligned 8: bias 0, column 0 -> column 1.
  c.requests.num_accepted = {1, 1};
  c.requests.state_idx = {0, 0};
  c.requests.num_computed = {5, 5};
  c.requests.num_scheduled = {4, 4};
  c.requests.num_draft = {1, 1};
  const model::LaunchResult clean = gpu::run_launch_host(c);
  const model::LaunchResult mutated = gpu::run_launch_host(c, gpu::Mutant::table_row_from_slot);
  ASSERT_EQ(clean.decisions.size(), 4u); // 2 rows x (conv, temporal)
  EXPECT_EQ(mutated.decisions, clean.decisions);
  EXPECT_EQ(mutated.requests, clean.requests);
  ASSERT_EQ(mutated.arenas.size(), clean.arenas.size());
  for (std::size_t i = 0; i < clean.arenas.size(); ++i)
    EXPECT_EQ(mutated.arenas[i].first_difference(clean.arenas[i]), -1) << "arena " << i;
}

} // namespace
} // namespace mc::fuzz
