// The registry of named address ranges a crash report reads (model/address_ranges.h).
#include "model/address_ranges.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <thread>

namespace mc::model {
namespace {

// Addresses are only compared, never dereferenced: plain numbers as pointers.
const void* at(std::uint64_t address) {
  return reinterpret_cast<const void*>(address);
}

TEST(AddressRanges, NamesTheRangeInsideOrNextToAnAddress) {
  AddressRangeScope scope;
  scope.add(at(0x10000000), 0x100, "arena 0 (conv of group 0 layer 0)");
  scope.add(at(0x10010000), 0x40, "block table of group 1");
  EXPECT_EQ(describe(locate_address(0x10000010)),
            "in arena 0 (conv of group 0 layer 0) at byte 16");
  EXPECT_EQ(describe(locate_address(0x10010040 + 12)),
            "12 bytes past the end of block table of group 1");
  EXPECT_EQ(describe(locate_address(0x10010040)), "0 bytes past the end of block table of group 1");
  EXPECT_EQ(describe(locate_address(0x1000fffd)),
            "3 bytes before the start of block table of group 1");
  // Nearer to the end of the arena than to the start of the table.
  EXPECT_EQ(describe(locate_address(0x10000100 + 0x100)),
            "256 bytes past the end of arena 0 (conv of group 0 layer 0)");
  EXPECT_EQ(describe(locate_address(0)), "in no buffer of the case");
  EXPECT_EQ(describe(locate_address(0x10010040 + kRangeNearBytesMax)), "in no buffer of the case");
  EXPECT_EQ(locate_address(0x10010040 + kRangeNearBytesMax - 1).relation, RangeRelation::past_end);
}

TEST(AddressRanges, ScopesNestAndDropWhatTheyAdded) {
  EXPECT_EQ(address_ranges_registered(), 0);
  {
    AddressRangeScope outer;
    outer.add(at(0x1000), 16, "outer");
    {
      AddressRangeScope inner;
      inner.add(at(0x1000), 8, "inner");
      inner.add(at(0x5000), 0, "empty: not added");
      EXPECT_EQ(address_ranges_registered(), 2);
      EXPECT_EQ(describe(locate_address(0x1004)), "in inner at byte 4"); // the latest holding it
    }
    EXPECT_EQ(address_ranges_registered(), 1);
    EXPECT_EQ(describe(locate_address(0x1004)), "in outer at byte 4");
  }
  EXPECT_EQ(address_ranges_registered(), 0);
}

TEST(AddressRanges, PastTheLimitRangesAreDroppedAndScopesStillBalance) {
  AddressRangeScope outer;
  for (int i = 0; i < kAddressRangesMax + 5; ++i)
    outer.add(at(0x100000 + 0x100 * static_cast<std::uint64_t>(i)), 16, "r");
  EXPECT_EQ(address_ranges_registered(), kAddressRangesMax);
  {
    AddressRangeScope inner;
    inner.add(at(0x900000), 16, "dropped");
    EXPECT_EQ(address_ranges_registered(), kAddressRangesMax);
  }
  EXPECT_EQ(address_ranges_registered(), kAddressRangesMax);
}

TEST(AddressRanges, LongNamesAreCut) {
  AddressRangeScope scope;
  scope.add(at(0x1000), 16, std::string(200, 'n'));
  const RangeLocation where = locate_address(0x1000);
  EXPECT_EQ(std::string(where.name), std::string(kRangeNameBytesMax - 1, 'n'));
}

TEST(AddressRanges, EachThreadHasItsOwn) {
  AddressRangeScope scope;
  scope.add(at(0x1000), 16, "main thread's");
  int seen = -1;
  std::thread([&] { seen = address_ranges_registered(); }).join();
  EXPECT_EQ(seen, 0);
  EXPECT_EQ(address_ranges_registered(), 1);
}

} // namespace
} // namespace mc::model
