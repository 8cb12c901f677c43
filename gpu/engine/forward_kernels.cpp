// What the forward's state kernels must write, and the check of a worker's report against it
// (forward_kernels.h).
#include "gpu/engine/forward_kernels.h"

#include "model/block_table.h"
#include "model/errors.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string_view>
#include <utility>

namespace mc::gpu::engine {
namespace {

struct Expected {
  std::int32_t row = -1;   // the metadata row that writes it
  std::int32_t entry = -1; // its window entry
  std::int32_t source = -1, source_entry = -1;
  std::int32_t tokens = 0;                       // SSM
  std::vector<std::array<std::int32_t, 2>> rows; // conv
};

// "KERNEL wrote outside its state tensor (...)" where the worker saw a guard block change.
std::optional<std::string> outside_text(std::string_view kernel,
                                        const std::vector<std::string>& outside) {
  if (outside.empty()) return std::nullopt;
  return fmt::format("{} wrote outside its state tensor ({} it)", kernel,
                     outside.front() == "before" ? "before" : "past the end of");
}

// The first block `expected` names that no write of `writes` changed.
template <class Write>
const std::pair<const std::int32_t, Expected>*
first_unwritten(const std::map<std::int32_t, Expected>& expected,
                const std::vector<Write>& writes) {
  for (const auto& entry : expected)
    if (std::none_of(writes.begin(), writes.end(),
                     [&](const Write& w) { return w.block == entry.first; }))
      return &entry;
  return nullptr;
}

class Checker {
public:
  Checker(const ForwardKernelStep& step,
          const std::function<std::string(std::int32_t)>& describe_row)
      : step_(step), describe_row_(describe_row) {
    MC_ASSERT(step.state_indices.size() ==
              static_cast<std::size_t>(step.rows) * static_cast<std::size_t>(step.width));
    spec_ = !step.num_accepted.empty();
  }

  std::int32_t entry(std::int32_t row, std::int32_t j) const {
    return step_
        .state_indices[static_cast<std::size_t>(row) * static_cast<std::size_t>(step_.width) +
                       static_cast<std::size_t>(j)];
  }
  std::int32_t tokens(std::int32_t row) const {
    if (!spec_) return 1;
    const auto r = static_cast<std::size_t>(row);
    return step_.query_start_loc[r + 1] - step_.query_start_loc[r];
  }
  std::int32_t accepted(std::int32_t row) const {
    return spec_ ? step_.num_accepted[static_cast<std::size_t>(row)] : 1;
  }

  // The entry of `row`'s window that holds `block`, -1 for none (never the null block).
  std::int32_t window_entry(std::int32_t row, std::int32_t block) const {
    if (block == model::kNullBlockId) return -1;
    for (std::int32_t j = 0; j < step_.width; ++j)
      if (entry(row, j) == block) return j;
    return -1;
  }

  // A write no row's expectations name, judged against the probe row: nullopt where it is a
  // state of the probe row's window written into that window (a bounded kernel's choice),
  // else what the unbounded read did; `other` where there is no probe or the block is not the
  // probe row's.
  std::optional<std::string> probe_write(const std::string& kernel, const SsmWrite& w,
                                         std::optional<std::string> other) const {
    const std::int32_t r = step_.probe_row;
    if (r < 0) return other;
    const std::int32_t j = window_entry(r, w.block);
    if (j < 0) return other;
    if (window_entry(r, w.source) >= 0 && w.tokens >= 1 && w.tokens <= tokens(r))
      return std::nullopt;
    return fmt::format("{} wrote block {} (entry {} of {}) with the state of {} after {} tokens: "
                       "given num_accepted {} for a window of {} entries, it read outside the "
                       "row's window instead of bounding the count",
                       kernel, w.block, j, describe_row_(r), source_text(w.source), w.tokens,
                       accepted(r), step_.width);
  }

  // Where a block sits in the step's windows, for a finding's text.
  std::string where(std::int32_t block) const {
    if (block == model::kNullBlockId) return "the null block";
    for (std::int32_t r = 0; r < step_.rows; ++r)
      if (const std::int32_t j = window_entry(r, block); j >= 0)
        return fmt::format("entry {} of {}", j, describe_row_(r));
    const auto pw = static_cast<std::size_t>(step_.prefill_width);
    for (std::size_t i = 0; i < step_.prefill_indices.size(); ++i)
      if (step_.prefill_indices[i] == block)
        return step_.all_mode ? fmt::format("entry {} of prefill row {}", i % pw, i / pw)
                              : fmt::format("the block of prefill row {}", i);
    return "a block no row of this step names";
  }
  std::string source_text(std::int32_t source) const {
    if (source == -3) return "a value from outside the state tensor";
    if (source < 0) return "a value that is no state of any block";
    return fmt::format("block {} ({})", source, where(source));
  }

  // How a row's read column was chosen, for a finding's text.
  std::string read_text(const Expected& e) const {
    if (step_.all_mode) return fmt::format("entry {}, block_idx_last_computed", e.source_entry);
    return fmt::format("entry {}, num_accepted {}", e.source_entry, accepted(e.row));
  }

