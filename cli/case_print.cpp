// The oracle's decisions of a launch case, printed (case_print.h).
#include "cli/case_print.h"

#include "model/launch_features.h"
#include "model/request_arrays.h"

#include <fmt/format.h>

namespace mc::cli {
namespace {

std::string tensor_name(const model::LaunchCase& launch, std::int32_t tensor) {
  const model::StateTensor& t = launch.layout.tensors[static_cast<std::size_t>(tensor)];
  return fmt::format("tensor {} (group {} layer {} state {} '{}')", tensor, t.group, t.layer,
                     t.state, t.shape.name);
}

} // namespace

std::string case_decisions_text(const model::LaunchCase& launch,
                                const model::LaunchResult& result) {
  std::string out = fmt::format("oracle decisions, {} over {} rows and {} slots:\n",
                                model::to_string(launch.kind), launch.num_reqs, launch.num_slots);
  if (result.status == model::LaunchStatus::unsupported)
    out += fmt::format("  unsupported: {}\n", result.unsupported_reason);
  std::size_t next = 0; // decisions are sorted by (batch_row, tensor)
  for (std::int32_t row = 0; row < launch.num_reqs; ++row) {
    out += fmt::format("  row {} (slot {}):", row,
                       model::slot_of_row(launch.kind, launch.requests, row));
    if (next == result.decisions.size() || result.decisions[next].batch_row != row)
      out += " no copy";
    out += "\n";
    for (; next < result.decisions.size() && result.decisions[next].batch_row == row; ++next) {
      const model::CopyDecision& d = result.decisions[next];
      out += fmt::format("    {}: cols {}+{}->{}, blocks {}->{}, offset {}, {} bytes\n",
                         tensor_name(launch, d.tensor), d.src_col, d.token_bias, d.dst_col,
                         d.src_block_id, d.dst_block_id, d.src_byte_offset, d.bytes);
    }
  }
  out += "arrays after the launch:\n";
  for (const model::RequestArrayField& f : model::kRequestArrays) {
    const std::vector<std::int32_t>& values = result.requests.*f.member;
    if (!values.empty()) out += fmt::format("  {}: [{}]\n", f.name, fmt::join(values, ", "));
  }
  return out;
}

nlohmann::ordered_json case_decisions_json(const model::LaunchCase& launch,
                                           const model::LaunchResult& result) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  std::size_t next = 0;
  for (std::int32_t row = 0; row < launch.num_reqs; ++row) {
    nlohmann::ordered_json copies = nlohmann::ordered_json::array();
    for (; next < result.decisions.size() && result.decisions[next].batch_row == row; ++next) {
      const model::CopyDecision& d = result.decisions[next];
      copies.push_back({{"tensor", d.tensor},
                        {"group", d.group},
                        {"layer", d.layer},
                        {"state", d.state},
                        {"src_col", d.src_col},
                        {"token_bias", d.token_bias},
                        {"dst_col", d.dst_col},
                        {"src_block_id", d.src_block_id},
                        {"dst_block_id", d.dst_block_id},
                        {"src_byte_offset", d.src_byte_offset},
                        {"bytes", d.bytes}});
    }
    rows.push_back({{"batch_row", row},
                    {"slot", model::slot_of_row(launch.kind, launch.requests, row)},
                    {"copies", std::move(copies)}});
  }
  nlohmann::ordered_json arrays = nlohmann::ordered_json::object();
  for (const model::RequestArrayField& f : model::kRequestArrays) {
    const std::vector<std::int32_t>& values = result.requests.*f.member;
    if (!values.empty()) arrays[std::string(f.name)] = values;
  }
  nlohmann::ordered_json j{
      {"kind", model::to_string(launch.kind)},
      {"num_reqs", launch.num_reqs},
      {"num_slots", launch.num_slots},
      {"status", result.status == model::LaunchStatus::ok ? "ok" : "unsupported"},
      {"rows", std::move(rows)},
      {"arrays", std::move(arrays)}};
  if (result.status == model::LaunchStatus::unsupported)
    j["unsupported_reason"] = result.unsupported_reason;
  return j;
}

} // namespace mc::cli
