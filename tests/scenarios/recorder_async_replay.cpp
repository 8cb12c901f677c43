// The vLLM recorder's async trace replayed: tests/scenarios/recorder_test.py records a run from
// stand-ins shaped like vLLM's async scheduler output (optimistic counts, placeholder drafts)
// and leaves the trace; it must replay clean on the oracle and the host backend, and each
// tampered copy of it must be a finding of its own kind at the tampered step:
// - an optimistic count off by one, or dropped where the step in flight rejected drafts:
//   inconsistent_step (the count a step planned during another must have been planned from);
// - a block handed out that the step in flight could still touch (one of the blocks the
//   shadow block manager held back while replaying that step, at or above the column its row
//   reads): in_flight_block_reused, since
//   the trace (a run of mambacheck's engine) says its scheduler holds such frees back; the
//   same copy under vLLM's ordered contract (the header's unordered_writer dropped) passes
//   that step (the trace's later steps, recorded without the tamper, may then disagree);
// and a copy whose step keeps an optimistic count without planned_during is refused as a bad
// file (exit 2 in the CLI).
//
// Usage: scenarios_recorder_async_replay TRACE. Exit 0 all as expected; 1 otherwise; 77
// (skipped) when TRACE does not exist (python3 missing, the fixture did not run).
#include "harness/replay.h"
#include "model/block_table.h"
#include "model/errors.h"
#include "oracle/engine/replay.h"
#include "scenarios/trace.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using mc::oracle::engine::FindingKind;
using Json = nlohmann::ordered_json;

int fail(const std::string& what) {
  std::fprintf(stderr, "recorder async replay: %s\n", what.c_str());
  return 1;
}

std::vector<Json> read_lines(const fs::path& path) {
  std::ifstream in(path);
  std::vector<Json> lines;
  for (std::string line; std::getline(in, line);)
    lines.push_back(Json::parse(line));
  return lines;
}

fs::path write_lines(const fs::path& path, const std::vector<Json>& lines) {
  std::ofstream out(path, std::ios::trunc);
  for (const Json& line : lines)
    out << line.dump() << "\n";
  return path;
}

mc::harness::ReplayResult replay(const fs::path& trace) {
  return mc::harness::replay_file(trace, {});
}

// The first cached entry with an optimistic count: (line, entry index), or (0, 0).
std::pair<std::size_t, std::size_t> first_optimistic(const std::vector<Json>& lines) {
  for (std::size_t l = 1; l < lines.size(); ++l) {
    if (!lines[l].contains("cached_requests")) continue;
    const Json& cached = lines[l]["cached_requests"];
    for (std::size_t i = 0; i < cached.size(); ++i)
      if (cached[i].contains("num_computed_tokens_optimistic")) return {l, i};
  }
  return {0, 0};
}

int expect_finding(const mc::harness::ReplayResult& r, FindingKind kind, std::int64_t step,
                   const std::string& req_id, const std::string& what) {
  if (!r.finding) return fail(what + ": no finding: " + r.summary());
  if (r.finding->kind != kind || r.finding->step != step || r.finding->req_id != req_id)
    return fail(fmt::format("{}: expected {} at step {} for {}, got: {}", what,
                            mc::oracle::engine::to_string(kind), step, req_id, r.finding->message));
  std::printf("%s: %s\n", what.c_str(), r.finding->message.c_str());
  return 0;
}

// Tamper with the planned count of the first running request planned from an optimistic one.
int tampered_counts(const std::vector<Json>& lines, const fs::path& dir) {
  const auto [l, i] = first_optimistic(lines);
  if (l == 0) return fail("the trace has no optimistic count");
  const std::int64_t step = lines[l]["index"].get<std::int64_t>();
  const std::string id = lines[l]["cached_requests"][i]["req_id"].get<std::string>();
  const std::int32_t num_spec = lines[0]["config"]["num_spec_tokens"].get<std::int32_t>();
  std::vector<Json> off = lines;
  Json& entry = off[l]["cached_requests"][i];
  const std::int32_t over = entry["num_computed_tokens_optimistic"].get<std::int32_t>() -
                            entry["num_computed_tokens"].get<std::int32_t>();
  entry["num_computed_tokens_optimistic"] =
      entry["num_computed_tokens_optimistic"].get<std::int32_t>() + (over < num_spec ? 1 : -1);
  if (int rc = expect_finding(replay(write_lines(dir / "off_by_one.jsonl", off)),
                              FindingKind::inconsistent_step, step, id, "optimistic count moved"))
    return rc;
  std::vector<Json> dropped = lines;
  dropped[l]["cached_requests"][i].erase("num_computed_tokens_optimistic");
  if (int rc = expect_finding(replay(write_lines(dir / "dropped.jsonl", dropped)),
                              FindingKind::inconsistent_step, step, id, "optimistic count dropped"))
    return rc;
  std::vector<Json> unplanned = lines;
  unplanned[l].erase("planned_during");
  try {
    replay(write_lines(dir / "unplanned.jsonl", unplanned));
    return fail("a step with an optimistic count and no planned_during was read");
  } catch (const mc::model::InputError& e) {
    if (std::string(e.what()).find("an optimistic count needs planned_during") == std::string::npos)
      return fail(std::string("unplanned: ") + e.what());
    std::printf("planned_during dropped: refused: %s\n", e.what());
  }
  return 0;
}

