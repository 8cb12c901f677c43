// The header line of a trace: TraceHeader to JSON and back (FORMAT.md, "Header line").
//
// Reading checks the format name and the version first (a newer version is refused before
// anything else is looked at, since its fields may mean other things), then every field, and
// resolves a preset name into its layout spec and absent pool sizes into num_blocks. The
// layout itself is built and checked by the reader (model::build_layout).
#pragma once

#include "model/json_field.h"
#include "scenarios/trace.h"

#include <nlohmann/json.hpp>

namespace mc::scenarios {

using model::fail_field;
using model::Field;
using model::FieldError;

// Asserts a header whose preset (if any) has the groups of layout_spec.
nlohmann::ordered_json header_to_json(const TraceHeader& header);

// Throws FieldError naming the field.
TraceHeader header_from_json(const Field& root);

} // namespace mc::scenarios
