// Differences of one engine step, oracle vs backend (difference.h).
#include "harness/difference.h"

#include "model/errors.h"
#include "model/request_arrays.h"

#include <fmt/format.h>

#include <algorithm>

namespace mc::harness {
namespace {

void name_tensor(const model::Layout& layout, std::int32_t tensor, Difference& d) {
  const model::StateTensor& t = layout.tensors[static_cast<std::size_t>(tensor)];
  d.tensor = tensor;
  d.group = t.group;
  d.layer = t.layer;
  d.state = t.state;
}

std::string tensor_text(const model::Layout& layout, std::int32_t tensor) {
  const model::StateTensor& t = layout.tensors[static_cast<std::size_t>(tensor)];
  return fmt::format("tensor {} (group {}, layer {}, state {} '{}')", tensor, t.group, t.layer,
                     t.state, t.shape.name);
}

std::string describe_decision(const model::CopyDecision& d) {
  return fmt::format(
      "row {} slot {} tensor {} cols {}->{} bias {} blocks {}->{} offset {} bytes {}", d.batch_row,
      d.slot, d.tensor, d.src_col, d.dst_col, d.token_bias, d.src_block_id, d.dst_block_id,
      d.src_byte_offset, d.bytes);
}

std::optional<Difference> compare_arrays(const model::RequestArrays& o,
                                         const model::RequestArrays& g) {
  for (const model::RequestArrayField& f : model::kRequestArrays) {
    const std::string_view name = f.name;
    const auto& a = o.*f.member;
    const auto& b = g.*f.member;
    Difference d{.kind = "array"};
    if (a.size() != b.size()) {
      d.array = name;
      d.text = fmt::format("array {}: {} entries on the oracle, {} on the backend", name, a.size(),
                           b.size());
      return d;
    }
    for (std::size_t i = 0; i < a.size(); ++i)
      if (a[i] != b[i]) {
        d.array = fmt::format("{}[{}]", name, i);
        d.text = fmt::format("array {}[{}]: oracle {}, backend {}", name, i, a[i], b[i]);
        return d;
      }
  }
  return std::nullopt;
}

std::optional<Difference> compare_launch(const model::Layout& layout, const model::Step& step,
                                         const oracle::engine::LaunchRecord& o,
                                         const gpu::engine::LaunchRecord& g) {
  if (o.kind != g.kind)
    return Difference{.kind = "launch_kind",
                      .text = fmt::format("kind: oracle {}, backend {}", model::to_string(o.kind),
                                          model::to_string(g.kind))};
  if (o.deferred != g.deferred)
    return Difference{.kind = "launch_kind",
                      .text =
                          fmt::format("deferred: oracle {}, backend {}", o.deferred, g.deferred)};
  // Kernels that report effects only word an unsupported launch their own way.
  const bool same_reason = !g.decisions_recorded || o.unsupported_reason == g.unsupported_reason;
  if (o.status != g.status || !same_reason)
    return Difference{.kind = "status",
                      .text = fmt::format("status: oracle '{}', backend '{}'", o.unsupported_reason,
                                          g.unsupported_reason)};
  const std::size_t n =
      g.decisions_recorded ? std::max(o.decisions.size(), g.decisions.size()) : 0;
  for (std::size_t i = 0; i < n; ++i) {
    const bool has_o = i < o.decisions.size();
    const bool has_g = i < g.decisions.size();
    if (has_o && has_g && o.decisions[i] == g.decisions[i]) continue;
    const model::CopyDecision& any = has_o ? o.decisions[i] : g.decisions[i];
    const auto row = static_cast<std::size_t>(any.batch_row);
    Difference d{.kind = "decision",
                 .request = row < step.scheduled.size() ? step.scheduled[row].req_id : "?",
                 .block = any.dst_block_id,
                 .byte_begin = any.src_byte_offset,
                 .byte_end = any.src_byte_offset + any.bytes};
    if (any.tensor >= 0 && static_cast<std::size_t>(any.tensor) < layout.tensors.size())
      name_tensor(layout, any.tensor, d);
    d.text = fmt::format("decision {} (request {}): oracle {}, backend {}", i, d.request,
                         has_o ? describe_decision(o.decisions[i]) : "none",
                         has_g ? describe_decision(g.decisions[i]) : "none");
    return d;
  }
  return compare_arrays(o.requests, g.requests);
}

} // namespace

std::optional<Difference> difference_of_forward(const model::Step& step,
                                                const oracle::engine::StepRecord& oracle_record,
                                                const gpu::engine::StepRecord& backend_record) {
  if (backend_record.stopped) return std::nullopt; // the launches' difference says why
  if (const std::optional<model::MetadataDifference> m =
          model::first_metadata_difference(backend_record.metadata, oracle_record.metadata)) {
    Difference d{.kind = "metadata", .step = step.index, .field = m->field};
    const std::string where =
        m->row < 0 ? std::string("the batch")
                   : fmt::format("row {} ({})", m->row,
                                 m->batch_row < 0 ? std::string("a CUDA-graph padding row")
                                                  : fmt::format("batch row {}", m->batch_row));
    if (m->batch_row >= 0 && static_cast<std::size_t>(m->batch_row) < step.scheduled.size())
      d.request = step.scheduled[static_cast<std::size_t>(m->batch_row)].req_id;
    d.text = fmt::format("step {}: forward metadata, {}{}: {} is {} on the backend, {} in the "
                         "oracle",
                         step.index, where, d.request.empty() ? "" : " " + d.request, m->field,
                         m->a, m->b);
    return d;
  }
  if (const std::optional<gpu::engine::ForwardReadFinding>& r = backend_record.forward_read) {
    Difference d{.kind = r->kind, .step = step.index, .tensor = r->tensor, .block = r->block,
                 .text = r->text};
    if (r->batch_row >= 0 && static_cast<std::size_t>(r->batch_row) < step.scheduled.size())
      d.request = step.scheduled[static_cast<std::size_t>(r->batch_row)].req_id;
    return d;
  }
  return std::nullopt;
}

std::optional<Difference> difference_of_step(const model::Layout& layout, const model::Step& step,
                                             const oracle::engine::StepRecord& o,
                                             const gpu::engine::StepRecord& g) {
  std::optional<Difference> d;
  if (!g.rejected.empty()) {
    d = Difference{.kind = "rejected",
                   .launch = static_cast<std::int32_t>(g.launches.size()),
                   .text = fmt::format("the backend rejected a launch: {}", g.rejected)};
  } else if (o.launches.size() != g.launches.size()) {
    d = Difference{.kind = "launch_count",
                   .text = fmt::format("launches: oracle ran {}, backend {}", o.launches.size(),
                                       g.launches.size())};
  } else {
    for (std::size_t i = 0; i < o.launches.size() && !d; ++i)
      if ((d = compare_launch(layout, step, o.launches[i], g.launches[i]))) {
        d->launch = static_cast<std::int32_t>(i);
        d->launch_kind = std::string(model::to_string(o.launches[i].kind));
        d->text = fmt::format("launch {} ({}): {}", i, d->launch_kind, d->text);
      }
  }
  if (d) {
    d->step = step.index;
    d->text = fmt::format("step {}: {}", step.index, d->text);
  }
  return d;
}

Difference arena_difference(const model::Layout& layout, std::int32_t arena, std::int64_t at,
                            std::int64_t end) {
  Difference d{.kind = "arena"};
  for (std::size_t t = 0; t < layout.tensors.size(); ++t) {
    const model::StateTensor& st = layout.tensors[t];
    if (st.arena != arena || at < st.offset_bytes) continue;
    const std::int64_t block = (at - st.offset_bytes) / st.block_stride_bytes;
    const std::int64_t in_block = at - st.block_offset_bytes(block);
    if (in_block >= st.natural_bytes) continue;
    name_tensor(layout, static_cast<std::int32_t>(t), d);
    d.block = block;
    d.byte_begin = in_block;
    d.byte_end = in_block + std::min(end - at, st.natural_bytes - in_block);
    d.text = fmt::format("arena {}: {}, block {}, bytes [{}, {}) of the block differ", arena,
                         tensor_text(layout, static_cast<std::int32_t>(t)), block, d.byte_begin,
                         d.byte_end);
    return d;
  }
  d.byte_begin = at;
  d.byte_end = end;
  d.text = fmt::format("arena {}: bytes [{}, {}) differ outside every state", arena, at, end);
  return d;
}

std::string text_after_step(const Difference& d) {
  const std::string prefix = fmt::format("step {}: ", d.step);
  return d.text.starts_with(prefix) ? d.text.substr(prefix.size()) : d.text;
}

Difference difference_of_finding(const oracle::engine::Finding& f) {
  return Difference{.kind = fmt::format("finding:{}", oracle::engine::to_string(f.kind)),
                    .step = f.step,
                    .request = f.req_id,
                    .tensor = f.tensor,
                    .group = f.group,
                    .layer = f.layer,
                    .state = f.state,
                    .block = f.block_id,
                    .text = f.message};
}

nlohmann::ordered_json to_json(const Difference& d) {
  nlohmann::ordered_json j{{"kind", d.kind}, {"step", d.step}};
  if (d.launch >= 0) j["launch"] = d.launch;
  if (!d.launch_kind.empty()) j["launch_kind"] = d.launch_kind;
  if (!d.request.empty()) j["request"] = d.request;
  if (!d.array.empty()) j["array"] = d.array;
  if (!d.field.empty()) j["field"] = d.field;
  if (d.tensor >= 0) {
    j["tensor"] = d.tensor;
    j["group"] = d.group;
    j["layer"] = d.layer;
    j["state"] = d.state;
  }
  if (d.block >= 0) j["block"] = d.block;
  if (d.byte_begin >= 0) j["bytes"] = {d.byte_begin, d.byte_end};
  j["text"] = d.text;
  return j;
}

Difference difference_from_json(const nlohmann::ordered_json& j) {
  Difference d{.kind = j.at("kind").get<std::string>(), .step = j.at("step").get<std::int64_t>()};
  d.launch = j.value("launch", -1);
  d.launch_kind = j.value("launch_kind", "");
  d.request = j.value("request", "");
  d.array = j.value("array", "");
  d.field = j.value("field", "");
  d.tensor = j.value("tensor", -1);
  d.group = j.value("group", -1);
  d.layer = j.value("layer", -1);
  d.state = j.value("state", -1);
  d.block = j.value("block", std::int64_t{-1});
  if (j.contains("bytes")) {
    d.byte_begin = j.at("bytes").at(0).get<std::int64_t>();
    d.byte_end = j.at("bytes").at(1).get<std::int64_t>();
  }
  d.text = j.at("text").get<std::string>();
  return d;
}

} // namespace mc::harness
