// Bad input never crashes: malformed traces, case directories, scenario files and workloads,
// made by mutating valid ones, are either read (and then run) or refused with model::InputError
// whose one line names the file (and, for a trace, the line; for a value of a case directory's
// arrays that the oracle refuses, the directory); never another exception, a crash, a sanitizer
// report or an unbounded run. Run under the asan preset in CI with a small count per family;
// MC_BAD_INPUTS=N sets the count (docs/robustness.md).
#include "fuzz/gen_launch.h"
#include "harness/replay.h"
#include "harness/scenario_file.h"
#include "model/case_file.h"
#include "model/errors.h"
#include "model/launch_kinds.h"
#include "model/prng.h"
#include "oracle/launch.h"
#include "scenarios/trace.h"
#include "scenarios/workload_import.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace mc {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr double kSecondsPerInputMax = 60.0; // under AddressSanitizer, on a loaded machine

std::int64_t inputs_per_family() {
  const char* v = std::getenv("MC_BAD_INPUTS");
  return v != nullptr ? std::max<std::int64_t>(std::atoll(v), 1) : 150;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

// A value that breaks what a field expects: wrong type, out of range, overflowing 32 or 64
// bits, huge, deep.
nlohmann::json bad_value(model::SplitMix64& rng) {
  switch (rng.below(16)) {
  case 0: return "x";
  case 1: return -1;
  case 2: return 0;
  case 3: return std::int64_t{1} << 31;
  case 4: return std::numeric_limits<std::int64_t>::max();
  case 5: return std::numeric_limits<std::int64_t>::min();
  case 6: return std::numeric_limits<std::uint64_t>::max();
  case 7: return 1e308;
  case 8: return 0.5;
  case 9: return true;
  case 10: return nullptr;
  case 11: return nlohmann::json::array();
  case 12: return nlohmann::json::object();
  case 13: return std::string(200'000, 'a');
  case 14: return nlohmann::json::array({-1, std::numeric_limits<std::int64_t>::max(), "y"});
  default: {
    nlohmann::json deep = nlohmann::json::array();
    for (int i = 0; i < 300; ++i)
      deep = nlohmann::json::array({deep});
    return deep;
  }
  }
}

// Every (container, key-or-index) of a JSON document, so one can be deleted or replaced.
void collect_slots(nlohmann::json& j, std::vector<std::pair<nlohmann::json*, nlohmann::json>>& out) {
  if (j.is_object()) {
    for (auto& [k, v] : j.items()) {
      out.emplace_back(&j, k);
      collect_slots(v, out);
    }
  } else if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i) {
      out.emplace_back(&j, i);
      collect_slots(j[i], out);
    }
  }
}

// One JSON-level mutation (delete a field, retype it, put a bad value in it), or one
// byte-level mutation (truncate, a stray or non-UTF-8 byte, a BOM, CRLF, a huge line).
std::string mutate_json(const std::string& text, model::SplitMix64& rng) {
  const std::uint64_t op = rng.below(10);
  if (op < 6) {
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded()) return text + "{";
    std::vector<std::pair<nlohmann::json*, nlohmann::json>> slots;
    collect_slots(j, slots);
    if (slots.empty()) return "[]";
    auto& [parent, key] = slots[rng.below(slots.size())];
    if (op < 2) {
      if (parent->is_object())
        parent->erase(key.get<std::string>());
      else
        parent->erase(key.get<std::size_t>());
    } else {
      nlohmann::json& slot = parent->is_object() ? (*parent)[key.get<std::string>()]
                                                 : (*parent)[key.get<std::size_t>()];
      slot = bad_value(rng);
    }
    return j.dump();
  }
  std::string s = text;
  switch (op) {
  case 6: return s.substr(0, rng.below(s.size() + 1));
  case 7: {
    const std::size_t at = rng.below(s.size() + 1);
    const char bytes[] = {'\xff', '\0', '\xc3', '"', '{', ']', ',', '\n'};
    s.insert(at, 1, bytes[rng.below(sizeof bytes)]);
    return s;
  }
  case 8: return "\xEF\xBB\xBF" + s;
  default: return s + std::string(rng.below(2) == 0 ? 1'000'000 : 3, ' ');
  }
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