  // All mode, a decode row: the block read (block_idx_last_computed's column) and the block
  // written (block_idx_last_scheduled's).
  std::pair<std::int32_t, std::int32_t> all_mode_columns(std::int32_t r) const {
    const auto i = static_cast<std::size_t>(r);
    return {step_.last_computed[i], step_.last_scheduled[i]};
  }

  std::optional<std::string> check_ssm(const ForwardKernelReport& report) const {
    const std::string kernel = "selective_state_update";
    if (std::optional<std::string> o = outside_text(kernel, report.ssm_outside)) return o;
    std::map<std::int32_t, Expected> expected;
    for (std::int32_t r = 0; step_.all_mode && r < step_.rows; ++r) {
      const auto [rd, wr] = all_mode_columns(r);
      const std::int32_t src = entry(r, rd), dst = entry(r, wr);
      if (src == model::kNullBlockId || dst == model::kNullBlockId) continue;
      expected[dst] = {.row = r, .entry = wr, .source = src, .source_entry = rd, .tokens = 1};
    }
    for (std::int32_t r = 0; !step_.all_mode && r < step_.rows; ++r) {
      const std::int32_t q = tokens(r);
      if (q <= 0 || r == step_.probe_row) continue;
      const std::int32_t c = std::max(accepted(r) - 1, 0);
      const std::int32_t src = entry(r, std::min(c, step_.width - 1));
      if (src == model::kNullBlockId) continue;
      for (std::int32_t t = spec_ ? 0 : q - 1; t < q; ++t) {
        const std::int32_t j = spec_ ? t : 0;
        const std::int32_t dst = entry(r, j);
        if (dst == model::kNullBlockId) continue;
        expected[dst] = {.row = r, .entry = j, .source = src, .source_entry = c, .tokens = t + 1};
      }
    }
    for (const SsmWrite& w : report.ssm) {
      const auto it = expected.find(w.block);
      if (it == expected.end()) {
        std::optional<std::string> bad = probe_write(
            kernel, w,
            fmt::format("{} wrote block {} ({}), which no row writes; it holds the state of {} "
                        "after {} tokens",
                        kernel, w.block, where(w.block), source_text(w.source), w.tokens));
        if (bad) return bad;
        continue;
      }
      const Expected& e = it->second;
      if (w.source != e.source || w.tokens != e.tokens)
        return fmt::format("{} wrote block {} (entry {} of {}) with the state of {} after {} "
                           "tokens; expected the state of block {} ({}) after {} tokens",
                           kernel, w.block, e.entry, describe_row_(e.row), source_text(w.source),
                           w.tokens, e.source, read_text(e), e.tokens);
    }
    if (const auto* missing = first_unwritten(expected, report.ssm)) {
      const Expected& e = missing->second;
      return fmt::format("{} never wrote block {} (entry {} of {}): expected the state of "
                         "block {} ({}) after {} tokens",
                         kernel, missing->first, e.entry, describe_row_(e.row), e.source,
                         read_text(e), e.tokens);
    }
    return std::nullopt;
  }

  std::optional<std::string> check_scan(const ForwardKernelReport& report) const {
    const std::string kernel = "selective_scan_fn";
    if (std::optional<std::string> o = outside_text(kernel, report.scan_outside)) return o;
    std::map<std::int32_t, Expected> expected;
    const std::size_t prefill_rows = step_.prefill_query_start_loc.size() - 1;
    for (std::size_t p = 0; step_.all_mode && p < prefill_rows; ++p) {
      const auto at = [&](std::int32_t j) {
        return step_.prefill_indices[p * static_cast<std::size_t>(step_.prefill_width) +
                                     static_cast<std::size_t>(j)];
      };
      const std::int32_t q =
          step_.prefill_query_start_loc[p + 1] - step_.prefill_query_start_loc[p];
      const std::int32_t last = step_.prefill_last[p];
      if (q <= 0 || at(last) == model::kNullBlockId) continue;
      const std::int32_t source =
          step_.prefill_initial[p] != 0 ? at(step_.prefill_last_computed[p]) : -4;
      const auto row = static_cast<std::int32_t>(p);
      for (std::int32_t j = step_.prefill_first[p]; j < last; ++j)
        expected[at(j)] = {.row = row,
                           .entry = j,
                           .source = source,
                           .tokens = (j + 1) * step_.block_size - step_.prefill_computed[p]};
      expected[at(last)] = {.row = row, .entry = last, .source = source, .tokens = q};
    }
    for (std::size_t p = 0; !step_.all_mode && p < step_.prefill_indices.size(); ++p) {
      const std::int32_t block = step_.prefill_indices[p];
      const std::int32_t q =
          step_.prefill_query_start_loc[p + 1] - step_.prefill_query_start_loc[p];
      if (block == model::kNullBlockId || q <= 0) continue;
      expected[block] = {.row = static_cast<std::int32_t>(p),
                         .entry = 0,
                         .source = step_.prefill_initial[p] != 0 ? block : -4,
                         .tokens = q};
    }
    const auto state_text = [&](std::int32_t source, std::int32_t tokens) {
      return source == -4
                 ? fmt::format("the state of no block (zeros) after {} tokens", tokens)
                 : fmt::format("the state of {} after {} tokens", source_text(source), tokens);
    };
    for (const SsmWrite& w : report.scan) {
      const auto it = expected.find(w.block);
      if (it == expected.end())
        return fmt::format("{} wrote block {} ({}), which no prefill row writes; it holds {}",
                           kernel, w.block, where(w.block), state_text(w.source, w.tokens));
      const Expected& e = it->second;
      if (w.source != e.source || w.tokens != e.tokens)
        return fmt::format("{} wrote block {} ({}prefill row {}) with {}; expected {}", kernel,
                           w.block, entry_text(e), e.row, state_text(w.source, w.tokens),
                           state_text(e.source, e.tokens));
    }
    if (const auto* missing = first_unwritten(expected, report.scan))
      return fmt::format("{} never wrote block {} ({}prefill row {}): expected {}", kernel,
                         missing->first, entry_text(missing->second), missing->second.row,
                         state_text(missing->second.source, missing->second.tokens));
    return std::nullopt;
  }

