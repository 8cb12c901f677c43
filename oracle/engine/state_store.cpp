// The engine oracle's two state stores (state_store.h).
#include "oracle/engine/state_store.h"

#include "model/errors.h"
#include "oracle/copy.h"
#include "oracle/copy_plan.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace mc::oracle::engine {
namespace {

// The arenas' bytes: state_io.h on them, oracle/copy.h and model/block_copy.h for the copies.
class ByteStates final : public StateStore {
public:
  explicit ByteStates(const model::Layout& layout) : layout_(layout) {
    for (const model::ArenaSpec& a : layout.arenas) {
      arenas_.emplace_back(a.size_bytes());
      arenas_.back().poison(); // a byte nothing wrote shows
    }
  }

  std::optional<std::string> check_temporal(std::int32_t tensor, std::int32_t block,
                                            model::TokenHash hash,
                                            std::span<const model::TokenHash> known) override {
    return engine::check_temporal(ref(tensor, block), hash, known);
  }
  void write_temporal(std::int32_t tensor, std::int32_t block, model::TokenHash hash) override {
    engine::write_temporal(ref(tensor, block), hash);
  }
  std::optional<std::string> check_conv(std::int32_t tensor, std::int32_t block,
                                        std::int64_t history, std::int64_t num_tokens,
                                        std::int64_t offset, const TokenWindow& tokens) override {
    return engine::check_conv(ref(tensor, block), history, num_tokens, offset, tokens);
  }
  void write_conv(std::int32_t tensor, std::int32_t block, std::int64_t history,
                  std::int64_t running, const TokenWindow& tokens) override {
    engine::write_conv(ref(tensor, block), history, running, tokens);
  }

  void apply_copies(std::span<const model::CopyDecision> decisions) override {
    oracle::apply_copies(layout_, arenas_, decisions);
  }
  void copy_blocks(std::span<const model::BlockCopy> copies) override {
    model::copy_blocks(layout_, arenas_, copies);
  }

  void read(const model::ArenaRange& range, std::span<std::byte> out) override {
    MC_ASSERT(static_cast<std::int64_t>(out.size()) == range.size_bytes);
    std::memcpy(out.data(),
                arenas_[static_cast<std::size_t>(range.arena)].data() + range.offset_bytes,
                out.size());
  }
  bool describe(std::span<const model::ArenaRange>, model::ExpectedStates&) override {
    return false;
  }
  bool describe_whole(model::ExpectedStates&) override { return false; }
  bool keeps_bytes() const override { return true; }
  const std::vector<model::Arena>& arenas() override { return arenas_; }

private:
  BlockRef ref(std::int32_t tensor, std::int32_t block) {
    const model::StateTensor& t = layout_.tensors[static_cast<std::size_t>(tensor)];
    return {.arena = &arenas_[static_cast<std::size_t>(t.arena)],
            .tensor = &t,
            .tensor_index = tensor,
            .num_blocks = layout_.spec.num_blocks,
            .block_id = block};
  }

  model::Layout layout_;
  std::vector<model::Arena> arenas_;
};

// What a temporal state holds: the state after the sequence of token hash `value`, or (when
// `poisoned`) the natural bytes of the block at arena offset `value` as the arena's poison
// left them.
struct TemporalMeaning {
  bool poisoned = true;
  std::uint64_t value = 0;
  bool operator==(const TemporalMeaning&) const = default;
};

using ConvRow = model::ConvRowMeaning;

class MeaningStates final : public StateStore {
public:
  // With a byte mirror when `mirror` (state_store.h says when).
  MeaningStates(const model::Layout& layout, bool mirror);

  std::optional<std::string> check_temporal(std::int32_t tensor, std::int32_t block,
                                            model::TokenHash hash,
                                            std::span<const model::TokenHash> known) override {
    if (temporal(tensor, block) == TemporalMeaning{.poisoned = false, .value = hash})
      return std::nullopt;
    return engine::check_temporal(made_in_scratch(tensor, block), hash, known);
  }
  void write_temporal(std::int32_t tensor, std::int32_t block, model::TokenHash hash) override {
    temporal(tensor, block) = {.poisoned = false, .value = hash};
    if (mirror_) mirror_->write_temporal(tensor, block, hash);
  }
  std::optional<std::string> check_conv(std::int32_t tensor, std::int32_t block,
                                        std::int64_t history, std::int64_t num_tokens,
                                        std::int64_t offset, const TokenWindow& tokens) override;
  void write_conv(std::int32_t tensor, std::int32_t block, std::int64_t history,
                  std::int64_t running, const TokenWindow& tokens) override;

