// TraceReader and TraceWriter: lines in and out, with the file and line number put in front
// of every FieldError raised by the JSON layer (trace_*_json) and the rules (trace_rules).
#include "scenarios/trace.h"

#include "model/errors.h"
#include "model/json_field.h"
#include "model/output_file.h"
#include "scenarios/line_reader.h"
#include "scenarios/trace_header_json.h"
#include "scenarios/trace_rules.h"
#include "scenarios/trace_step_json.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace mc::scenarios {

using model::fail_field;
using model::Field;
using model::FieldError;
namespace {

nlohmann::json parse_line(const std::string& line) {
  if (line.empty()) fail_field("line", "an empty line (every line holds one JSON object)");
  if (json_nesting_depth(line) > kTraceJsonDepthMax)
    fail_field("json", "nested deeper than {} levels", kTraceJsonDepthMax);
  return model::parse_json_text(line, model::JsonText::line);
}

// model/ names the section first ("config: ...", "layout: ..."): keep it as the field.
[[noreturn]] void rethrow_model_error(const model::InputError& e) {
  const std::string what = e.what();
  const std::size_t cut = what.find(": ");
  if (cut == std::string::npos) fail_field("header", "{}", what);
  fail_field(what.substr(0, cut), "{}", what.substr(cut + 2));
}

model::Layout build_checked_layout(const TraceHeader& header) {
  try {
    return model::build_layout(header.config, header.layout_spec);
  } catch (const model::InputError& e) {
    rethrow_model_error(e);
  }
}

} // namespace

TraceReader::TraceReader(const std::filesystem::path& file, TraceReaderOptions options)
    : file_(std::make_unique<std::ifstream>(file, std::ios::binary)), name_(file.string()) {
  if (!*file_) model::fail_input("{}: cannot open the trace for reading", name_);
  lines_ = std::make_unique<LineReader>(*file_, options.line_bytes_max);
  read_header();
}

TraceReader::TraceReader(std::istream& in, std::string name, TraceReaderOptions options)
    : name_(std::move(name)), lines_(std::make_unique<LineReader>(in, options.line_bytes_max)) {
  read_header();
}

TraceReader::~TraceReader() = default;

std::int64_t TraceReader::line_number() const {
  return lines_->line_number();
}

std::size_t TraceReader::num_live_requests() const {
  return checker_->num_live();
}

void TraceReader::fail_at_line() {
  failed_ = true;
  try {
    throw;
  } catch (const FieldError& e) {
    const std::int64_t line = std::max<std::int64_t>(lines_->line_number(), 1);
    model::fail_input("{}:{}: {}: {}", name_, line, e.field.empty() ? "line" : e.field, e.reason);
  }
}

void TraceReader::read_header() {
  try {
    if (!lines_->next(line_)) fail_field("header", "the trace is empty; expected a header line");
    const nlohmann::json root = parse_line(line_);
    header_ = header_from_json(Field(root));
    layout_ = build_checked_layout(header_);
    checker_ = std::make_unique<StepChecker>(header_);
  } catch (const FieldError&) {
    fail_at_line();
  }
}

std::optional<model::Step> TraceReader::next() {
  MC_ASSERT(!failed_);
  try {
    if (!lines_->next(line_)) return std::nullopt;
    const nlohmann::json root = parse_line(line_);
    model::Step step = step_from_json(
        Field(root), header_.layout_spec.groups.size(), header_.derived_vocab_size,
        header_.version, static_cast<std::size_t>(header_.contract.attention_groups));
    checker_->check(step);
    return step;
  } catch (const FieldError&) {
    fail_at_line();
  }
}

TraceWriter::TraceWriter(const std::filesystem::path& file, const TraceHeader& header)
    : file_(std::make_unique<std::ofstream>(file, std::ios::binary | std::ios::trunc)),
      out_(file_.get()), name_(file.string()) {
  if (!*file_) throw model::EnvironmentError(name_ + ": cannot open the trace for writing");
  start(header);
}

TraceWriter::TraceWriter(std::ostream& out, std::string name, const TraceHeader& header)
    : out_(&out), name_(std::move(name)) {
  start(header);
}

TraceWriter::~TraceWriter() = default;

void set_async_model_contract(TraceHeader& header) {
  header.async_scheduling = true;
  header.contract.unordered_writer = true;
  header.version = kTraceFormatVersionContract;
}

void set_hash_unit(TraceHeader& header, std::int32_t hash_block_size) {
  if (hash_block_size == 0 || hash_block_size == header.config.mamba_block_size) return;
  header.contract.hash_block_size = hash_block_size;
  header.version = std::max(header.version, kTraceFormatVersionCopies);
}

void TraceWriter::start(const TraceHeader& header) {
  // The header goes through the reader's own checks, so what is written always reads back.
  const std::string line = header_to_json(header).dump();
  try {
    const nlohmann::json root = nlohmann::json::parse(line);
    const TraceHeader checked = header_from_json(Field(root));
    version_ = checked.version;
    build_checked_layout(checked);
    checker_ = std::make_unique<StepChecker>(checked);
  } catch (const FieldError& e) {
    model::fail_input("{}: header: {}: {}", name_, e.field, e.reason);
  }
  put_line(line);
}

void TraceWriter::write(const model::Step& step) {
  try {
    checker_->check(step);
    if (!step.expect.empty() && version_ < kTraceFormatVersionExpect)
      fail_field("expect", "needs a header of version {} or later, this one is {}",
                 kTraceFormatVersionExpect, version_);
    if (!step.block_copies.empty() && version_ < kTraceFormatVersionCopies)
      fail_field("block_copies", "needs a header of version {} or later, this one is {}",
                 kTraceFormatVersionCopies, version_);
    check_expectations(step);
  } catch (const FieldError& e) {
    model::fail_input("{}: step {}: {}: {}", name_, step.index, e.field, e.reason);
  }
  put_line(step_to_line(step));
  ++steps_written_;
}

void TraceWriter::put_line(const std::string& line) {
  out_->write(line.data(), static_cast<std::streamsize>(line.size()));
  out_->put('\n');
  out_->flush();
  if (*out_) return;
  const int error = errno;
  // A trace cut mid-line does not read back: the file of one this writer opened goes (a run
  // stopped by a signal finishes its last line and keeps its trace).
  const bool removed = file_ && !model::is_special_file(name_);
  if (file_) {
    file_->close();
    model::remove_partial_file(name_); // a device written in place stays
  }
  throw model::EnvironmentError(fmt::format("{}: writing the trace failed: {}{}", name_,
                                            std::strerror(error),
                                            removed ? " (the partial file was removed)" : ""));
}

} // namespace mc::scenarios
