// Names for error messages: a state tensor as (group, layer, state), a row as request/slot.
//
// Every InputError of the oracle names the request (batch row and slot), the tensor and
// the bad index (LAUNCH_KINDS.md, "Validity"); these helpers keep those names uniform.
#pragma once

#include "model/launch.h"

#include <cstdint>
#include <string>

namespace mc::oracle {

// "tensor 3 (group 0 'mamba', layer 1, state 0 'conv')".
std::string describe_tensor(const model::Layout& layout, std::int32_t tensor);

// "request row 2 (slot 5)"; V1 kinds have slot == row.
std::string describe_row(std::int32_t batch_row, std::int32_t slot);

} // namespace mc::oracle