  std::string entry_text(const Expected& e) const {
    return step_.all_mode ? fmt::format("entry {} of ", e.entry) : "";
  }

  std::string row_text(const std::array<std::int32_t, 2>& v) const {
    if (v[0] == -1) return fmt::format("token {} of the step", v[1]);
    if (v[0] == -3) return "a value from outside the state tensor";
    if (v[0] < 0) return "no row of any block";
    return fmt::format("row {} of block {}", v[1], v[0]);
  }

  std::optional<std::string> check_conv(const ForwardKernelReport& report) const {
    const std::string kernel = "causal_conv1d_update";
    if (std::optional<std::string> o = outside_text(kernel, report.conv_outside)) return o;
    const std::int32_t w = step_.conv_width;
    std::map<std::int32_t, Expected> expected;
    for (std::int32_t r = 0; r < step_.rows; ++r) {
      const std::int32_t q = tokens(r);
      const auto [rd, wr] = step_.all_mode ? all_mode_columns(r) : std::pair{0, 0};
      const std::int32_t src = entry(r, rd), dst = entry(r, wr);
      if (q <= 0 || src == model::kNullBlockId) continue;
      const std::int32_t off = spec_ ? accepted(r) - 1 : 0;
      Expected e{.row = r, .entry = wr, .source = src, .source_entry = off};
      for (std::int32_t j = 0; j < step_.state_len; ++j)
        e.rows.push_back(j < w - 2       ? std::array{src, off + 1 + j}
                         : j < w - 2 + q ? std::array{-1, j - (w - 2)}
                                         : std::array{dst, j});
      expected[dst] = std::move(e);
    }
    for (const ConvWrite& got : report.conv) {
      const auto it = expected.find(got.block);
      if (it == expected.end())
        return fmt::format("{} wrote block {} ({}), which no row writes", kernel, got.block,
                           where(got.block));
      const Expected& e = it->second;
      for (std::size_t j = 0; j < e.rows.size(); ++j) {
        const std::array<std::int32_t, 2> g =
            j < got.rows.size() ? got.rows[j] : std::array<std::int32_t, 2>{-2, 0};
        if (g != e.rows[j])
          return fmt::format("{} wrote row {} of block {} (entry {} of {}, window read at "
                             "offset {}) with {}; expected {}",
                             kernel, j, got.block, e.entry, describe_row_(e.row),
                             e.source_entry, row_text(g), row_text(e.rows[j]));
      }
    }
    if (const auto* missing = first_unwritten(expected, report.conv)) {
      const Expected& e = missing->second;
      return fmt::format("{} never wrote block {} (entry {} of {}): expected the window of "
                         "block {} read at offset {} and the step's {} tokens",
                         kernel, missing->first, e.entry, describe_row_(e.row), e.source,
                         e.source_entry, tokens(e.row));
    }
    return std::nullopt;
  }

private:
  const ForwardKernelStep& step_;
  const std::function<std::string(std::int32_t)>& describe_row_;
  bool spec_ = false;
};

} // namespace

std::optional<std::string>
check_forward_kernels(const ForwardKernelStep& step, const ForwardKernelReport& report,
                      const std::function<std::string(std::int32_t row)>& describe_row) {
  const Checker checker(step, describe_row);
  const auto runs = [&](std::string_view k) {
    return std::find(step.kernels.begin(), step.kernels.end(), k) != step.kernels.end();
  };
  if (runs("ssm"))
    if (std::optional<std::string> d = checker.check_ssm(report)) return d;
  if (runs("conv"))
    if (std::optional<std::string> d = checker.check_conv(report)) return d;
  if (runs("scan"))
    if (std::optional<std::string> d = checker.check_scan(report)) return d;
  return std::nullopt;
}

std::int64_t scan_tag(std::int64_t longest) {
  std::int64_t tag = 64;
  while (tag <= longest)
    tag *= 2;
  return tag;
}

bool scan_tracer_fits(std::int64_t num_blocks, std::int64_t longest) {
  return num_blocks * scan_tag(longest) < (std::int64_t{1} << 24);
}

} // namespace mc::gpu::engine