// A mutated copy of a JSON Lines text: one line mutated, or the lines reordered, repeated,
// dropped or ended with CRLF.
std::string mutate_lines(const std::string& text, model::SplitMix64& rng) {
  std::vector<std::string> lines = split_lines(text);
  const std::size_t i = rng.below(lines.size());
  switch (rng.below(8)) {
  case 0: lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(i)); break;
  case 1: lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(i), lines[i]); break;
  case 2: std::swap(lines[i], lines[rng.below(lines.size())]); break;
  case 3:
    for (std::string& l : lines)
      l += '\r';
    break;
  default: lines[i] = mutate_json(lines[i], rng);
  }
  std::string out;
  for (const std::string& l : lines)
    out += l + "\n";
  return out;
}

struct Tally {
  std::int64_t tried = 0, accepted = 0, refused = 0;
};

// Runs `consume` on `inputs` mutated inputs: each must return or throw model::InputError whose
// message starts with `name_prefix`; anything else fails the test, with the input saved.
void campaign(const std::string& family, const std::function<std::string(model::SplitMix64&)>& make,
              const std::function<void(const std::string&)>& consume,
              const std::string& name_prefix) {
  Tally t;
  const std::int64_t n = inputs_per_family();
  const fs::path keep = fs::temp_directory_path() / "mc_bad_input_failures";
  for (std::int64_t i = 0; i < n; ++i) {
    model::SplitMix64 rng = model::SplitMix64::from_seed(static_cast<std::uint64_t>(i) * 7919 + 1);
    const std::string input = make(rng);
    const Clock::time_point start = Clock::now();
    ++t.tried;
    try {
      consume(input);
      ++t.accepted;
    } catch (const model::InputError& e) {
      ++t.refused;
      const std::string what = e.what();
      if (t.refused <= 3) fmt::print("  {} refused: {}\n", family, what.substr(0, 200));
      if (what.rfind(name_prefix, 0) != 0 || what.find('\n') != std::string::npos) {
        fs::create_directories(keep);
        write_file(keep / fmt::format("{}-{}", family, i), input);
        ADD_FAILURE() << family << " input " << i << ": the error does not start with '"
                      << name_prefix << "' on one line: " << what;
      }
    } catch (const std::exception& e) {
      fs::create_directories(keep);
      write_file(keep / fmt::format("{}-{}", family, i), input);
      ADD_FAILURE() << family << " input " << i << " (saved under " << keep
                    << "): not an input error: " << e.what();
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    EXPECT_LT(seconds, kSecondsPerInputMax) << family << " input " << i;
  }
  fmt::print("{}: {} inputs, {} read and run, {} refused with one line, 0 other\n", family,
             t.tried, t.accepted, t.refused);
  EXPECT_EQ(t.tried, t.accepted + t.refused);
  EXPECT_GT(t.refused, t.tried / 4) << "the mutations mostly make valid inputs";
}

fs::path source(const std::string& relative) { return fs::path(MC_SOURCE_DIR) / relative; }

TEST(BadInput, Traces) {
  const std::vector<std::string> seeds = {
      read_file(source("scenarios/library/c-chunk-ending-mid-block.jsonl")),
      read_file(source("scenarios/library/d-null-and-pad.jsonl")),
      read_file(source("scenarios/library/h-all-mode-prefill.jsonl"))};
  campaign(
      "trace",
      [&](model::SplitMix64& rng) { return mutate_lines(seeds[rng.below(seeds.size())], rng); },
      [](const std::string& text) {
        std::istringstream in(text);
        scenarios::TraceReader reader(in, "t.jsonl");
        (void)harness::replay_trace(reader, {});
      },
      "t.jsonl:");
}

TEST(BadInput, Workloads) {
  std::string seed;
  for (int i = 0; i < 6; ++i)
    seed += fmt::format(R"({{"timestamp": {}, "input_length": {}, "output_length": {}, )"
                        R"("hash_ids": [1, 2, {}]}})",
                        i * 250, 9 + i, 3 + i % 2, 100 + i) +
            "\n";
  campaign(
      "workload", [&](model::SplitMix64& rng) { return mutate_lines(seed, rng); },
      [](const std::string& text) {
        std::istringstream in(text);
        (void)scenarios::import_workload(in, "w.jsonl", {.step_ms = 100, .hash_block_tokens = 4});
      },
      "w.jsonl");
}

TEST(BadInput, ScenarioFiles) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("mc_bad_scenarios_{}", getpid());
  fs::create_directories(dir);
  const std::vector<std::string> seeds = {
      read_file(source("scenarios/examples/b560-prefix-hit-v2.json")),
      read_file(source("scenarios/examples/b560-chunked-prefill-decode.json"))};
  const fs::path file = dir / "s.json";
  campaign(
      "scenario",
      [&](model::SplitMix64& rng) { return mutate_json(seeds[rng.below(seeds.size())], rng); },
      [&](const std::string& text) {
        write_file(file, text);
        (void)harness::expand_scenario(file);
      },
      file.string());
  fs::remove_all(dir);
}

