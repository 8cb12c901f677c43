// Shared pieces of the trace tests: headers, hand-built steps that use every field, a
// field-by-field comparison of steps, and in-memory write/read helpers.
#pragma once

#include "model/step.h"
#include "scenarios/trace.h"

#include <string>
#include <vector>

namespace mc::scenarios::testing {

// tiny-mixed preset (3 groups), tiny config (B = 4, 2 spec tokens), pools 32/20/16.
TraceHeader mixed_header();
// tiny-mamba2 preset (1 group, 32 blocks), tiny config.
TraceHeader mamba2_header();

// Five steps on mixed_header(): arrivals with and without a prefix hit, chunked prefill,
// decodes with every acceptance, a preemption and a resume, a reset, finishes.
std::vector<model::Step> hand_built_steps();

// EXPECT_EQ on every field of every member.
void expect_same_step(const model::Step& want, const model::Step& got);
void expect_same_header(const TraceHeader& want, const TraceHeader& got);

std::string write_to_string(const TraceHeader& header, const std::vector<model::Step>& steps);
std::vector<model::Step> read_all(TraceReader& reader);

} // namespace mc::scenarios::testing
