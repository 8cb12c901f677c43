// Recorded scheduler traces (FORMAT.md): a header line, then one model::Step per line.
//
// TraceWriter writes the header, then one line per step, flushed as it goes, so a run that
// dies still leaves every step before it. TraceReader streams: it reads the header when
// opened and then one line per next(), keeping only the set of live requests (memory grows
// with the requests in flight, never with the length of the trace). Every line is checked as
// it is read (types, limits, block ids inside the pools, request lifetimes) and a bad one is
// rejected with an InputError "FILE:LINE: field: reason" (exit code 2 in the CLI). Replay
// pulls steps one at a time from next().
#pragma once

#include "model/scheduler_contract.h"
#include "model/config.h"
#include "model/layout.h"
#include "model/step.h"
#include "scenarios/derived_prompt.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mc::scenarios {

inline constexpr std::string_view kTraceFormatName = "mambacheck-trace";
inline constexpr std::int32_t kTraceFormatVersion = 5;
// Version 2 adds the per-step `expect` object, version 3 async scheduling (the header's
// `async_scheduling`, a step's `planned_during`, a cached request's
// `num_computed_tokens_optimistic`); a writer states the lowest version its content needs, so a
// trace without them stays version 1 and older readers take it.
inline constexpr std::int32_t kTraceFormatVersionExpect = 2;
inline constexpr std::int32_t kTraceFormatVersionAsync = 3;
// The header's `scheduler` (model/scheduler_contract.h).
inline constexpr std::int32_t kTraceFormatVersionContract = 4;
// Partial-hash hits: the scheduler's `hash_block_size` and a step's `block_copies`.
inline constexpr std::int32_t kTraceFormatVersionCopies = 5;

// Limits on what a trace may hold (STYLE.md: a limit on everything read from a user).
inline constexpr std::size_t kTraceLineBytesMax = std::size_t{64} << 20;
inline constexpr std::int32_t kTraceJsonDepthMax = 16;
inline constexpr std::size_t kReqIdBytesMax = 256;
inline constexpr std::int32_t kPromptTokensMax = 1 << 20;
inline constexpr std::int32_t kScheduledTokensMax = 1 << 20;
inline constexpr std::int64_t kSequenceTokensMax = std::int64_t{1} << 30; // computed + scheduled
inline constexpr std::size_t kBlockIdsPerRowMax = std::size_t{1} << 20;
inline constexpr std::size_t kRequestsPerStepMax = std::size_t{1} << 16;
inline constexpr std::size_t kLiveRequestsMax = std::size_t{1} << 20;
inline constexpr std::int64_t kStepIndexMax = std::int64_t{1} << 62;
inline constexpr std::int64_t kFamilyParamMax = std::int64_t{1} << 20;
inline constexpr std::size_t kSourceBytesMax = std::size_t{1} << 20;

struct TraceHeader {
  // Read: the file's. Written: the lowest that holds the content (kTraceFormatVersionExpect with
  // `expect`, kTraceFormatVersionAsync with async_scheduling).
  std::int32_t version = 1;
  // Recorded with async scheduling: a step may be planned while the one before it runs
  // (model::Step::planned_during).
  bool async_scheduling = false;
  // What the recorded scheduler's block manager promises beyond its tables; written only
  // where it differs from the default (then at version kTraceFormatVersionContract).
  model::SchedulerContract contract;
  model::CacheConfig config;
  // Non-empty: the layout is this preset's (model/presets.h), with layout_spec.num_blocks
  // possibly overridden; layout_spec.groups must then equal the preset's groups.
  std::string preset;
  model::LayoutSpec layout_spec;
  // Blocks each group's pool hands out (block ids 0..size-1, 0 the null block); at most
  // layout_spec.num_blocks. Empty in a header given to the writer: num_blocks for every group.
  std::vector<std::int32_t> block_pool_sizes;
  std::int32_t derived_vocab_size =
      kDerivedVocabSizeDefault; // only for derived prompts (derived_prompt.h)
  nlohmann::json source;        // free-form object, or null when absent
};

// An async trace of mambacheck's own engine: its scheduler holds a block freed while a step is
// in flight back until that step completes, as for an unordered writer, and a replay holds the
// trace to that (model/scheduler_contract.h).
void set_async_model_contract(TraceHeader& header);
// A run whose prefix hashes cover `hash_block_size` tokens (0 or the block size: no partial
// hits): the contract says so, at kTraceFormatVersionCopies, where it is below the block size.
void set_hash_unit(TraceHeader& header, std::int32_t hash_block_size);

struct TraceReaderOptions {
  std::size_t line_bytes_max = kTraceLineBytesMax;
};

class StepChecker;
class LineReader;

class TraceReader {
public:
  // Opens `file` and reads its header; throws InputError "FILE:1: field: reason".
  explicit TraceReader(const std::filesystem::path& file, TraceReaderOptions options = {});
  // Reads from `in` (kept by reference), naming it `name` in messages.
  TraceReader(std::istream& in, std::string name, TraceReaderOptions options = {});
  ~TraceReader();
  TraceReader(const TraceReader&) = delete;
  TraceReader& operator=(const TraceReader&) = delete;

  const TraceHeader& header() const { return header_; }
  // The file (or stream) name that messages start with.
  const std::string& name() const { return name_; }
  // The layout built from the header (model::build_layout), block pools as in the header.
  const model::Layout& layout() const { return layout_; }
  // The next step, checked; nullopt at the end of the trace. Throws InputError for a bad
  // line; the reader must not be used after it threw.
  std::optional<model::Step> next();
  // Number of the line read last (1 is the header).
  std::int64_t line_number() const;
  std::size_t num_live_requests() const;

private:
  void read_header();
  [[noreturn]] void fail_at_line();

  std::unique_ptr<std::ifstream> file_; // owned when opened by path
  std::string name_;
  std::unique_ptr<LineReader> lines_;
  std::string line_;
  TraceHeader header_;
  model::Layout layout_;
  std::unique_ptr<StepChecker> checker_;
  bool failed_ = false;
};

class TraceWriter {
public:
  // Creates (truncates) `file` and writes the header. Throws InputError for a header that
  // does not validate, EnvironmentError when the file cannot be written.
  TraceWriter(const std::filesystem::path& file, const TraceHeader& header);
  // Writes to `out` (kept by reference), naming it `name` in messages.
  TraceWriter(std::ostream& out, std::string name, const TraceHeader& header);
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Checks `step` by the reader's rules (so a written trace always reads back), writes it as
  // one line and flushes. Throws InputError "NAME: step N: field: reason" for a bad step.
  void write(const model::Step& step);
  std::int64_t steps_written() const { return steps_written_; }

private:
  void start(const TraceHeader& header);
  void put_line(const std::string& line);

  std::unique_ptr<std::ofstream> file_;
  std::ostream* out_ = nullptr;
  std::string name_;
  std::unique_ptr<StepChecker> checker_;
  std::int32_t version_ = 1; // the header's
  std::int64_t steps_written_ = 0;
};

} // namespace mc::scenarios