// A case directory: case.json and the .npy files, each mutated in its own ways (a header that
// lies about shape or dtype, a truncated file, a directory or a device where a file goes).
TEST(BadInput, CaseDirectories) {
  const fs::path root = fs::temp_directory_path() / fmt::format("mc_bad_cases_{}", getpid());
  const fs::path valid = root / "valid";
  fs::create_directories(root);
  fuzz::GenOptions gen;
  gen.random_size = 5;
  model::save_case(fuzz::materialize(fuzz::random_launch_spec(3, gen)), valid);
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(valid))
    files.push_back(e.path().filename());
  std::sort(files.begin(), files.end());
  const fs::path dir = root / "case";
  campaign(
      "case",
      [&](model::SplitMix64& rng) {
        fs::remove_all(dir);
        fs::copy(valid, dir);
        const fs::path name = files[rng.below(files.size())];
        const fs::path target = dir / name;
        std::string bytes = read_file(target);
        const std::uint64_t op = rng.below(10);
        if (name.extension() == ".json" || op < 2) {
          write_file(target, mutate_json(bytes, rng));
        } else if (op < 4) {
          write_file(target, bytes.substr(0, rng.below(bytes.size() + 1)));
        } else if (op < 7) { // the header: shape, dtype or order lies
          const std::size_t brace = bytes.find('{');
          const std::size_t end = bytes.find('}');
          if (brace != std::string::npos && end != std::string::npos) {
            const char* lies[] = {"{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }",
                                  "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 2), }",
                                  "{'descr': '<i4', 'fortran_order': False, 'shape': "
                                  "(4611686018427387904, 4), }",
                                  "{'descr': '<i4', 'fortran_order': False, 'shape': (-1,), }",
                                  "{'descr': '|u1', 'fortran_order': False, 'shape': (), }",
                                  "{'descr': '<i4', 'shape': (1,)"};
            bytes.replace(brace, end - brace + 1, lies[rng.below(std::size(lies))]);
          }
          write_file(target, bytes);
        } else if (op < 8) {
          fs::remove(target);
          fs::create_directory(target);
        } else if (op < 9) {
          fs::remove(target);
          fs::create_symlink("/dev/zero", target);
        } else {
          fs::remove(target);
        }
        return name.string();
      },
      [&](const std::string&) {
        const model::LaunchCase c = model::load_case(dir);
        // As `mambacheck case` runs it: a value the oracle refuses names the directory and the
        // .npy file that holds it.
        try {
          (void)oracle::run_launch(c);
        } catch (const model::LaunchInputError& e) {
          model::fail_in_case(dir, e);
        } catch (const model::InputError& e) {
          model::fail_input("{}: {}", dir.string(), e.what());
        }
      },
      dir.string());
  fs::remove_all(root);
}

} // namespace
} // namespace mc
