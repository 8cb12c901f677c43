// The per-request arrays of a launch (launch.h, RequestArrays) described once: each array's
// name (its case-file name and the name differences print), its member, and how it is indexed,
// which also gives its length. Case files, comparisons, differences and the device upload all
// walk this table, so adding an array touches RequestArrays and this table only.
#pragma once

#include "model/launch.h"

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

namespace mc::model {

enum class ArrayIndexing : std::uint8_t {
  by_slot,         // [num_slots]: a request's slot (== its batch row in V1 kinds)
  by_batch_row,    // [num_reqs]: the launch's batch row
  by_row_boundary, // [num_reqs + 1]: where each batch row starts (a prefix sum)
};

struct RequestArrayField {
  std::string_view name;
  std::vector<std::int32_t> RequestArrays::*member;
  ArrayIndexing indexing;
};

inline constexpr std::array<RequestArrayField, 11> kRequestArrays{{
    {"idx_mapping", &RequestArrays::idx_mapping, ArrayIndexing::by_batch_row},
    {"num_accepted", &RequestArrays::num_accepted, ArrayIndexing::by_slot},
    {"state_idx", &RequestArrays::state_idx, ArrayIndexing::by_slot},
    {"num_scheduled", &RequestArrays::num_scheduled, ArrayIndexing::by_slot},
    {"num_computed", &RequestArrays::num_computed, ArrayIndexing::by_slot},
    {"num_draft", &RequestArrays::num_draft, ArrayIndexing::by_slot},
    {"new_num_computed", &RequestArrays::new_num_computed, ArrayIndexing::by_slot},
    {"query_start_loc", &RequestArrays::query_start_loc, ArrayIndexing::by_row_boundary},
    {"src_col", &RequestArrays::src_col, ArrayIndexing::by_slot},
    {"token_bias", &RequestArrays::token_bias, ArrayIndexing::by_slot},
    {"num_accepted_out", &RequestArrays::num_accepted_out, ArrayIndexing::by_slot},
}};

// The length an array of this indexing has in a launch of num_reqs rows over num_slots slots.
constexpr std::int64_t array_length(ArrayIndexing indexing, std::int32_t num_reqs,
                                    std::int32_t num_slots) {
  switch (indexing) {
  case ArrayIndexing::by_batch_row:
    return num_reqs;
  case ArrayIndexing::by_row_boundary:
    return std::int64_t{num_reqs} + 1;
  case ArrayIndexing::by_slot:
    return num_slots;
  }
  return -1;
}

} // namespace mc::model
