// GenOptions as JSON: a campaign tells its case workers how it draws cases (fuzz/case_workers.h),
// every field, so that a worker draws case i exactly as the campaign's process would.
#include "fuzz/gen_launch.h"

#include <nlohmann/json.hpp>

namespace mc::fuzz {

std::vector<std::string> kind_names(const std::vector<model::LaunchKind>& kinds) {
  std::vector<std::string> names;
  for (const model::LaunchKind kind : kinds)
    names.emplace_back(model::to_string(kind));
  return names;
}

nlohmann::json to_json(const GenOptions& o) {
  const ClassWeights& w = o.weights;
  const SaveRowWeights& s = o.save_rows;
  const TableVariantWeights& t = o.tables;
  return {{"kinds", kind_names(o.kinds)},
          {"weights", {w.tiny, w.small, w.wide_states, w.grid, w.big_offset}},
          {"save_rows", {s.no_copy, s.copy, s.same_column, s.same_column_shift}},
          {"tables",
           {t.plain, t.alias_conv, t.alias_temporal, t.null_read, t.shared_read, t.prefix_dup}},
          {"num_spec_min", o.num_spec_min},
          {"grid_layers", {o.grid_layers_min, o.grid_layers_max}},
          {"grid_reqs", {o.grid_reqs_min, o.grid_reqs_max}},
          {"arena_bytes_max", o.arena_bytes_max},
          {"random_size", o.random_size}};
}

GenOptions gen_options_from_json(const nlohmann::json& j) {
  GenOptions o;
  for (const nlohmann::json& kind : j.at("kinds"))
    o.kinds.push_back(model::parse_launch_kind(kind.get<std::string>()));
  const nlohmann::json& w = j.at("weights");
  o.weights = ClassWeights{.tiny = w.at(0),
                           .small = w.at(1),
                           .wide_states = w.at(2),
                           .grid = w.at(3),
                           .big_offset = w.at(4)};
  const nlohmann::json& s = j.at("save_rows");
  o.save_rows = SaveRowWeights{
      .no_copy = s.at(0), .copy = s.at(1), .same_column = s.at(2), .same_column_shift = s.at(3)};
  const nlohmann::json& t = j.at("tables");
  o.tables = TableVariantWeights{.plain = t.at(0),
                                 .alias_conv = t.at(1),
                                 .alias_temporal = t.at(2),
                                 .null_read = t.at(3),
                                 .shared_read = t.at(4),
                                 .prefix_dup = t.at(5)};
  o.num_spec_min = j.at("num_spec_min");
  o.grid_layers_min = j.at("grid_layers").at(0);
  o.grid_layers_max = j.at("grid_layers").at(1);
  o.grid_reqs_min = j.at("grid_reqs").at(0);
  o.grid_reqs_max = j.at("grid_reqs").at(1);
  o.arena_bytes_max = j.at("arena_bytes_max");
  o.random_size = j.at("random_size");
  return o;
}

} // namespace mc::fuzz
