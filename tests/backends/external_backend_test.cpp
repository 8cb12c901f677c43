// The external worker (backends/external_backend.h) with fake workers written as shell
// scripts: a worker that dies or hangs on a case is a finding for that case and is started
// again before the next; one that cannot start, greet or answer sensibly is a failure.
#include "backends/external_backend.h"
#include "fuzz/run_case.h"
#include "model/case_file.h"
#include "tests/model/case_fixtures.h"
#include "tests/model/temp_dir.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <type_traits>

namespace mc::backends {
namespace {

namespace fs = std::filesystem;

static_assert(std::is_base_of_v<fuzz::KernelError, ExternalWorkerCrash>,
              "a crash on a case is a finding, like an error: answer");

class ExternalWorkerTest : public testing::Test {
protected:
  ExternalWorkerTest() {
    launch_ = model::testing::make_case("tiny-mamba2", model::ConvLayout::SD,
                                        model::LaunchKind::precopy, 3);
    result_ = model::testing::make_result(launch_, model::LaunchStatus::ok, 4);
    model::save_case(launch_, result_dir());
    model::save_result(result_, result_dir());
  }

  fs::path result_dir() const { return dir_.path() / "answer"; }
  fs::path file(const char* name) const { return dir_.path() / name; }

  // A worker that greets, appends a line to `starts` each time it is started, and answers
  // the prepared result for every case, except that while the file `crashed` does not exist
  // it does `on_case_2` (which should create it) on its second case.
  std::string worker(const std::string& on_case_2) const {
    return fmt::format("echo 'mambacheck-worker 1 kinds=precopy'; echo started >> {starts}; n=0; "
                       "while read line; do n=$((n + 1)); "
                       "if [ $n -eq 2 ] && [ ! -e {crashed} ]; then {on_case_2}; fi; "
                       "echo {answer}; done",
                       fmt::arg("starts", shell_quote(file("starts").string())),
                       fmt::arg("crashed", shell_quote(file("crashed").string())),
                       fmt::arg("on_case_2", on_case_2),
                       fmt::arg("answer", shell_quote(result_dir().string())));
  }

  std::string mark_crashed() const {
    return fmt::format(": > {}", shell_quote(file("crashed").string()));
  }

  ExternalOptions options(const std::string& command, double timeout_seconds = 30.0) const {
    return ExternalOptions{.command = command,
                           .work_dir = dir_.path() / "work",
                           .log_file = file("worker.log"),
                           .timeout_seconds = timeout_seconds};
  }

  int starts() const {
    std::ifstream in(file("starts"));
    int lines = 0;
    for (std::string line; std::getline(in, line);)
      ++lines;
    return lines;
  }

  void expect_the_result(const model::LaunchResult& got) const {
    EXPECT_EQ(got.decisions, result_.decisions);
    EXPECT_EQ(got.requests, result_.requests);
  }

  // What run() threw: the crash's message, or a note that it threw nothing or something else.
  std::string crash_message(ExternalWorker& w) const {
    try {
      w.run(launch_);
    } catch (const ExternalWorkerCrash& e) {
      return e.what();
    } catch (const ExternalWorkerFailure& f) {
      return "ExternalWorkerFailure: " + f.message;
    }
    return "no crash";
  }

