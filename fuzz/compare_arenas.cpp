// Arena bytes: the first differing byte of the first differing arena, mapped back to
// the state tensor and physical block that own it (or the page padding between them),
// with the run of differing bytes from there and a hex excerpt of both sides.
#include "fuzz/compare.h"

#include <fmt/format.h>

#include <algorithm>

namespace mc::fuzz::detail {
namespace {

constexpr std::int64_t kRunScanBytesMax = std::int64_t{1} << 20; // limit of the run scan
constexpr std::int64_t kHexBytesMax = 8;

std::int64_t run_length(const model::Arena& e, const model::Arena& a, std::int64_t from) {
  const std::int64_t end = std::min(e.size_bytes(), from + kRunScanBytesMax);
  std::int64_t i = from;
  while (i < end && e.data()[i] != a.data()[i])
    ++i;
  return i - from;
}

std::string hex(const model::Arena& arena, std::int64_t from, std::int64_t n) {
  std::string out;
  for (std::int64_t i = from; i < from + std::min(n, kHexBytesMax); ++i)
    out +=
        fmt::format("{}{:02x}", out.empty() ? "" : " ", static_cast<std::uint8_t>(arena.data()[i]));
  return out;
}

// Fills the tensor fields of `loc` from the layout (block stride == page size for
// every tensor of an arena; separate tensors sit at offset 0).
void locate(const model::Layout& layout, ArenaLocation& loc) {
  const model::ArenaSpec& spec = layout.arenas[static_cast<std::size_t>(loc.arena)];
  loc.block_id = loc.offset_bytes / spec.page_bytes;
  const std::int64_t in_page = loc.offset_bytes % spec.page_bytes;
  loc.offset_in_block = in_page;
  loc.in_padding = true;
  for (std::size_t i = 0; i < layout.tensors.size(); ++i) {
    const model::StateTensor& t = layout.tensors[i];
    if (t.arena != loc.arena || in_page < t.offset_bytes) continue;
    loc.preceding_tensor = static_cast<std::int32_t>(i); // tensors sit in offset order
    if (in_page >= t.offset_bytes + t.natural_bytes) continue;
    loc.tensor = static_cast<std::int32_t>(i);
    loc.group = t.group;
    loc.layer = t.layer;
    loc.state = t.shape.name;
    loc.in_padding = false;
    loc.offset_in_block = in_page - t.offset_bytes;
    return;
  }
}

// "(token row 2, channel 5)" for conv SD, "(channel 3, token 1)" for DS, "(element 12)".
std::string element_of(const model::StateTensor& t, std::int64_t offset_in_block) {
  const std::int64_t element = offset_in_block / t.elem_size;
  if (t.kind() == model::StateKind::temporal) return fmt::format("element {}", element);
  if (t.conv_layout == model::ConvLayout::SD)
    return fmt::format("token row {}, channel {}", element / t.shape.conv_dim,
                       element % t.shape.conv_dim);
  return fmt::format("channel {}, token {}", element / t.shape.conv_state_len,
                     element % t.shape.conv_state_len);
}

std::string describe_location(const model::Layout& layout, const ArenaLocation& loc) {
  const std::int64_t page = layout.arenas[static_cast<std::size_t>(loc.arena)].page_bytes;
  if (loc.in_padding) {
    std::string after;
    if (loc.preceding_tensor >= 0) {
      const model::StateTensor& t = layout.tensors[static_cast<std::size_t>(loc.preceding_tensor)];
      after = fmt::format(", after group {} layer {} state {} which ends at byte {}", t.group,
                          t.layer, t.shape.name, t.offset_bytes + t.natural_bytes);
    }
    return fmt::format("page padding of block {} (byte {} of the {}-byte page{})", loc.block_id,
                       loc.offset_in_block, page, after);
  }
  const model::StateTensor& t = layout.tensors[static_cast<std::size_t>(loc.tensor)];
  std::string text = fmt::format("group {} layer {} state {}, block {}, byte {} of its {} natural "
                                 "bytes ({})",
                                 t.group, t.layer, t.shape.name, loc.block_id, loc.offset_in_block,
                                 t.natural_bytes, element_of(t, loc.offset_in_block));
  if (loc.offset_in_block + loc.run_bytes > t.natural_bytes)
    text += "; the run continues past the natural bytes";
  return text;
}

} // namespace

std::optional<Difference> compare_arenas(const model::LaunchCase& launch,
                                         const model::LaunchResult& expected,
                                         const model::LaunchResult& actual) {
  const auto arena_difference = [](std::string message) {
    return Difference{.category = DifferenceCategory::arena, .message = std::move(message)};
  };
  if (expected.arenas.size() != actual.arenas.size())
    return arena_difference(fmt::format("arenas: expected {}, actual {}", expected.arenas.size(),
                                        actual.arenas.size()));
  for (std::size_t i = 0; i < expected.arenas.size(); ++i) {
    const model::Arena& e = expected.arenas[i];
    const model::Arena& a = actual.arenas[i];
    if (e.size_bytes() != a.size_bytes())
      return arena_difference(
          fmt::format("arena {}: expected {} bytes, actual {}", i, e.size_bytes(), a.size_bytes()));
    const std::int64_t first = e.first_difference(a);
    if (first < 0) continue;
    ArenaLocation loc{.arena = static_cast<std::int32_t>(i), .offset_bytes = first};
    loc.run_bytes = run_length(e, a, first);
    loc.expected_hex = hex(e, first, loc.run_bytes);
    loc.actual_hex = hex(a, first, loc.run_bytes);
    if (i < launch.layout.arenas.size()) locate(launch.layout, loc);
    Difference d = arena_difference(fmt::format(
        "arena {} bytes [{}, {}) differ: {}; expected {}, actual {}", i, first,
        first + loc.run_bytes,
        i < launch.layout.arenas.size() ? describe_location(launch.layout, loc) : "no such arena",
        loc.expected_hex, loc.actual_hex));
    d.tensor = loc.tensor;
    d.arena_location = std::move(loc);
    return d;
  }
  return std::nullopt;
}

} // namespace mc::fuzz::detail
