#include "scenarios/workload_import.h"

#include "model/errors.h"
#include "model/json_field.h"
#include "model/prng.h"
#include "scenarios/line_reader.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <istream>

namespace mc::scenarios {
namespace {

using model::splitmix64;

// A request's own tokens (past its hash blocks, and its continuation): stream 2 of the line.
std::int32_t own_token(std::int64_t line, std::int32_t i, std::int32_t vocab_size) {
  const std::uint64_t key = splitmix64((std::uint64_t{2} << 56) ^ static_cast<std::uint64_t>(line));
  return static_cast<std::int32_t>(splitmix64(key + static_cast<std::uint64_t>(i)) %
                                   static_cast<std::uint64_t>(vocab_size));
}

struct Entry {
  double timestamp_ms = 0;
  std::int64_t line = 0;
  model::RequestSpec spec;
};

std::int32_t length_field(const nlohmann::json& j, const char* key, std::int64_t max,
                          const std::string& where) {
  if (!j.contains(key)) model::fail_input("{}: {}: missing (tokens, an integer)", where, key);
  const nlohmann::json& v = j[key];
  if (!v.is_number_integer())
    model::fail_input("{}: {}: expected an integer number of tokens", where, key);
  const auto n = v.get<std::int64_t>();
  if (n < 1 || n > max) model::fail_input("{}: {}: {} is outside 1..{}", where, key, n, max);
  return static_cast<std::int32_t>(n);
}

Entry parse_entry(const std::string& text, std::int64_t line, const std::string& where,
                  const WorkloadImportOptions& o) {
  const nlohmann::json j = model::parse_json_text(text, model::JsonText::line);
  if (!j.is_object()) model::fail_input("{}: json: expected an object", where);
  if (!j.contains("timestamp") || !j["timestamp"].is_number())
    model::fail_input("{}: timestamp: missing (milliseconds, a number)", where);
  Entry e{.timestamp_ms = j["timestamp"].get<double>(), .line = line};
  if (!std::isfinite(e.timestamp_ms) || e.timestamp_ms < 0 || e.timestamp_ms > 1e15)
    model::fail_input("{}: timestamp: {} is outside 0..1e15 ms", where, e.timestamp_ms);
  const std::int32_t input = length_field(j, "input_length", kWorkloadSequenceLenMax - 1, where);
  const std::int32_t output =
      length_field(j, "output_length", kWorkloadSequenceLenMax - input, where);
  std::vector<std::uint64_t> hash_ids;
  if (j.contains("hash_ids")) {
    const nlohmann::json& h = j["hash_ids"];
    if (!h.is_array()) model::fail_input("{}: hash_ids: expected a list of integers", where);
    if (h.size() > kWorkloadHashIdsMax)
      model::fail_input("{}: hash_ids: {} ids, at most {}", where, h.size(), kWorkloadHashIdsMax);
    for (std::size_t i = 0; i < h.size(); ++i) {
      if (!h[i].is_number_integer() || h[i].get<std::int64_t>() < 0)
        model::fail_input("{}: hash_ids[{}]: expected a non-negative integer", where, i);
      hash_ids.push_back(h[i].get<std::uint64_t>());
    }
  }
  model::RequestSpec& r = e.spec;
  r.req_id = "w" + std::to_string(line);
  r.num_prompt_tokens = input;
  r.max_len = input + output;
  r.tokens.resize(static_cast<std::size_t>(r.max_len + o.slack_tokens));
  const std::int32_t T = o.hash_block_tokens;
  for (std::int32_t i = 0; i < static_cast<std::int32_t>(r.tokens.size()); ++i) {
    const auto block = static_cast<std::size_t>(i / T);
    r.tokens[static_cast<std::size_t>(i)] =
        i < input && block < hash_ids.size()
            ? hash_block_token(hash_ids[block], i % T, o.vocab_size)
            : own_token(line, i, o.vocab_size);
  }
  return e;
}

} // namespace

std::int32_t hash_block_token(std::uint64_t hash_id, std::int32_t i, std::int32_t vocab_size) {
  MC_ASSERT(i >= 0 && vocab_size >= 1);
  const std::uint64_t key = splitmix64((std::uint64_t{1} << 56) ^ hash_id);
  return static_cast<std::int32_t>(splitmix64(key + static_cast<std::uint64_t>(i)) %
                                   static_cast<std::uint64_t>(vocab_size));
}

std::vector<model::RequestSpec> import_workload(std::istream& in, const std::string& name,
                                                const WorkloadImportOptions& o) {
  if (!(o.step_ms > 0 && o.step_ms <= 1e9))
    model::fail_input("--step-ms: {} is outside (0, 1e9]", o.step_ms);
  if (o.hash_block_tokens < 1 || o.hash_block_tokens > (1 << 16))
    model::fail_input("--hash-block-tokens: {} is outside 1..65536", o.hash_block_tokens);
  MC_ASSERT(o.vocab_size >= 2 && o.slack_tokens >= 0);
  std::vector<Entry> entries;
  std::string text;
  // Bounded reading: a file that is not text (a NUL byte) or has no line ends (/dev/zero) is
  // refused at its first chunk, not read whole into one line.
  LineReader lines(in, kWorkloadLineBytesMax);
  try {
    while (lines.next(text)) {
      const std::int64_t line = lines.line_number();
      const std::string where = name + ":" + std::to_string(line);
      if (line > kWorkloadLinesMax)
        model::fail_input("{}: line: more than {} lines", where, kWorkloadLinesMax);
      if (text.find_first_not_of(" \t") == std::string::npos) continue; // blank lines
      if (entries.size() >= static_cast<std::size_t>(kWorkloadRequestsMax))
        model::fail_input("{}: line: more than {} requests", where, kWorkloadRequestsMax);
      entries.push_back(parse_entry(text, line, where, o));
    }
  } catch (const model::FieldError& e) {
    model::fail_input("{}:{}: {}: {}", name, lines.line_number(), e.field, e.reason);
  }
  if (entries.empty()) model::fail_input("{}: the workload holds no request", name);
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return a.timestamp_ms < b.timestamp_ms; });
  const double t0 = entries.front().timestamp_ms;
  std::vector<model::RequestSpec> out;
  out.reserve(entries.size());
  for (Entry& e : entries) {
    e.spec.arrival_step = static_cast<std::int64_t>(std::floor((e.timestamp_ms - t0) / o.step_ms));
    out.push_back(std::move(e.spec));
  }
  return out;
}

std::vector<model::RequestSpec> import_workload_file(const std::filesystem::path& file,
                                                     const WorkloadImportOptions& options) {
  std::ifstream in(file, std::ios::binary);
  if (!in) model::fail_input("{}: cannot open the workload for reading", file.string());
  return import_workload(in, file.string(), options);
}

} // namespace mc::scenarios