  model::testing::TempDir dir_;
  model::LaunchCase launch_;
  model::LaunchResult result_;
};

TEST_F(ExternalWorkerTest, SegfaultOnTheSecondCaseIsAFindingAndTheWorkerRestarts) {
  fs::create_directories(dir_.path() / "work");
  ExternalWorker w(options(worker(mark_crashed() + "; kill -SEGV $$")));
  expect_the_result(w.run(launch_));
  EXPECT_EQ(crash_message(w), "the worker died on this case: killed by SIGSEGV (invalid memory "
                              "reference)");
  EXPECT_EQ(starts(), 1); // started again only when the next case comes
  expect_the_result(w.run(launch_));
  EXPECT_EQ(starts(), 2);
  EXPECT_EQ(w.restarts(), 1);
  EXPECT_EQ(w.cases_run(), 3);
  expect_the_result(w.run(launch_)); // the restarted worker's second case: it is fine now
  EXPECT_EQ(starts(), 2);
}

TEST_F(ExternalWorkerTest, ATimeoutOnACaseIsAFindingAndTheWorkerRestarts) {
  fs::create_directories(dir_.path() / "work");
  ExternalWorker w(options(worker(mark_crashed() + "; sleep 30"), 0.5));
  expect_the_result(w.run(launch_));
  EXPECT_EQ(crash_message(w), "the worker exceeded 0.5 s on this case; killed");
  expect_the_result(w.run(launch_));
  EXPECT_EQ(starts(), 2);
}

TEST_F(ExternalWorkerTest, ADeathOnACaseQuotesTheWorkersStderr) {
  fs::create_directories(dir_.path() / "work");
  ExternalWorker w(options(worker(mark_crashed() + "; echo 'oops: index 9 out of range' >&2; "
                                                   "exit 4")));
  expect_the_result(w.run(launch_));
  EXPECT_EQ(crash_message(w), "the worker died on this case: exited with status 4; its stderr "
                              "ends: \"oops: index 9 out of range\"");
  expect_the_result(w.run(launch_));
}

// The log keeps what earlier instances wrote: a silent crash does not quote it again.
TEST_F(ExternalWorkerTest, AnEarlierCrashsStderrIsNotQuotedAgain) {
  fs::create_directories(dir_.path() / "work");
  const std::string crashed = shell_quote(file("crashed").string());
  ExternalWorker w(options(fmt::format("echo 'mambacheck-worker 1 kinds=precopy'; read l; "
                                       "if [ -e {0} ]; then kill -SEGV $$; fi; : > {0}; "
                                       "echo 'oops' >&2; exit 4",
                                       crashed)));
  EXPECT_EQ(crash_message(w), "the worker died on this case: exited with status 4; its stderr "
                              "ends: \"oops\"");
  EXPECT_EQ(crash_message(w), "the worker died on this case: killed by SIGSEGV (invalid memory "
                              "reference)");
}

// The campaign's view: a crash is a finding even where only kernel errors are findings.
TEST_F(ExternalWorkerTest, ACrashIsABackendFailureOfTheCase) {
  fs::create_directories(dir_.path() / "work");
  ExternalWorker w(options(worker("kill -SEGV $$")));
  const fuzz::LaunchRunner runner = [&w](const model::LaunchCase& c) { return w.run(c); };
  w.run(launch_);
  const fuzz::CaseOutcome outcome =
      fuzz::run_case(launch_, result_.clone(), runner, fuzz::BackendFindings::kernel_errors);
  EXPECT_EQ(outcome.status, fuzz::CaseStatus::backend_failed);
  EXPECT_EQ(outcome.failure(), "the backend failed: the worker died on this case: killed by "
                               "SIGSEGV (invalid memory reference)");
}

TEST_F(ExternalWorkerTest, AWorkerThatCannotStartAgainIsAFailure) {
  fs::create_directories(dir_.path() / "work");
  const std::string command =
      fmt::format("if [ -e {} ]; then exit 5; fi; {}", shell_quote(file("crashed").string()),
                  worker(mark_crashed() + "; kill -KILL $$"));
  ExternalWorker w(options(command));
  w.run(launch_);
  EXPECT_EQ(crash_message(w), "the worker died on this case: killed by SIGKILL (killed)");
  const std::string failed = crash_message(w);
  EXPECT_NE(failed.find("ExternalWorkerFailure: "), std::string::npos) << failed;
  EXPECT_NE(failed.find("closed its output while we waited for its greeting (it exited with "
                        "status 5)"),
            std::string::npos)
      << failed;
}

TEST_F(ExternalWorkerTest, NoGreetingAndFatalAnswersStayFailures) {
  fs::create_directories(dir_.path() / "work");
  EXPECT_THROW(ExternalWorker(options("exit 7")), ExternalWorkerFailure);
  ExternalWorker fatal(options("echo 'mambacheck-worker 1 kinds=precopy'; read l; "
                               "echo 'fatal: device lost'; sleep 30"));
  const std::string failed = crash_message(fatal);
  EXPECT_NE(failed.find("ExternalWorkerFailure: "), std::string::npos) << failed;
  EXPECT_NE(failed.find("device lost"), std::string::npos) << failed;
}

// The greeting's device and whether the module has broken variants: what `gate --external`
// reads to run its liveness stage on the adapter's test kernels for a module without them.
TEST_F(ExternalWorkerTest, TheGreetingSaysTheDeviceAndWhetherTheModuleHasVariants) {
  fs::create_directories(dir_.path() / "work");
  const ExternalWorker none(
      options("echo 'mambacheck-worker 1 kinds=precopy device=cuda variants=0 engine=1'; cat"));
  EXPECT_EQ(none.device(), "cuda");
  EXPECT_EQ(none.has_variants(), std::optional<bool>(false));
  const ExternalWorker some(
      options("echo 'mambacheck-worker 1 kinds=precopy device=host variants=1'; cat"));
  EXPECT_EQ(some.device(), "host");
  EXPECT_EQ(some.has_variants(), std::optional<bool>(true));
  const ExternalWorker unsaid(options("echo 'mambacheck-worker 1 kinds=precopy'; cat"));
  EXPECT_EQ(unsaid.device(), "");
  EXPECT_EQ(unsaid.has_variants(), std::nullopt);
}

} // namespace
} // namespace mc::backends
