// RequestRecords: the key is a hint; every lookup finds what a lookup by id finds.
#include "oracle/engine/request_records.h"

#include <gtest/gtest.h>

#include <string>

namespace mc::oracle::engine {
namespace {

TEST(RequestRecords, KeyAndIdFindTheSameRecord) {
  RequestRecords<int> r(Structures::fast);
  bool inserted = false;
  int& a = r.emplace("a", 3, &inserted);
  EXPECT_TRUE(inserted);
  a = 7;
  EXPECT_EQ(&r.emplace("a", 3, &inserted), &a);
  EXPECT_FALSE(inserted);
  EXPECT_EQ(r.find("a", 3), &a);
  EXPECT_EQ(r.find("a"), &a);
  EXPECT_EQ(r.find("a", 0), &a);  // a key never seen: by id, then remembered
  EXPECT_EQ(r.find("a", 99), &a); // past the cache: grows it
  EXPECT_EQ(r.find("b", 3), nullptr);
  EXPECT_EQ(r.find("b"), nullptr);
  EXPECT_EQ(r.at("a", 99), 7);
}

TEST(RequestRecords, AKeyOfAnotherIdIsIgnored) {
  RequestRecords<int> r(Structures::fast);
  r.emplace("a", 1) = 1;
  r.emplace("b", 2) = 2;
  EXPECT_EQ(*r.find("b", 1), 2); // key 1 holds a: b is found by id
  EXPECT_EQ(*r.find("a", 1), 1); // key 1 now names b: a is found by id again
  EXPECT_EQ(*r.find("a", 2), 1);
  EXPECT_EQ(*r.find("b", 2), 2);
}

TEST(RequestRecords, EraseLeavesNothingBehind) {
  RequestRecords<std::string> r(Structures::fast);
  r.emplace("a", 0) = "first";
  r.find("a", 5); // remembered under 5 now, not under 0
  r.erase("a");
  EXPECT_TRUE(r.empty());
  EXPECT_EQ(r.find("a", 0), nullptr);
  EXPECT_EQ(r.find("a", 5), nullptr);
  r.emplace("c", 5) = "c";
  r.emplace("a", 0) = "second"; // a new record under the old id
  EXPECT_EQ(*r.find("a", 0), "second");
  EXPECT_EQ(*r.find("a", 5), "second"); // key 5 holds c: by id
  EXPECT_EQ(*r.find("c", 5), "c");
  r.erase("nobody");
  EXPECT_FALSE(r.contains("nobody"));
}

} // namespace
} // namespace mc::oracle::engine
