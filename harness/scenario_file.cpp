// Scripted scenarios expanded into traces (scenario_file.h).
#include "harness/scenario_file.h"

#include "model/errors.h"
#include "model/json_field.h"
#include "model/presets.h"
#include "oracle/engine/driver.h"
#include "scenarios/derived_prompt.h"
#include "scenarios/trace_step_json.h"

#include <fmt/format.h>

#include <fstream>
#include <map>

namespace mc::harness {
namespace {

using model::Field;

constexpr std::size_t kScenarioBytesMax = std::size_t{16} << 20;
constexpr std::size_t kScenarioRequestsMax = 4096;
constexpr std::size_t kScenarioExpectMax = 1 << 16;
constexpr std::int64_t kScenarioStepsMax = 1'000'000;
constexpr std::int32_t kScenarioVocab = 32768;

struct ScriptedRequest {
  oracle::engine::RequestSpec spec;
  std::vector<std::int32_t> accept; // per decode step; the last repeats
};

struct PendingExpect {
  std::int64_t step = 0;
  model::RowExpectation row;
  std::string field; // its path, for a step where the request is not scheduled
};

void read_config(const Field& f, model::CacheConfig& c) {
  f.expect_object(
      {"mamba_block_size", "attn_block_size", "num_spec_tokens", "mode", "conv_layout", "runner"});
  if (f.has("mamba_block_size"))
    c.mamba_block_size = f["mamba_block_size"].int32(1, model::kBlockSizeMax);
  if (f.has("attn_block_size"))
    c.attn_block_size = f["attn_block_size"].int32(1, model::kBlockSizeMax);
  if (f.has("num_spec_tokens"))
    c.num_spec_tokens = f["num_spec_tokens"].int32(0, model::kSpecTokensMax);
  if (f.has("mode")) c.mode = f["mode"].parse_with(model::parse_cache_mode, 16);
  if (f.has("conv_layout"))
    c.conv_layout = f["conv_layout"].parse_with(model::parse_conv_layout, 16);
  if (f.has("runner")) c.runner = f["runner"].parse_with(model::parse_runner, 16);
  c.num_spec_blocks = c.num_spec_tokens; // one speculative block per draft, in both modes
}

ScriptedRequest read_request(const Field& f, std::int32_t index) {
  f.expect_object({"id", "prompt_len", "output_len", "arrival_step", "shared_prefix", "accept"});
  ScriptedRequest r;
  r.spec.req_id = f.has("id") ? f["id"].string(256) : fmt::format("r{}", index);
  r.spec.num_prompt_tokens = f["prompt_len"].int32(1, scenarios::kPromptTokensMax);
  const std::int32_t output_len =
      f.has("output_len") ? f["output_len"].int32(1, scenarios::kPromptTokensMax) : 16;
  r.spec.max_len = r.spec.num_prompt_tokens + output_len;
  r.spec.arrival_step = f.has("arrival_step") ? f["arrival_step"].integer(0, kScenarioStepsMax) : 0;
  std::int64_t family = -1, shared = 0;
  if (f.has("shared_prefix")) {
    const Field p = f["shared_prefix"];
    p.expect_object({"family", "len"});
    family = p["family"].integer(0, 0xFFFF);
    shared = p.has("len") ? p["len"].int32(0, r.spec.num_prompt_tokens) : r.spec.num_prompt_tokens;
  }
  // The trace format's derived-prompt streams: a family's stream is shared, each request has
  // its own after the shared part.
  const auto own = static_cast<std::uint32_t>(0x10000 + index);
  const std::int64_t length = r.spec.max_len + model::kSpecTokensMax + 2;
  for (std::int64_t i = 0; i < length; ++i)
    r.spec.tokens.push_back(
        scenarios::derived_token(i < shared ? static_cast<std::uint32_t>(family) : own,
                                 static_cast<std::uint32_t>(i), kScenarioVocab));
  if (f.has("accept")) {
    const Field a = f["accept"];
    if (a.value().is_array())
      r.accept = a.int32_list(1, 1 + model::kSpecTokensMax, kScenarioExpectMax);
    else
      r.accept = {a.int32(1, 1 + model::kSpecTokensMax)};
    if (r.accept.empty()) a.fail("an empty list");
  }
  return r;
}

PendingExpect read_expect(const Field& f, std::size_t num_groups) {
  std::vector<std::string_view> known{"step", "request"};
  known.insert(known.end(), scenarios::kExpectationFields.begin(),
               scenarios::kExpectationFields.end());
  f.expect_object(known);
  PendingExpect e{.step = f["step"].integer(0, kScenarioStepsMax), .field = f.path()};
  e.row = scenarios::expectation_fields_from_json(f, f["request"].string(256), num_groups);
  return e;
}

struct Script {
  std::string preset;
  model::CacheConfig config;
  model::LayoutSpec spec;
  oracle::engine::EngineOptions options;
  std::int64_t steps_max = 10'000;
  std::vector<ScriptedRequest> requests;
  std::vector<PendingExpect> expect;
};

Script read_script(const nlohmann::json& root_json) {
  const Field root(root_json);
  root.expect_object({"preset", "num_blocks", "config", "v1_copy_path", "token_budget",
                      "max_running", "drafter_prunes_last_block", "pad_prompt_tails", "steps_max",
                      "requests", "expect"});
  Script s{.preset = root["preset"].string(64)};
  const model::Preset* preset =
      root["preset"].parse_with([](std::string_view name) { return &model::find_preset(name); });
  s.config = preset->config;
  s.spec = preset->spec;
  if (root.has("config")) read_config(root["config"], s.config);
  if (root.has("num_blocks")) s.spec.num_blocks = root["num_blocks"].int32(4, model::kBlocksMax);
  s.options.runner.flavour = s.config.runner;
  if (root.has("v1_copy_path")) {
    const std::string path = root["v1_copy_path"].string(16);
    const std::optional<model::V1CopyPath> parsed = model::parse_v1_copy_path(path);
    if (!parsed) root["v1_copy_path"].fail("expected {}, got '{}'", model::kV1CopyPathNames, path);
    s.options.runner.v1_copy_path = *parsed;
  }
  s.options.scheduler.token_budget =
      root.has("token_budget") ? root["token_budget"].int32(1, oracle::engine::kTokenBudgetMax)
                               : oracle::engine::token_budget_default(s.config);
  if (root.has("max_running"))
    s.options.scheduler.max_running = root["max_running"].int32(1, oracle::engine::kRunningMax);
  // An EAGLE-style drafter reads one block less of the prompt, so a chunked prefill stops a
  // block short of the prompt's last boundary (REFERENCE.md 3, chunked prefill).
  if (root.has("drafter_prunes_last_block"))
    s.options.scheduler.drafter_prunes_last_block = root["drafter_prunes_last_block"].boolean();
  if (root.has("pad_prompt_tails"))
    s.options.scheduler.pad_prompt_tails = root["pad_prompt_tails"].boolean();
  s.options.scheduler.full_drafts_per_million = 1'000'000; // every decode carries its drafts
  if (root.has("steps_max")) s.steps_max = root["steps_max"].integer(1, kScenarioStepsMax);
  const Field requests = root["requests"];
  const std::size_t n = requests.array_size(kScenarioRequestsMax);
  if (n == 0) requests.fail("no requests");
  for (std::size_t i = 0; i < n; ++i)
    s.requests.push_back(read_request(requests[i], static_cast<std::int32_t>(i)));
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (s.requests[i].spec.req_id == s.requests[j].spec.req_id)
        requests[i]["id"].fail("'{}' is the id of requests[{}] too", s.requests[i].spec.req_id, j);
  if (root.has("expect")) {
    const Field expect = root["expect"];
    const std::size_t m = expect.array_size(kScenarioExpectMax);
    for (std::size_t i = 0; i < m; ++i)
      s.expect.push_back(read_expect(expect[i], s.spec.groups.size()));
  }
  return s;
}

// Decode rows take their scripted acceptance; prefill rows stay at 1, and so does a padded
// prompt tail (its drafts are placeholders).
void apply_acceptance(model::Step& step, const std::vector<ScriptedRequest>& requests,
                      std::map<std::string, std::size_t>& decodes) {
  std::map<std::string, std::int32_t> computed;
  for (const model::CachedRequestData& c : step.cached_requests)
    computed[c.req_id] = c.num_computed_tokens;
  for (model::ScheduledRequest& row : step.scheduled) {
    if (row.num_draft_tokens == 0 || !computed.contains(row.req_id)) continue;
    for (const ScriptedRequest& r : requests) {
      if (r.spec.req_id != row.req_id || r.accept.empty()) continue;
      if (computed.at(row.req_id) < r.spec.num_prompt_tokens) continue;
      const std::size_t k = decodes[row.req_id]++;
      const std::int32_t a =
          std::min(r.accept[std::min(k, r.accept.size() - 1)], 1 + row.num_draft_tokens);
      oracle::engine::force_acceptance(row, computed.at(row.req_id), r.spec.tokens, a);
    }
  }
}

ExpandedScenario run_script(Script& s) {
  model::CacheConfig config = s.config;
  const model::Layout layout = model::build_layout(config, s.spec);
  oracle::engine::validate_options(s.options, layout);
  ExpandedScenario out{.v1_copy_path = s.options.runner.v1_copy_path};
  out.header = scenarios::TraceHeader{.config = config, .preset = s.preset, .layout_spec = s.spec};
  out.header.version = s.expect.empty() ? 1 : scenarios::kTraceFormatVersionExpect;
  std::vector<oracle::engine::RequestSpec> specs;
  for (const ScriptedRequest& r : s.requests)
    specs.push_back(r.spec);
  std::stable_sort(specs.begin(), specs.end(),
                   [](const auto& a, const auto& b) { return a.arrival_step < b.arrival_step; });
  oracle::engine::Engine engine(layout, specs, 1, s.options);
  std::map<std::string, std::size_t> decodes;
  for (std::int64_t i = 0; i < s.steps_max; ++i) {
    const std::int64_t before = engine.report().steps;
    const bool more =
        engine.step([&](model::Step& step) { apply_acceptance(step, s.requests, decodes); });
    if (engine.report().steps == before) break;
    out.steps.push_back(engine.last_step());
    if (!more) break;
  }
  for (const PendingExpect& e : s.expect) {
    model::Step* step = nullptr;
    for (model::Step& candidate : out.steps)
      if (candidate.index == e.step) step = &candidate;
    if (step == nullptr)
      model::fail_field(e.field + ".step", "step {} never ran ({} steps)", e.step,
                        out.steps.size());
    step->expect.push_back(e.row);
    try {
      scenarios::check_expectations(*step);
    } catch (const model::FieldError& err) {
      model::fail_field(e.field + ".request", "{}", err.reason);
    }
    ++out.expectations;
  }
  return out;
}

} // namespace

ExpandedScenario expand_scenario(const std::filesystem::path& file) {
  const std::string name = file.string();
  std::ifstream in(file, std::ios::binary);
  if (!in) model::fail_input("{}: cannot open the scenario file", name);
  // At most one byte past the limit is read: a file with no end (/dev/zero) is refused too.
  std::string text(kScenarioBytesMax + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > kScenarioBytesMax)
    model::fail_input("{}: larger than {} bytes", name, kScenarioBytesMax);
  try {
    const nlohmann::json root = model::parse_json_text(text, model::JsonText::file);
    Script script = read_script(root);
    return run_script(script);
  } catch (const model::FieldError& e) {
    model::fail_input("{}: {}: {}", name, e.field.empty() ? "scenario" : e.field, e.reason);
  } catch (const model::InputError& e) {
    model::fail_input("{}: {}", name, e.what());
  }
}

void write_scenario_trace(const ExpandedScenario& scenario, const std::filesystem::path& trace) {
  scenarios::TraceWriter writer(trace, scenario.header);
  for (const model::Step& step : scenario.steps)
    writer.write(step);
}

} // namespace mc::harness
