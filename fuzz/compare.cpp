// compare_results: status first, then decisions, requests and arena bytes (see compare.h).
#include "fuzz/compare.h"

#include <fmt/format.h>

namespace mc::fuzz {
namespace {

std::string status_with_reason(const model::LaunchResult& r) {
  if (r.status == model::LaunchStatus::ok) return "ok";
  return fmt::format("unsupported (\"{}\")", r.unsupported_reason);
}

} // namespace

std::string_view to_string(DifferenceCategory category) {
  switch (category) {
  case DifferenceCategory::status:
    return "status";
  case DifferenceCategory::decisions:
    return "decisions";
  case DifferenceCategory::requests:
    return "requests";
  case DifferenceCategory::arena:
    return "arena";
  }
  return "?";
}

std::optional<Difference> compare_results(const model::LaunchCase& launch,
                                          const model::LaunchResult& expected,
                                          const model::LaunchResult& actual) {
  if (expected.status != actual.status)
    return Difference{
        .category = DifferenceCategory::status,
        .message =
            fmt::format("{} launch status: expected {}, actual {}", model::to_string(launch.kind),
                        status_with_reason(expected), status_with_reason(actual)),
    };
  if (auto d = detail::compare_decisions(launch, expected, actual)) return d;
  if (auto d = detail::compare_requests(launch, expected.requests, actual.requests)) return d;
  return detail::compare_arenas(launch, expected, actual);
}

nlohmann::json to_json(const Difference& difference) {
  nlohmann::json j{{"category", to_string(difference.category)}, {"message", difference.message}};
  if (difference.batch_row >= 0) j["batch_row"] = difference.batch_row;
  if (difference.tensor >= 0) j["tensor"] = difference.tensor;
  if (!difference.array.empty()) j["array"] = difference.array;
  if (difference.index >= 0) j["index"] = difference.index;
  if (const auto& a = difference.arena_location) {
    nlohmann::json loc{{"arena", a->arena},
                       {"offset_bytes", a->offset_bytes},
                       {"run_bytes", a->run_bytes},
                       {"block_id", a->block_id},
                       {"offset_in_block", a->offset_in_block},
                       {"in_padding", a->in_padding},
                       {"expected_hex", a->expected_hex},
                       {"actual_hex", a->actual_hex}};
    if (a->tensor >= 0) {
      loc["tensor"] = a->tensor;
      loc["group"] = a->group;
      loc["layer"] = a->layer;
      loc["state"] = a->state;
    }
    if (a->preceding_tensor >= 0) loc["preceding_tensor"] = a->preceding_tensor;
    j["arena_location"] = std::move(loc);
  }
  return j;
}

Difference difference_from_json(const nlohmann::json& j) {
  Difference d{.message = j.at("message").get<std::string>()};
  const std::string category = j.at("category").get<std::string>();
  for (const DifferenceCategory c : {DifferenceCategory::status, DifferenceCategory::decisions,
                                     DifferenceCategory::requests, DifferenceCategory::arena})
    if (to_string(c) == category) d.category = c;
  d.batch_row = j.value("batch_row", -1);
  d.tensor = j.value("tensor", -1);
  d.array = j.value("array", "");
  d.index = j.value("index", -1);
  if (j.contains("arena_location")) {
    const nlohmann::json& a = j.at("arena_location");
    d.arena_location = ArenaLocation{.arena = a.at("arena").get<std::int32_t>(),
                                     .offset_bytes = a.at("offset_bytes").get<std::int64_t>(),
                                     .run_bytes = a.at("run_bytes").get<std::int64_t>(),
                                     .tensor = a.value("tensor", -1),
                                     .group = a.value("group", -1),
                                     .layer = a.value("layer", -1),
                                     .state = a.value("state", ""),
                                     .block_id = a.at("block_id").get<std::int64_t>(),
                                     .offset_in_block = a.at("offset_in_block").get<std::int64_t>(),
                                     .in_padding = a.at("in_padding").get<bool>(),
                                     .preceding_tensor = a.value("preceding_tensor", -1),
                                     .expected_hex = a.at("expected_hex").get<std::string>(),
                                     .actual_hex = a.at("actual_hex").get<std::string>()};
  }
  return d;
}

} // namespace mc::fuzz
