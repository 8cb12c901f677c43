// Request-level workloads from outside: the common JSON Lines form of public serving traces
// (e.g. the Mooncake traces), one request per line:
//   {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, ...]}
// timestamp in milliseconds (integer or fraction), lengths in tokens, hash_ids the ids of the
// prompt's successive blocks of `hash_block_tokens` tokens (equal ids = equal token blocks,
// which is what makes prefixes shared). Other keys are ignored (traces differ in extras).
//
// Each line becomes a model::RequestSpec, which the simulator runs (oracle/engine/workload.h):
// - arrival step = floor((timestamp - first timestamp) / step_ms) (the step clock);
// - prompt = input_length tokens: block k (tokens k*T .. k*T+T-1, T = hash_block_tokens) is
//   the token block of hash_ids[k]; tokens past the hash blocks are the request's own;
// - output = output_length tokens of the request's own continuation, then a few more so that
//   drafts near the end have a truth (as generate_workload does).
// Requests are ordered by arrival (stable), named "w<line>". A bad line is an InputError
// "FILE:LINE: field: reason"; lines are read through a bounded reader (line_reader.h), so a
// file that is not text is refused at its first NUL byte and an over-long line at its limit.
#pragma once

#include "model/request_spec.h"

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

namespace mc::scenarios {

struct WorkloadImportOptions {
  double step_ms = 100.0;              // scheduler step clock: milliseconds per step
  std::int32_t hash_block_tokens = 16; // tokens per hash id (Mooncake uses 512)
  std::int32_t vocab_size = 32768;     // token ids drawn in 0..vocab_size-1
  std::int32_t slack_tokens = 18;      // truth past max_len (drafts near the end)
};

// The simulator's limits (oracle/engine/options.h: kRequestsMax, kSequenceLenMax), restated
// because scenarios/ sees model/ only; harness/simulate.cpp asserts that they agree.
inline constexpr std::int32_t kWorkloadRequestsMax = 1 << 20;
inline constexpr std::int32_t kWorkloadSequenceLenMax = 1 << 20;
inline constexpr std::size_t kWorkloadLineBytesMax = std::size_t{16} << 20;
// Blank lines count too: an endless stream of line ends is refused as well.
inline constexpr std::int64_t kWorkloadLinesMax = std::int64_t{4} << 20;
inline constexpr std::size_t kWorkloadHashIdsMax = std::size_t{1} << 16;

// Throws model::InputError naming `name`, the line and the field.
std::vector<model::RequestSpec> import_workload(std::istream& in, const std::string& name,
                                                const WorkloadImportOptions& options);
std::vector<model::RequestSpec> import_workload_file(const std::filesystem::path& file,
                                                     const WorkloadImportOptions& options);

// Token i (0-based) of the block of hash id `hash_id`: the same for every request.
std::int32_t hash_block_token(std::uint64_t hash_id, std::int32_t i, std::int32_t vocab_size);

} // namespace mc::scenarios
