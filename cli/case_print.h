// `case DIR --print` and `--json`: the oracle's decision for every batch row of a launch case
// (each copy with its tensor, columns, token bias, blocks and bytes, or "no copy") and the
// per-request arrays after the launch, for a person (text) or a tool (JSON).
#pragma once

#include "model/launch.h"

#include <nlohmann/json.hpp>

#include <string>

namespace mc::cli {

std::string case_decisions_text(const model::LaunchCase& launch, const model::LaunchResult& result);
nlohmann::ordered_json case_decisions_json(const model::LaunchCase& launch,
                                           const model::LaunchResult& result);

} // namespace mc::cli
