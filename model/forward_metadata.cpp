#include "model/forward_metadata.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>

namespace mc::model {
namespace {

constexpr std::array<std::int32_t, 3 + 31 + 17> make_capture_sizes() {
  std::array<std::int32_t, 3 + 31 + 17> out{};
  std::size_t i = 0;
  for (const std::int32_t s : {1, 2, 4})
    out[i++] = s;
  for (std::int32_t s = 8; s < 256; s += 8)
    out[i++] = s;
  for (std::int32_t s = 256; s <= 512; s += 16)
    out[i++] = s;
  return out;
}

constexpr auto kCaptureSizes = make_capture_sizes();
static_assert(kCaptureSizes.back() == 512);

template <typename T>
std::optional<MetadataDifference> differ(std::int32_t row, std::int32_t batch_row,
                                         std::string field, const T& a, const T& b) {
  if (a == b) return std::nullopt;
  return MetadataDifference{.row = row,
                            .batch_row = batch_row,
                            .field = std::move(field),
                            .a = fmt::format("{}", a),
                            .b = fmt::format("{}", b)};
}

} // namespace

std::span<const std::int32_t> cuda_graph_capture_sizes() { return kCaptureSizes; }

std::optional<std::int32_t> cuda_graph_batch_size(std::int32_t num_decodes) {
  const auto it = std::lower_bound(kCaptureSizes.begin(), kCaptureSizes.end(), num_decodes);
  if (it == kCaptureSizes.end()) return std::nullopt;
  return *it;
}

std::optional<MetadataDifference> first_metadata_difference(const ForwardMetadata& a,
                                                            const ForwardMetadata& b) {
  if (auto d = differ(-1, -1, "num_decodes", a.num_decodes, b.num_decodes)) return d;
  if (auto d = differ(-1, -1, "num_prefills", a.num_prefills, b.num_prefills)) return d;
  if (auto d = differ(-1, -1, "num_padded", a.num_padded, b.num_padded)) return d;
  if (auto d = differ(-1, -1, "rows", a.rows.size(), b.rows.size())) return d;
  for (std::size_t i = 0; i < a.rows.size(); ++i) {
    const ForwardMetadataRow& x = a.rows[i];
    const ForwardMetadataRow& y = b.rows[i];
    const auto r = static_cast<std::int32_t>(i);
    const std::int32_t br = x.batch_row;
    if (auto d = differ(r, br, "batch_row", x.batch_row, y.batch_row)) return d;
    if (auto d = differ(r, br, "decode", x.decode, y.decode)) return d;
    if (auto d = differ(r, br, "window_start", x.window_start, y.window_start)) return d;
    if (auto d = differ(r, br, "state_indices.groups", x.state_indices.size(),
                        y.state_indices.size()))
      return d;
    for (std::size_t g = 0; g < x.state_indices.size(); ++g) {
      const std::vector<std::int32_t>& p = x.state_indices[g];
      const std::vector<std::int32_t>& q = y.state_indices[g];
      if (auto d = differ(r, br, fmt::format("state_indices[{}].size", g), p.size(), q.size()))
        return d;
      for (std::size_t j = 0; j < p.size(); ++j)
        if (auto d = differ(r, br, fmt::format("state_indices[{}][{}]", g, j), p[j], q[j]))
          return d;
    }
    if (auto d = differ(r, br, "num_accepted", x.num_accepted, y.num_accepted)) return d;
    if (auto d = differ(r, br, "block_idx_last_computed", x.block_idx_last_computed,
                        y.block_idx_last_computed))
      return d;
    if (auto d = differ(r, br, "block_idx_first_scheduled", x.block_idx_first_scheduled,
                        y.block_idx_first_scheduled))
      return d;
    if (auto d = differ(r, br, "block_idx_last_scheduled", x.block_idx_last_scheduled,
                        y.block_idx_last_scheduled))
      return d;
    if (auto d = differ(r, br, "block_idx_prev_step", x.block_idx_prev_step, y.block_idx_prev_step))
      return d;
  }
  return std::nullopt;
}

std::string describe_metadata_row(const ForwardMetadataRow& row) {
  std::string out = row.batch_row < 0 ? std::string("pad")
                                      : fmt::format("{} row {}", row.decode ? "decode" : "prefill",
                                                    row.batch_row);
  if (row.window_start >= 0) out += fmt::format(" start {}", row.window_start);
  out += fmt::format(" ids {}", row.state_indices);
  if (row.num_accepted > 0) out += fmt::format(" a {}", row.num_accepted);
  if (row.block_idx_last_scheduled >= 0)
    out += fmt::format(" blocks {}/{}/{}", row.block_idx_last_computed,
                       row.block_idx_first_scheduled, row.block_idx_last_scheduled);
  if (row.block_idx_prev_step >= 0) out += fmt::format(" anchor {}", row.block_idx_prev_step);
  return out;
}

} // namespace mc::model
