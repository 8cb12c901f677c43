// The vLLM recorder's output read back by TraceReader: the trace that
// adapters/python/tests/test_recorder.py leaves (its main scenario) must pass every check of the
// reader and hold what the scenario recorded.
//
// Usage: scenarios_recorder_readback TRACE. Exit 0 read and as expected; 1 a mismatch or a
// rejected trace; 77 (skipped) when TRACE does not exist (python3 missing, the fixture did
// not run).
#include "model/errors.h"
#include "scenarios/trace.h"

#include <cstdio>
#include <filesystem>
#include <vector>

namespace {

int fail(const char* what) {
  std::fprintf(stderr, "recorder read-back: %s\n", what);
  return 1;
}

int check(const std::vector<mc::model::Step>& steps, const mc::scenarios::TraceHeader& header) {
  if (header.preset != "tiny-mamba2") return fail("header preset");
  if (header.source.value("recorder", "") != "mambacheck_recorder 4") return fail("source");
  if (header.contract.registration != mc::model::CacheRegistration::at_schedule ||
      header.contract.eagle || header.contract.unordered_writer)
    return fail("scheduler: vLLM's contract (at_schedule, no eagle, ordered)");
  if (steps.size() != 5) return fail("expected 5 steps");
  const mc::model::ScheduledRequest& b = steps[1].scheduled.at(0);
  if (b.req_id != "b" || b.num_draft_tokens != 2 || b.num_accepted_tokens != 2 ||
      b.token_ids != std::vector<std::int32_t>{60, 61, 62})
    return fail("step 1, row b");
  if (steps[0].new_requests.at(1).num_computed_tokens != 4) return fail("prefix hit of b");
  if (steps[2].preempted_req_ids != std::vector<std::string>{"b"}) return fail("preemption");
  if (!steps[3].reset_prefix_cache || !steps[3].cached_requests.at(0).resumed)
    return fail("reset and resume");
  if (steps[4].finished_req_ids != std::vector<std::string>{"a"}) return fail("finished");
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 2) return fail("usage: scenarios_recorder_readback TRACE");
  if (!std::filesystem::exists(argv[1])) {
    std::printf("skipped: %s does not exist (recorder_test.py did not run)\n", argv[1]);
    return 77;
  }
  try {
    mc::scenarios::TraceReader reader{std::filesystem::path(argv[1])};
    std::vector<mc::model::Step> steps;
    while (std::optional<mc::model::Step> step = reader.next())
      steps.push_back(std::move(*step));
    const int rc = check(steps, reader.header());
    if (rc == 0) std::printf("recorder read-back: %zu steps read and as recorded\n", steps.size());
    return rc;
  } catch (const mc::model::InputError& e) {
    std::fprintf(stderr, "recorder read-back: rejected: %s\n", e.what());
    return 1;
  }
}
