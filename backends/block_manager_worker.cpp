#include "backends/block_manager_worker.h"

#include "model/errors.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <optional>

namespace mc::backends {
namespace {

constexpr std::size_t kLineBytesMax = 1 << 22; // one answer: tables of every group
constexpr int kExitWaitMillis = 2000;
constexpr std::string_view kGreetingWord = "mambacheck-block-manager";
constexpr std::string_view kProtocolVersion = "1";
constexpr std::int64_t kRestartsMax = 1 << 16;

using model::excerpt;

model::GroupBlockIds tables_from(const nlohmann::json& j, std::string_view key) {
  model::GroupBlockIds out;
  if (!j.contains(key)) return out;
  for (const nlohmann::json& group : j.at(key))
    out.push_back(group.get<std::vector<std::int32_t>>());
  return out;
}

} // namespace

BlockManagerWorker::BlockManagerWorker(BlockManagerOptions options) : options_(std::move(options)) {
  MC_ASSERT(!options_.command.empty() && options_.timeout_seconds > 0);
  ::signal(SIGPIPE, SIG_IGN); // a worker that dies while we write is reported, not our death
  start();
}

BlockManagerWorker::~BlockManagerWorker() {
  stop();
}

void BlockManagerWorker::start() {
  buffer_.clear();
  model::Fd log;
  if (!options_.log_file.empty()) {
    log = model::Fd(
        ::open(options_.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
    if (log.get() < 0)
      throw model::EnvironmentError(fmt::format("--block-manager: cannot open the log {}: {}",
                                                options_.log_file.string(), std::strerror(errno)));
  }
  std::vector<model::ChildFd> fds = {{.at = {STDIN_FILENO}, .child_writes = false},
                                     {.at = {STDOUT_FILENO}}};
  if (log.get() >= 0) fds.push_back({.at = {STDERR_FILENO}, .ours = log.get()});
  try {
    child_ = model::Child::spawn({.program = "/bin/sh",
                                  .argv = {"sh", "-c", options_.command},
                                  .fds = fds,
                                  .own_group = true,
                                  .default_signals = {SIGPIPE},
                                  .what = "--block-manager"});
  } catch (const std::system_error& e) {
    throw model::EnvironmentError(
        fmt::format("--block-manager '{}' cannot be started: {}", excerpt(options_.command),
                    e.code().message()));
  }
  std::string line;
  const model::ReadEnd end =
      model::read_line(child_.fd(1), buffer_, line,
                       model::Deadline::after(options_.timeout_seconds), kLineBytesMax);
  const bool greeted = end == model::ReadEnd::line &&
                       line.starts_with(fmt::format("{} {}", kGreetingWord, kProtocolVersion));
  if (!greeted) {
    const std::string said = end == model::ReadEnd::line ? fmt::format("greeted \"{}\"", excerpt(line))
                             : end == model::ReadEnd::timed_out
                                 ? fmt::format("did not greet within {} s", options_.timeout_seconds)
                                 : std::string("closed its output without a greeting");
    stop();
    throw model::EnvironmentError(fmt::format(
        "--block-manager '{}' {}; expected \"{} {} ...\"{}", excerpt(options_.command), said,
        kGreetingWord, kProtocolVersion,
        options_.log_file.empty() ? "" : fmt::format(" (log: {})", options_.log_file.string())));
  }
  greeting_ = line;
  crashed_ = false;
  attention_groups_ = 0;
  splits_ = line.find(" split=1") != std::string::npos;
  if (const std::size_t at = line.find(" attention_groups="); at != std::string::npos) {
    const std::string value = line.substr(at + 18, line.find(' ', at + 1) - at - 18);
    if (value.empty() || value.size() > 2 || !std::ranges::all_of(value, ::isdigit)) {
      stop();
      throw model::EnvironmentError(fmt::format("--block-manager '{}' greeted \"{}\": "
                                                "attention_groups must be 0..99",
                                                excerpt(options_.command), excerpt(line)));
    }
    attention_groups_ = std::stoi(value);
  }
}

void BlockManagerWorker::stop() {
  child_.close(0);
  if (child_.running()) child_.reap(kExitWaitMillis);
  child_ = model::Child();
}

void BlockManagerWorker::fault(std::string_view what, std::string message) {
  throw oracle::engine::KvManagerFault{fmt::format("the block manager's {}: {}", what, message)};
}

void BlockManagerWorker::post(const nlohmann::json& message, std::string_view what) {
  ++calls_;
  if (!model::write_all(child_.fd(0), message.dump() + "\n")) {
    read_answer(what); // it died: reported as that call's fault
    return;
  }
  posted_.push_back(what);
}

nlohmann::json BlockManagerWorker::call(const nlohmann::json& message, std::string_view what) {
  ++calls_;
  model::write_all(child_.fd(0), message.dump() + "\n"); // one that died is read as such
  flush();
  return read_answer(what);
}

void BlockManagerWorker::flush() {
  // Every posted answer is read before any is judged, so a fault leaves nothing unread.
  std::vector<std::string_view> posted = std::move(posted_);
  posted_.clear();
  std::optional<oracle::engine::KvManagerFault> first;
  for (const std::string_view what : posted) {
    try {
      read_answer(what);
    } catch (const oracle::engine::KvManagerFault& e) {
      if (crashed_) throw; // nothing more can be read
      if (!first) first = e;
    }
  }
  if (first) throw *first;
}

nlohmann::json BlockManagerWorker::read_answer(std::string_view what) {
  std::string answer;
  const model::ReadEnd end = model::read_line(child_.fd(1), buffer_, answer,
                                              model::Deadline::after(options_.timeout_seconds),
                                              kLineBytesMax);
  if (end != model::ReadEnd::line) {
    std::string how;
    if (end == model::ReadEnd::timed_out) {
      how = fmt::format("no answer within {} s; killed", options_.timeout_seconds);
    } else if (const std::optional<model::ProcessEnd> ended = child_.wait_for(kExitWaitMillis)) {
      how = fmt::format("the worker {}", ended->describe());
    } else {
      how = "the worker closed its output; killed";
    }
    child_.kill();
    stop();
    crashed_ = true;
    posted_.clear();
    fault(what, how);
  }
  if (answer.starts_with("error:")) {
    std::string_view said = std::string_view(answer).substr(6);
    while (said.starts_with(' ')) said.remove_prefix(1);
    fault(what, fmt::format("raised: {}", excerpt(said)));
  }
  try {
    nlohmann::json j = nlohmann::json::parse(answer);
    if (!j.is_object()) throw nlohmann::json::type_error::create(302, "not an object", nullptr);
    return j;
  } catch (const nlohmann::json::exception&) {
    fault(what, fmt::format("answered \"{}\", not a JSON object", excerpt(answer)));
  }
}

nlohmann::json BlockManagerWorker::request_json(const oracle::engine::KvRequest& r) {
  std::size_t& sent = tokens_sent_[std::string(r.id)];
  nlohmann::json j{{"id", r.id},
                   {"tokens", r.tokens.subspan(std::min(sent, r.tokens.size()))},
                   {"num_tokens", r.tokens.size()},
                   {"num_prompt", r.num_prompt},
                   {"num_computed", r.num_computed},
                   {"num_in_flight", r.num_in_flight},
                   {"placeholders", r.placeholders}};
  sent = std::max(sent, r.tokens.size());
  return j;
}

model::SchedulerContract BlockManagerWorker::setup(const oracle::engine::KvSetup& s) {
  if (crashed_) {
    if (restarts_ >= kRestartsMax)
      throw model::EnvironmentError(fmt::format("--block-manager '{}' died {} times; not started "
                                                "again", excerpt(options_.command), restarts_));
    ++restarts_;
    start();
  }
  tokens_sent_.clear();
  const nlohmann::json answer = call({{"op", "setup"},
                                      {"block_size", s.block_size},
                                      {"attention_block_size", s.attention_block_size},
                                      {"num_spec_blocks", s.num_spec_blocks},
                                      {"mode", s.all_mode ? "all" : "align"},
                                      {"mamba_groups", s.mamba_groups},
                                      {"num_blocks", s.num_blocks},
                                      {"eagle", s.eagle},
                                      {"async", s.async_scheduling},
                                      {"defer_block_free", s.defer_block_free},
                                      {"max_model_len", s.max_model_len},
                                      {"max_num_scheduled_tokens", s.max_num_scheduled_tokens},
                                      {"hash_block_size", s.hash_block_size}},
                                     "setup");
  copies_ = s.hash_block_size > 0 && s.hash_block_size < s.block_size;
  if (answer.contains("refused"))
    throw oracle::engine::KvManagerRefusal{excerpt(answer.at("refused").is_string()
                                                       ? answer.at("refused").get<std::string>()
                                                       : answer.at("refused").dump())};
  model::SchedulerContract c;
  try {
    const nlohmann::json& j = answer.at("contract");
    const auto registration =
        model::find_cache_registration(j.at("registration").get<std::string>());
    if (!registration) fault("setup", fmt::format("unknown registration {}", j.at("registration").dump()));
    c.registration = *registration;
    c.eagle = j.value("eagle", false);
    c.unordered_writer = j.value("unordered_writer", false);
    c.attention_groups = j.value("attention_groups", 0);
    c.shared_pool = j.value("shared_pool", false);
    c.hash_block_size = j.value("hash_block_size", 0);
    if (c.hash_block_size < 0 || c.hash_block_size > s.block_size ||
        (c.hash_block_size > 0 && s.block_size % c.hash_block_size != 0))
      fault("setup", fmt::format("answered hash_block_size {}, not a divisor of the block size {}",
                                 c.hash_block_size, s.block_size));
    if (c.hash_block_size == s.block_size) c.hash_block_size = 0;
  } catch (const nlohmann::json::exception& e) {
    fault("setup", fmt::format("answered a contract that does not read: {}", e.what()));
  }
  return c;
}

void BlockManagerWorker::new_step_starts() {
  post({{"op", "step"}}, "new_step_starts");
}

std::vector<model::BlockCopy> BlockManagerWorker::take_block_copies() {
  if (!copies_) return {};
  const nlohmann::json answer = call({{"op", "copies"}}, "take_kv_cache_block_copies");
  std::vector<model::BlockCopy> out;
  try {
    for (const nlohmann::json& c : answer.at("copies")) {
      const auto [group, src, dst] = c.get<std::array<std::int32_t, 3>>();
      out.push_back({.group = group, .src = src, .dst = dst});
    }
  } catch (const nlohmann::json::exception& e) {
    fault("take_kv_cache_block_copies", fmt::format("answer does not read: {}", e.what()));
  }
  return out;
}

std::int32_t BlockManagerWorker::call_for_tokens(const nlohmann::json& message,
                                                 std::string_view what) {
  const nlohmann::json answer = call(message, what);
  try {
    return answer.at("tokens").get<std::int32_t>();
  } catch (const nlohmann::json::exception& e) {
    fault(what, fmt::format("answer does not read: {}", e.what()));
  }
}

std::int32_t BlockManagerWorker::get_computed_blocks(const oracle::engine::KvRequest& r) {
  return call_for_tokens({{"op", "hit"}, {"req", request_json(r)}}, "get_computed_blocks");
}

bool BlockManagerWorker::allocate_slots(const oracle::engine::KvRequest& r,
                                        std::int32_t num_new_tokens,
                                        std::int32_t num_new_computed_tokens,
                                        std::int32_t num_lookahead_tokens,
                                        oracle::engine::KvAllocation& out) {
  const nlohmann::json answer = call({{"op", "allocate"},
                                      {"req", request_json(r)},
                                      {"num_new", num_new_tokens},
                                      {"num_new_computed", num_new_computed_tokens},
                                      {"lookahead", num_lookahead_tokens}},
                                     "allocate_slots");
  try {
    if (!answer.at("ok").get<bool>()) return false;
    out.appended = tables_from(answer, "new");
    out.held = tables_from(answer, "held");
    out.attention_appended = tables_from(answer, "attention_new");
    out.attention_held = tables_from(answer, "attention_held");
  } catch (const nlohmann::json::exception& e) {
    fault("allocate_slots", fmt::format("answer does not read: {}", e.what()));
  }
  return true;
}

std::optional<std::int32_t> BlockManagerWorker::aligned_split(const oracle::engine::KvRequest& r,
                                                              std::int32_t num_new_tokens,
                                                              std::int32_t num_new_computed_tokens) {
  if (!splits_) return std::nullopt;
  return call_for_tokens({{"op", "split"},
                          {"req", request_json(r)},
                          {"num_new", num_new_tokens},
                          {"num_new_computed", num_new_computed_tokens}},
                         "_mamba_block_aligned_split");
}

void BlockManagerWorker::free(const oracle::engine::KvRequest& r) {
  post({{"op", "free"}, {"id", r.id}, {"req", request_json(r)}}, "free");
}

void BlockManagerWorker::cache_blocks(const oracle::engine::KvRequest& r, std::int32_t num_tokens) {
  post({{"op", "cache"}, {"req", request_json(r)}, {"num_tokens", num_tokens}}, "cache_blocks");
}

void BlockManagerWorker::output_processed() {
  post({{"op", "output"}}, "update_from_output");
}

std::vector<std::pair<std::int32_t, std::int32_t>> BlockManagerWorker::referenced_blocks() {
  const nlohmann::json answer = call({{"op", "pool"}}, "pool");
  std::vector<std::pair<std::int32_t, std::int32_t>> out;
  try {
    for (const auto& [id, refs] : answer.at("refs").items()) {
      const std::int32_t block = std::stoi(id);
      if (block != 0) out.emplace_back(block, refs.get<std::int32_t>());
    }
  } catch (const std::exception& e) {
    fault("pool", fmt::format("answer does not read: {}", e.what()));
  }
  std::ranges::sort(out);
  return out;
}

bool BlockManagerWorker::reset_prefix_cache() {
  const nlohmann::json answer = call({{"op", "reset"}}, "reset_prefix_cache");
  return answer.value("ok", false);
}

} // namespace mc::backends
