// Text and JSON renderings of a layout, for `mambacheck layout`.
#pragma once

#include "model/layout.h"

#include <nlohmann/json.hpp>

#include <string>

namespace mc::cli {

std::string layout_text(const std::string& preset_name, const model::Layout& layout);
nlohmann::json layout_json(const std::string& preset_name, const model::Layout& layout);

} // namespace mc::cli