  void apply_copies(std::span<const model::CopyDecision> decisions) override;
  void copy_blocks(std::span<const model::BlockCopy> copies) override;

  void read(const model::ArenaRange& range, std::span<std::byte> out) override;
  bool describe(std::span<const model::ArenaRange> ranges, model::ExpectedStates& out) override;
  bool describe_whole(model::ExpectedStates& out) override;
  bool keeps_bytes() const override { return mirror_ != nullptr; }
  const std::vector<model::Arena>& arenas() override;

private:
  struct StateAt {
    std::int32_t tensor = 0;
    std::int32_t block = 0;
  };
  // The state whose natural bytes are exactly `range`, if one is.
  std::optional<StateAt> state_at(const model::ArenaRange& range) const;
  void describe_state(std::int32_t tensor, std::int32_t block, model::ExpectedStates& out);
  const model::StateTensor& tensor_at(std::int32_t tensor) const {
    MC_ASSERT(tensor >= 0 && tensor < static_cast<std::int32_t>(layout_.tensors.size()));
    return layout_.tensors[static_cast<std::size_t>(tensor)];
  }
  TemporalMeaning& temporal(std::int32_t tensor, std::int32_t block) {
    MC_ASSERT(tensor_at(tensor).kind() == model::StateKind::temporal);
    MC_ASSERT(block >= 0 && block < layout_.spec.num_blocks);
    return temporal_[static_cast<std::size_t>(tensor)][static_cast<std::size_t>(block)];
  }
  std::span<ConvRow> conv(std::int32_t tensor, std::int32_t block) {
    const model::StateTensor& t = tensor_at(tensor);
    MC_ASSERT(t.kind() == model::StateKind::conv);
    MC_ASSERT(block >= 0 && block < layout_.spec.num_blocks);
    const auto rows = static_cast<std::size_t>(t.shape.conv_state_len);
    return std::span(conv_[static_cast<std::size_t>(tensor)])
        .subspan(static_cast<std::size_t>(block) * rows, rows);
  }
  // Whether the block holds the poison it started with (its bytes are the arena's poison).
  bool untouched(std::int32_t tensor, std::int32_t block);
  // The block's natural bytes, into `out`: made from its description, the bytes a backend
  // compares against.
  void make(std::int32_t tensor, std::int32_t block, std::span<std::byte> out);
  // The block made at its own offset in a scratch arena, for the byte check's text.
  BlockRef made_in_scratch(std::int32_t tensor, std::int32_t block);

