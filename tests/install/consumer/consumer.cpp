// Reads a case directory and a trace with mambacheck's installed libraries, writes both back
// and reads the copies, printing what it found (one line each, for the install test to check):
//
//   mc_consumer CASE_DIR TRACE OUT_DIR
//
//   case KIND reqs=N slots=N tensors=N arenas=N arena_bytes=N
//   result STATUS decisions=N                 (when CASE_DIR has expected/)
//   case copy: equal
//   trace PRESET version=N steps=N rows=N
//   trace copy: equal
//
// Exit 0; 1 when a copy differs; 2 with one line for input the libraries refuse.
#include "model/case_file.h"
#include "model/errors.h"
#include "scenarios/trace.h"

#include <cstdio>
#include <filesystem>
#include <optional>

namespace {

namespace fs = std::filesystem;
using namespace mc;

bool same_case(const model::LaunchCase& a, const model::LaunchCase& b) {
  if (a.kind != b.kind || a.num_reqs != b.num_reqs || a.num_slots != b.num_slots) return false;
  if (!(a.requests == b.requests) || a.arenas.size() != b.arenas.size()) return false;
  for (std::size_t i = 0; i < a.arenas.size(); ++i)
    if (a.arenas[i].first_difference(b.arenas[i]) != -1) return false;
  return true;
}

bool read_case(const fs::path& dir, const fs::path& out) {
  const model::LaunchCase c = model::load_case(dir);
  std::int64_t arena_bytes = 0;
  for (const model::Arena& a : c.arenas)
    arena_bytes += a.size_bytes();
  std::printf("case %s reqs=%d slots=%d tensors=%zu arenas=%zu arena_bytes=%lld\n",
              std::string(model::to_string(c.kind)).c_str(), c.num_reqs, c.num_slots,
              c.layout.tensors.size(), c.arenas.size(), static_cast<long long>(arena_bytes));
  if (model::has_result(dir)) {
    const model::LaunchResult r = model::load_result(dir);
    std::printf("result %s decisions=%zu\n",
                r.status == model::LaunchStatus::ok ? "ok" : "unsupported", r.decisions.size());
  }
  model::save_case(c, out);
  const bool equal = same_case(c, model::load_case(out));
  std::printf("case copy: %s\n", equal ? "equal" : "DIFFERENT");
  return equal;
}

bool read_trace(const fs::path& file, const fs::path& out) {
  scenarios::TraceReader reader(file);
  std::int64_t steps = 0;
  std::int64_t rows = 0;
  {
    scenarios::TraceWriter writer(out, reader.header());
    while (const std::optional<model::Step> step = reader.next()) {
      ++steps;
      rows += static_cast<std::int64_t>(step->scheduled.size());
      writer.write(*step);
    }
  }
  std::printf("trace %s version=%d steps=%lld rows=%lld\n", reader.header().preset.c_str(),
              reader.header().version, static_cast<long long>(steps), static_cast<long long>(rows));
  scenarios::TraceReader copy(out);
  std::int64_t copied_rows = 0;
  std::int64_t copied_steps = 0;
  while (const std::optional<model::Step> step = copy.next()) {
    ++copied_steps;
    copied_rows += static_cast<std::int64_t>(step->scheduled.size());
  }
  const bool equal = copied_steps == steps && copied_rows == rows &&
                     copy.header().preset == reader.header().preset;
  std::printf("trace copy: %s\n", equal ? "equal" : "DIFFERENT");
  return equal;
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: mc_consumer CASE_DIR TRACE OUT_DIR\n");
    return 2;
  }
  const fs::path out = argv[3];
  try {
    fs::create_directories(out);
    const bool case_equal = read_case(argv[1], out / "case");
    const bool trace_equal = read_trace(argv[2], out / "trace.jsonl");
    return case_equal && trace_equal ? 0 : 1;
  } catch (const model::InputError& e) {
    std::fprintf(stderr, "mc_consumer: error: %s\n", e.what());
    return 2;
  }
}
