// Named layouts: a handful modelled on public hybrid models, plus tiny ones for tests.
//
// The numbers assumed for each public model are written next to it in presets.cpp;
// they follow the models' published configs as we read them, and only the state
// geometry matters here (no weights are involved).
#pragma once

#include "model/config.h"
#include "model/layout.h"

#include <string>
#include <string_view>
#include <vector>

namespace mc::model {

struct Preset {
  std::string name;
  std::string description;
  CacheConfig config; // defaults; options override fields
  LayoutSpec spec;
  bool tiny = false;  // sized for tests and fast shrinking
};

const std::vector<Preset>& all_presets();
// Throws InputError listing the known names.
const Preset& find_preset(std::string_view name);

} // namespace mc::model