  model::Layout layout_;
  std::vector<std::vector<TemporalMeaning>> temporal_; // by tensor, then block (conv: empty)
  std::vector<std::vector<ConvRow>> conv_; // by tensor, then block x state_len (temporal: empty)
  std::vector<std::vector<std::int32_t>> tensors_of_arena_;
  std::vector<model::Arena> scratch_; // sparse: only failing blocks are ever made there
  std::vector<model::Arena> whole_;   // arenas()
  std::vector<std::byte> block_bytes_;
  model::ExpectedStates described_;    // make()'s description of one block
  std::unique_ptr<ByteStates> mirror_; // a small pool's bytes, written alongside
};

MeaningStates::MeaningStates(const model::Layout& layout, bool mirror)
    : layout_(layout), temporal_(layout.tensors.size()), conv_(layout.tensors.size()),
      tensors_of_arena_(layout.arenas.size()),
      mirror_(mirror ? std::make_unique<ByteStates>(layout) : nullptr) {
  const std::int64_t num_blocks = layout.spec.num_blocks;
  for (std::size_t i = 0; i < layout.tensors.size(); ++i) {
    const model::StateTensor& t = layout.tensors[i];
    tensors_of_arena_[static_cast<std::size_t>(t.arena)].push_back(static_cast<std::int32_t>(i));
    for (std::int64_t b = 0; b < num_blocks; ++b) {
      const auto at = static_cast<std::uint64_t>(t.block_offset_bytes(b));
      if (t.kind() == model::StateKind::temporal) {
        temporal_[i].push_back({.poisoned = true, .value = at});
        continue;
      }
      for (std::int64_t r = 0; r < t.shape.conv_state_len; ++r)
        conv_[i].push_back({.kind = ConvRow::Kind::poison,
                            .poison_row = static_cast<std::int32_t>(r),
                            .at = static_cast<std::int64_t>(at)});
    }
  }
  for (const model::ArenaSpec& a : layout.arenas)
    scratch_.emplace_back(a.size_bytes());
}

std::optional<std::string> MeaningStates::check_conv(std::int32_t tensor, std::int32_t block,
                                                     std::int64_t history, std::int64_t num_tokens,
                                                     std::int64_t offset,
                                                     const TokenWindow& tokens) {
  const std::span<ConvRow> rows = conv(tensor, block);
  const auto L = static_cast<std::int64_t>(rows.size());
  for (std::int64_t r = offset; r < std::min(offset + history, L); ++r) {
    const std::int64_t pos = num_tokens - history - offset + r;
    const std::optional<std::int32_t> token = pos >= 0 ? tokens.at(pos) : std::nullopt;
    const ConvRow& row = rows[static_cast<std::size_t>(r)];
    const bool holds =
        token ? row == ConvRow{.kind = ConvRow::Kind::stamp, .token = *token, .at = pos}
              : row.kind == ConvRow::Kind::empty;
    if (!holds)
      return engine::check_conv(made_in_scratch(tensor, block), history, num_tokens, offset,
                                tokens);
  }
  return std::nullopt;
}

void MeaningStates::write_conv(std::int32_t tensor, std::int32_t block, std::int64_t history,
                               std::int64_t running, const TokenWindow& tokens) {
  const std::span<ConvRow> rows = conv(tensor, block);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const std::int64_t pos = running - history + static_cast<std::int64_t>(r);
    const std::optional<std::int32_t> token = pos >= 0 ? tokens.at(pos) : std::nullopt;
    rows[r] = token ? ConvRow{.kind = ConvRow::Kind::stamp, .token = *token, .at = pos}
                    : ConvRow{.kind = ConvRow::Kind::empty};
  }
  if (mirror_) mirror_->write_conv(tensor, block, history, running, tokens);
}

void MeaningStates::apply_copies(std::span<const model::CopyDecision> decisions) {
  if (mirror_) mirror_->apply_copies(decisions);
  std::vector<ConvRow> moved;
  for (const model::CopyDecision& d : decisions) {
    const model::StateTensor& t = tensor_at(d.tensor);
    if (t.kind() == model::StateKind::temporal) {
      temporal(d.tensor, d.dst_block_id) = temporal(d.tensor, d.src_block_id);
      continue;
    }
    // Rows bias.. of the source onto rows 0.. of the destination, through a copy of the
    // source rows (memmove's result where source and destination are one block).
    const auto kept = static_cast<std::size_t>(conv_tokens_kept(t, d.token_bias));
    const std::span<ConvRow> src = conv(d.tensor, d.src_block_id);
    moved.assign(src.end() - static_cast<std::ptrdiff_t>(kept), src.end());
    std::ranges::copy(moved, conv(d.tensor, d.dst_block_id).begin());
  }
}

void MeaningStates::copy_blocks(std::span<const model::BlockCopy> copies) {
  if (mirror_) mirror_->copy_blocks(copies);
  for (const model::BlockCopy& c : copies)
    for (std::size_t i = 0; i < layout_.tensors.size(); ++i) {
      if (layout_.tensors[i].group != c.group) continue;
      const auto tensor = static_cast<std::int32_t>(i);
      if (layout_.tensors[i].kind() == model::StateKind::temporal) {
        temporal(tensor, c.dst) = temporal(tensor, c.src);
        continue;
      }
      std::ranges::copy(conv(tensor, c.src), conv(tensor, c.dst).begin());
    }
}

