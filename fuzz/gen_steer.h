// Drawing kernel-level cases toward a coverage feature that a campaign has not reached (the
// gate's top-up): the kernel level's counterpart of the engine's steer table
// (fuzz/engine/steer.h).
//
// The draw column of model/coverage_features.def gives every kernel-level coverage feature a
// draw (one without does not compile): the campaign's generator options changed so that the
// feature is likely on every case, at any size. A top-up is short, and a campaign cycles its
// sizes from 0, so more of the same draw stays at small sizes: the default reaches big offsets
// only from size 50 on, and then in 3 cases of 100. Where a generator preset reaches the feature
// (gen_options_named) the draw is that preset's; otherwise it moves the weights or launch kinds
// that make the feature.
//
// A draw keeps the campaign's launch kinds where they can make the feature, and narrows them to
// those that can. A unit test runs every row's draw for a few small cases and demands its
// feature.
#pragma once

#include "fuzz/gen_launch.h"
#include "model/coverage.h"

#include <string_view>

namespace mc::fuzz {

struct GenSteerRow {
  std::string_view feature;   // a kernel-level coverage feature
  std::string_view draw = {}; // what the draw is, for reports: a preset's name or the change
  GenOptions (*toward)(GenOptions campaign) = nullptr; // the options drawn toward `feature`
};

// The draw toward a kernel-level feature; nullptr for a feature the kernel level does not count.
const GenSteerRow* gen_steer_row(model::CoverageFeatureId feature);

} // namespace mc::fuzz