// The first step that hands a running request a fresh block while the shadow block manager
// holds another back for the step in flight: that block put in place of the fresh one.
int tampered_block(const std::vector<Json>& lines, const fs::path& dir) {
  mc::scenarios::TraceReader reader{dir / "clean.jsonl"};
  mc::model::CacheConfig config = reader.header().config;
  const mc::model::Layout& layout = reader.layout();
  mc::oracle::engine::Replayer replayer(layout, {.flavour = config.runner}, 64,
                                        mc::oracle::engine::Structures::fast, true,
                                        reader.header().contract);
  const auto nsb = static_cast<std::size_t>(config.num_spec_blocks);
  for (std::size_t l = 1; l < lines.size(); ++l) {
    std::optional<mc::model::Step> step = reader.next();
    if (!step) return fail("the trace ended early");
    // The fresh blocks this step appends, as (entry, position in new_block_ids[0]).
    std::vector<std::pair<std::size_t, std::size_t>> fresh;
    for (std::size_t i = 0; i < step->cached_requests.size(); ++i) {
      const mc::model::CachedRequestData& c = step->cached_requests[i];
      const mc::model::GroupBlockIds* row = replayer.runner().row(c.req_id);
      if (c.resumed || row == nullptr) continue;
      const std::vector<std::int32_t>& old_ids = (*row)[0];
      const auto spec = old_ids.end() - static_cast<std::ptrdiff_t>(std::min(nsb, old_ids.size()));
      for (std::size_t k = 0; k < c.new_block_ids[0].size(); ++k)
        if (c.new_block_ids[0][k] != mc::model::kNullBlockId &&
            std::find(spec, old_ids.end(), c.new_block_ids[0][k]) == old_ids.end())
          fresh.emplace_back(i, k);
    }
    if (auto f = replayer.step(*step)) return fail("the clean trace: " + f->message);
    // A block the step in flight can still touch (a block below the column its row reads is
    // held back by policy only, and vLLM may hand that one out).
    const mc::oracle::engine::BlockPool& pool = replayer.blocks().pool(0);
    std::vector<std::int32_t> held;
    for (const std::int32_t b : pool.held_back_blocks())
      if (pool.held_back_touchable(b)) held.push_back(b);
    if (held.empty() || fresh.empty()) continue;
    std::vector<Json> tampered = lines;
    Json& entry = tampered[l]["cached_requests"][fresh.front().first];
    entry["new_block_ids"][0][fresh.front().second] = held.front();
    if (int rc = expect_finding(replay(write_lines(dir / "held_block.jsonl", tampered)),
                                FindingKind::in_flight_block_reused, step->index,
                                entry["req_id"].get<std::string>(), "held-back block handed out"))
      return rc;
    // The steps run in order on one stream: the step in flight is done with the block before
    // the one that takes it runs.
    tampered[0]["scheduler"].erase("unordered_writer");
    const mc::harness::ReplayResult ordered =
        replay(write_lines(dir / "held_block_ordered.jsonl", tampered));
    if (ordered.finding && (ordered.finding->kind == FindingKind::in_flight_block_reused ||
                            ordered.stop_step <= step->index))
      return fail("the handed-out held-back block under the ordered contract: " +
                  ordered.summary());
    std::printf("the same under the ordered contract: %s\n", ordered.summary().c_str());
    return 0;
  }
  return fail("no step hands out a block while another is held back");
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 2) return fail("usage: scenarios_recorder_async_replay TRACE");
  if (!fs::exists(argv[1])) {
    std::printf("skipped: %s does not exist (recorder_test.py did not run)\n", argv[1]);
    return 77;
  }
  try {
    const std::vector<Json> lines = read_lines(argv[1]);
    const fs::path dir = fs::path(argv[1]).parent_path() / "recorder_async_tampered";
    fs::create_directories(dir);
    write_lines(dir / "clean.jsonl", lines);
    const mc::harness::ReplayResult clean = replay(dir / "clean.jsonl");
    if (!clean.held()) return fail("the recorded trace: " + clean.summary());
    if (clean.stats.steps != static_cast<std::int64_t>(lines.size()) - 1)
      return fail(fmt::format("{} steps replayed of {}", clean.stats.steps, lines.size() - 1));
    if (clean.coverage.count("async-rollback") == 0 || clean.coverage.count("async-held-free") == 0)
      return fail("the recorded trace never rolls back a draft or holds a free back");
    std::printf("recorded async trace: %s\n", clean.summary().c_str());
    if (int rc = tampered_counts(lines, dir)) return rc;
    return tampered_block(lines, dir);
  } catch (const std::exception& e) {
    return fail(std::string("error: ") + e.what());
  }
}
