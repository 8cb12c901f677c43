// model/process.h: children started with pipes, read against a deadline, killed with their
// process group, and the line that says how each ended.
#include "model/process.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <string>

namespace mc::model {
namespace {

Child shell(const std::string& script, bool own_group = false) {
  return Child::spawn({.program = "/bin/sh",
                       .argv = {"sh", "-c", script},
                       .environment = {"MC_PROCESS_TEST=set"},
                       .fds = {{.at = {STDIN_FILENO}, .child_writes = false},
                               {.at = {STDOUT_FILENO, STDERR_FILENO}}},
                       .own_group = own_group,
                       .what = "process test"});
}

TEST(Process, SpawnedChildEchoesLinesAndSeesItsEnvironment) {
  Child child = shell("read line; echo \"got $line $MC_PROCESS_TEST\"; echo oops >&2");
  ASSERT_TRUE(write_all(child.fd(0), "hello\n"));
  std::string buffer;
  std::string line;
  EXPECT_EQ(read_line(child.fd(1), buffer, line, Deadline::after(10), 1 << 10), ReadEnd::line);
  EXPECT_EQ(line, "got hello set");
  EXPECT_EQ(read_line(child.fd(1), buffer, line, Deadline::after(10), 1 << 10), ReadEnd::line);
  EXPECT_EQ(line, "oops");
  EXPECT_EQ(read_line(child.fd(1), buffer, line, Deadline::after(10), 1 << 10), ReadEnd::closed);
  EXPECT_EQ(child.reap(10'000).describe(), "exited with code 0");
}

TEST(Process, ReadLineTimesOutAndTheGroupIsKilled) {
  // The sleep is the shell's child: killing the group ends it too, so its stdout closes.
  Child child = shell("sleep 30; echo late", true);
  std::string buffer;
  std::string line;
  EXPECT_EQ(read_line(child.fd(1), buffer, line, Deadline::after(0.2), 1 << 10),
            ReadEnd::timed_out);
  const ProcessEnd end = child.reap();
  EXPECT_EQ(end.signal(), SIGKILL);
  EXPECT_EQ(end.describe(), "killed by SIGKILL (killed)");
  child.kill(); // the leftovers: none
  EXPECT_EQ(read_line(child.fd(1), buffer, line, Deadline::after(10), 1 << 10), ReadEnd::closed);
}

TEST(Process, ForkedFunctionWritesThroughItsPipe) {
  Child child = Child::fork(
      {{.at = {}}},
      [](std::span<const int> ends) {
        write_all(ends[0], "from the child");
        _exit(3);
      },
      "process test");
  std::string got;
  while (read_some(child.fd(0), got) != ReadEnd::closed) {
  }
  EXPECT_EQ(got, "from the child");
  EXPECT_EQ(child.reap(10'000).exit_code(), 3);
}

TEST(Process, MissingProgramIsASpawnFailure) {
  EXPECT_THROW(Child::spawn({.program = "/nonexistent/mc", .argv = {"mc"}}), SpawnFailure);
}

TEST(Process, SignalDescriptions) {
  EXPECT_EQ(signal_description(SIGSEGV), "SIGSEGV (invalid memory reference)");
  EXPECT_EQ(signal_description(SIGBUS), "SIGBUS (bus error: bad memory access)");
  EXPECT_EQ(signal_description(SIGKILL), "SIGKILL (killed)");
  EXPECT_EQ(signal_description(63), "signal 63");
}

} // namespace
} // namespace mc::model