bool MeaningStates::untouched(std::int32_t tensor, std::int32_t block) {
  const model::StateTensor& t = tensor_at(tensor);
  const auto at = t.block_offset_bytes(block);
  if (t.kind() == model::StateKind::temporal)
    return temporal(tensor, block) ==
           TemporalMeaning{.poisoned = true, .value = static_cast<std::uint64_t>(at)};
  const std::span<ConvRow> rows = conv(tensor, block);
  for (std::size_t r = 0; r < rows.size(); ++r)
    if (rows[r] != ConvRow{.kind = ConvRow::Kind::poison,
                           .poison_row = static_cast<std::int32_t>(r),
                           .at = at})
      return false;
  return true;
}

void MeaningStates::make(std::int32_t tensor, std::int32_t block, std::span<std::byte> out) {
  described_.ranges.clear();
  described_.rows.clear();
  describe_state(tensor, block, described_);
  model::make_expected(described_.ranges.front(), described_.rows.data(), out);
}

BlockRef MeaningStates::made_in_scratch(std::int32_t tensor, std::int32_t block) {
  const model::StateTensor& t = tensor_at(tensor);
  model::Arena& arena = scratch_[static_cast<std::size_t>(t.arena)];
  make(tensor, block,
       {arena.data() + t.block_offset_bytes(block), static_cast<std::size_t>(t.natural_bytes)});
  return {.arena = &arena,
          .tensor = &t,
          .tensor_index = tensor,
          .num_blocks = layout_.spec.num_blocks,
          .block_id = block};
}

void MeaningStates::read(const model::ArenaRange& range, std::span<std::byte> out) {
  MC_ASSERT(static_cast<std::int64_t>(out.size()) == range.size_bytes);
  if (mirror_) return mirror_->read(range, out);
  const std::int64_t begin = range.offset_bytes;
  const std::int64_t end = begin + range.size_bytes;
  // The common case, one state's natural bytes (the blocks a step wrote): made in place.
  if (const std::optional<StateAt> state = state_at(range))
    return make(state->tensor, state->block, out);
  model::fill_poison(out, begin);
  for (const std::int32_t i : tensors_of_arena_[static_cast<std::size_t>(range.arena)]) {
    const model::StateTensor& t = tensor_at(i);
    const std::int64_t first = std::max<std::int64_t>(
        0, (begin - t.offset_bytes - t.natural_bytes) / t.block_stride_bytes);
    for (std::int64_t b = first; b < layout_.spec.num_blocks; ++b) {
      const std::int64_t lo = t.block_offset_bytes(b);
      if (lo >= end) break;
      const std::int64_t hi = lo + t.natural_bytes;
      if (hi <= begin || untouched(i, static_cast<std::int32_t>(b))) continue;
      block_bytes_.resize(static_cast<std::size_t>(t.natural_bytes));
      make(i, static_cast<std::int32_t>(b), block_bytes_);
      const std::int64_t from = std::max(lo, begin);
      const std::int64_t to = std::min(hi, end);
      std::memcpy(out.data() + (from - begin), block_bytes_.data() + (from - lo),
                  static_cast<std::size_t>(to - from));
    }
  }
}

std::optional<MeaningStates::StateAt>
MeaningStates::state_at(const model::ArenaRange& range) const {
  for (const std::int32_t i : tensors_of_arena_[static_cast<std::size_t>(range.arena)]) {
    const model::StateTensor& t = tensor_at(i);
    const std::int64_t rel = range.offset_bytes - t.offset_bytes;
    if (rel < 0 || rel % t.block_stride_bytes != 0 || range.size_bytes != t.natural_bytes) continue;
    const std::int64_t b = rel / t.block_stride_bytes;
    if (b < layout_.spec.num_blocks) return StateAt{i, static_cast<std::int32_t>(b)};
  }
  return std::nullopt;
}

