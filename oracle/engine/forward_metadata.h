// The oracle's forward metadata (model/forward_metadata.h): what vLLM's mamba attention
// metadata builder hands the state kernels for the step the oracle runs, derived from the
// oracle's own rows, for the harness to compare with the GPU side's builder every step.
#pragma once

#include "model/config.h"
#include "model/forward_metadata.h"
#include "oracle/engine/forward.h"

#include <span>

namespace mc::oracle::engine {

// `rows[b]` is batch row b, with num_accepted the a the forward starts from.
model::ForwardMetadata derive_forward_metadata(const model::CacheConfig& config,
                                               std::span<const ForwardRow> rows);

} // namespace mc::oracle::engine
