// A step line of a trace: model::Step to JSON and back (FORMAT.md, "Step lines").
//
// This layer owns syntax only: JSON types, required and optional fields and their defaults,
// unknown keys, and the expansion of derived prompts. Whether the values make sense (counts,
// block ids, request lifetimes) is StepChecker's (trace_rules.h), which sees a model::Step
// whose member names are the JSON field names, so its messages name the same fields.
#pragma once

#include "model/json_field.h"
#include "model/step.h"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace mc::scenarios {

using model::fail_field;
using model::Field;
using model::FieldError;

// One line without its newline; fields equal to their defaults are left out.
std::string step_to_line(const model::Step& step);

// Throws FieldError. `num_groups` sizes the default of new_block_ids; `derived_vocab_size`
// expands derived prompts.
// `version` is the trace's: `expect` exists from version 2 on. `attention_groups`: the
// header's scheduler.attention_groups (their tables in attention_block_ids).
model::Step step_from_json(const Field& root, std::size_t num_groups,
                           std::int32_t derived_vocab_size, std::int32_t version,
                           std::size_t attention_groups);

// The fields an expectation may hold, in the order FORMAT.md lists them.
inline constexpr std::array<std::string_view, 10> kExpectationFields = {
    "pre_copy",      "post_copy",           "state_col",
    "num_accepted",  "prev_step_anchor",    "block_mask",
    "kv_block_mask", "preprocess_copy_idx", "postprocess_copy_idx",
    "token_bias"};

// The fields of one expectation (kExpectationFields) read from `f`, an object whose keys the
// caller has checked. Throws FieldError.
model::RowExpectation expectation_fields_from_json(const Field& f, model::RequestId req_id,
                                                   std::size_t num_groups);

// Throws FieldError when an expectation names a request not scheduled in the step, or one twice.
void check_expectations(const model::Step& step);

} // namespace mc::scenarios