void MeaningStates::describe_state(std::int32_t tensor, std::int32_t block,
                                   model::ExpectedStates& out) {
  const model::StateTensor& t = tensor_at(tensor);
  model::ExpectedRange r{.range = {.arena = t.arena,
                                   .offset_bytes = t.block_offset_bytes(block),
                                   .size_bytes = t.natural_bytes}};
  if (untouched(tensor, block)) {
    r.seed = static_cast<std::uint64_t>(r.range.offset_bytes);
  } else if (t.kind() == model::StateKind::temporal) {
    const TemporalMeaning m = temporal(tensor, block);
    r.kind = m.poisoned ? model::ExpectedKind::poison : model::ExpectedKind::temporal;
    r.seed = m.poisoned ? m.value : model::temporal_seed(m.value, tensor);
  } else {
    r.kind = model::ExpectedKind::conv;
    r.first_row = static_cast<std::int32_t>(out.rows.size());
    r.state_len = static_cast<std::int32_t>(t.shape.conv_state_len);
    r.elem_size = t.elem_size;
    r.ds = t.conv_layout == model::ConvLayout::DS;
    r.conv_dim = t.shape.conv_dim;
    for (const ConvRow& row : conv(tensor, block))
      out.rows.push_back({.kind = row.kind,
                          .poison_row = row.poison_row,
                          .value = row.kind == ConvRow::Kind::stamp
                                       ? model::conv_row_seed(row.token, row.at, tensor)
                                       : static_cast<std::uint64_t>(row.at)});
  }
  out.ranges.push_back(r);
}

bool MeaningStates::describe(std::span<const model::ArenaRange> ranges,
                             model::ExpectedStates& out) {
  for (const model::ArenaRange& r : ranges) {
    const std::optional<StateAt> state = state_at(r);
    if (!state) return false;
    describe_state(state->tensor, state->block, out);
  }
  return true;
}

bool MeaningStates::describe_whole(model::ExpectedStates& out) {
  for (std::size_t a = 0; a < layout_.arenas.size(); ++a) {
    std::vector<std::pair<std::int64_t, StateAt>> states; // by offset
    for (const std::int32_t i : tensors_of_arena_[a])
      for (std::int32_t b = 0; b < layout_.spec.num_blocks; ++b)
        states.push_back({tensor_at(i).block_offset_bytes(b), StateAt{i, b}});
    std::ranges::sort(states, {}, &std::pair<std::int64_t, StateAt>::first);
    const auto gap = [&](std::int64_t from, std::int64_t to) {
      if (to > from)
        out.ranges.push_back({.range = {.arena = static_cast<std::int32_t>(a),
                                        .offset_bytes = from,
                                        .size_bytes = to - from},
                              .seed = static_cast<std::uint64_t>(from)});
    };
    std::int64_t covered = 0;
    for (const auto& [offset, state] : states) {
      MC_ASSERT(offset >= covered); // the states of an arena never overlap (model/layout.h)
      gap(covered, offset);
      describe_state(state.tensor, state.block, out);
      covered = offset + tensor_at(state.tensor).natural_bytes;
    }
    gap(covered, layout_.arenas[a].size_bytes());
  }
  return true;
}

const std::vector<model::Arena>& MeaningStates::arenas() {
  if (mirror_) return mirror_->arenas();
  whole_.clear();
  for (const model::ArenaSpec& a : layout_.arenas) {
    whole_.emplace_back(a.size_bytes());
    whole_.back().poison();
  }
  for (std::size_t i = 0; i < layout_.tensors.size(); ++i) {
    const model::StateTensor& t = layout_.tensors[i];
    const auto tensor = static_cast<std::int32_t>(i);
    for (std::int32_t b = 0; b < layout_.spec.num_blocks; ++b)
      if (!untouched(tensor, b))
        make(tensor, b,
             {whole_[static_cast<std::size_t>(t.arena)].data() + t.block_offset_bytes(b),
              static_cast<std::size_t>(t.natural_bytes)});
  }
  return whole_;
}

std::int64_t mirror_bytes_max_set = -1; // -1: the default

} // namespace

std::int64_t byte_mirror_bytes_max() {
  return mirror_bytes_max_set >= 0 ? mirror_bytes_max_set : std::int64_t{64} << 20;
}

void set_byte_mirror_bytes_max_for_testing(std::int64_t bytes) {
  mirror_bytes_max_set = bytes;
}

std::unique_ptr<StateStore> make_state_store(const model::Layout& layout, Structures structures,
                                             std::int64_t mirror_bytes_max) {
  if (structures == Structures::reference) return std::make_unique<ByteStates>(layout);
  std::int64_t pool_bytes = 0;
  for (const model::ArenaSpec& a : layout.arenas)
    pool_bytes += a.size_bytes();
  return std::make_unique<MeaningStates>(layout, pool_bytes <= mirror_bytes_max);
}

} // namespace mc::oracle::engine
