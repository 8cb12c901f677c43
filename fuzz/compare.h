// Comparison of two launch results: the first difference, explained in domain terms.
//
// Exact equality is the contract (model/LAUNCH_KINDS.md, "What a result holds"), but
// a byte offset alone says little. compare_results looks in the order a reader wants:
// the status, then the copy decisions (which row, slot, group, layer and state copied
// what), then the per-request arrays (name, index, values), and only then the arena
// bytes, mapped back to (tensor, physical block, offset in the block, natural bytes or
// page padding) with the run of differing bytes and a hex excerpt of each side.
// When both launches are unsupported their free-text reasons are not compared: two
// independent implementations word them differently.
#pragma once

#include "model/launch.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mc::fuzz {

enum class DifferenceCategory : std::uint8_t { status, decisions, requests, arena };
std::string_view to_string(DifferenceCategory category);

// Where an arena difference lies.
struct ArenaLocation {
  std::int32_t arena = 0;
  std::int64_t offset_bytes = 0; // first differing byte within the arena
  std::int64_t run_bytes = 0;    // length of the run of differing bytes from there
  std::int32_t tensor = -1;      // the state tensor owning the byte; -1 in page padding
  std::int32_t group = -1;
  std::int32_t layer = -1;
  std::string state;                  // state name ("conv", "temporal", ...), empty in padding
  std::int64_t block_id = -1;         // physical block (page) holding the byte
  std::int64_t offset_in_block = 0;   // from the start of the tensor's block (or of the page)
  bool in_padding = false;            // outside every tensor's natural bytes
  std::int32_t preceding_tensor = -1; // in padding: the last tensor starting before the byte
  std::string expected_hex;           // the first bytes of the run
  std::string actual_hex;
};

struct Difference {
  DifferenceCategory category = DifferenceCategory::status;
  std::string message;         // one or two sentences naming the first difference
  std::int32_t batch_row = -1; // decisions: the row of the first differing decision
  std::int32_t tensor = -1;    // decisions: its tensor
  std::string array;           // requests: the array name
  std::int32_t index = -1;     // requests: the index in it
  std::optional<ArenaLocation> arena_location;
};

// The first difference between `expected` and `actual` for `launch`, or nothing.
std::optional<Difference> compare_results(const model::LaunchCase& launch,
                                          const model::LaunchResult& expected,
                                          const model::LaunchResult& actual);

nlohmann::json to_json(const Difference& difference);
// The inverse of to_json (a verdict sent back by an isolated child process).
Difference difference_from_json(const nlohmann::json& j);

namespace detail {
// The pieces of compare_results, one per category (compare_*.cpp).
std::optional<Difference> compare_decisions(const model::LaunchCase& launch,
                                            const model::LaunchResult& expected,
                                            const model::LaunchResult& actual);
std::optional<Difference> compare_requests(const model::LaunchCase& launch,
                                           const model::RequestArrays& expected,
                                           const model::RequestArrays& actual);
std::optional<Difference> compare_arenas(const model::LaunchCase& launch,
                                         const model::LaunchResult& expected,
                                         const model::LaunchResult& actual);
} // namespace detail

} // namespace mc::fuzz
