// run_isolated: every way a child can end, with the exact line it is reported by. Each test
// makes its child fail on purpose; none of them may take this process down.
#include "fuzz/isolate.h"
#include "model/address_ranges.h"

#include <gtest/gtest.h>

#include <fmt/format.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

namespace mc::fuzz {
namespace {

// Writes through a pointer the compiler cannot see is null. UBSan would report the store
// itself (and exit); the test is about the fault, so the function is not instrumented for it.
[[gnu::no_sanitize("undefined"), gnu::noinline]] void write_through(int* volatile* pointer) {
  **pointer = 1;
}

TEST(Isolate, PayloadOfEightMebibytesRoundTrips) {
  constexpr std::size_t kBytes = std::size_t{8} << 20;
  std::string expected(kBytes, '\0');
  for (std::size_t i = 0; i < kBytes; ++i)
    expected[i] = static_cast<char>((i * 2654435761u) >> 13);
  const IsolatedOutcome out = run_isolated([&] { return expected; });
  ASSERT_TRUE(out.returned()) << out.message;
  EXPECT_EQ(out.end, IsolatedEnd::returned);
  EXPECT_EQ(out.message, "");
  EXPECT_EQ(out.payload.size(), kBytes);
  EXPECT_TRUE(out.payload == expected);
  EXPECT_EQ(out.fault_address, std::nullopt);
}

TEST(Isolate, EmptyPayloadIsAPayload) {
  const IsolatedOutcome out = run_isolated([] { return std::string(); });
  EXPECT_EQ(out.end, IsolatedEnd::returned);
  EXPECT_EQ(out.payload, "");
}

TEST(Isolate, NullWriteIsSigsegvAtAddressZero) {
  const IsolatedOutcome out = run_isolated([] {
    int* volatile null = nullptr;
    write_through(&null);
    return std::string("unreachable");
  });
  EXPECT_EQ(out.end, IsolatedEnd::signaled);
  EXPECT_EQ(out.signal, SIGSEGV);
  EXPECT_EQ(out.fault_address, 0u);
  EXPECT_EQ(
      out.message,
      "killed by SIGSEGV (invalid memory reference) at address 0x0 (in no buffer of the case)");
  EXPECT_EQ(out.payload, "");
}

// A registered range followed by an inaccessible page: a write 12 bytes past its end faults,
// and the line names the range.
TEST(Isolate, WriteIntoAGuardPageNamesTheRange) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  void* mapped =
      mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mapped, MAP_FAILED);
  auto* base = static_cast<std::uint8_t*>(mapped);
  ASSERT_EQ(mprotect(base + page, page, PROT_NONE), 0);
  std::uint8_t* const target = base + page + 12;
  const IsolatedOutcome out = run_isolated([&] {
    model::AddressRangeScope ranges;
    ranges.add(base, page, "arena conv of group 0");
    *static_cast<volatile std::uint8_t*>(target) = 1;
    return std::string("unreachable");
  });
  munmap(mapped, 2 * page);
  EXPECT_EQ(out.end, IsolatedEnd::signaled);
  EXPECT_EQ(out.signal, SIGSEGV);
  EXPECT_EQ(out.fault_address, reinterpret_cast<std::uint64_t>(target));
  EXPECT_EQ(out.message, fmt::format("killed by SIGSEGV (invalid memory reference) at address "
                                     "{} (12 bytes past the end of arena conv of group 0)",
                                     static_cast<const void*>(target)));
  EXPECT_EQ(model::address_ranges_registered(), 0); // the child's registry, not ours
}

TEST(Isolate, AbortIsSigabrt) {
  const IsolatedOutcome out = run_isolated([]() -> std::string { std::abort(); });
  EXPECT_EQ(out.end, IsolatedEnd::signaled);
  EXPECT_EQ(out.signal, SIGABRT);
  EXPECT_EQ(out.fault_address, std::nullopt);
  EXPECT_EQ(out.message, "killed by SIGABRT (aborted)");
}

TEST(Isolate, WhatTheChildSaidBeforeDyingIsQuoted) {
  const IsolatedOutcome out = run_isolated([]() -> std::string {
    std::fputs("\nmambacheck: internal assertion failed: x at y.cpp:1\nmore\n", stderr);
    std::abort();
  });
  EXPECT_EQ(out.message,
            "killed by SIGABRT (aborted): mambacheck: internal assertion failed: x at y.cpp:1");
  EXPECT_EQ(out.stderr_text, "\nmambacheck: internal assertion failed: x at y.cpp:1\nmore\n");
}

TEST(Isolate, ExceptionIsItsWhat) {
  const IsolatedOutcome out =
      run_isolated([]() -> std::string { throw std::runtime_error("boom in the kernel"); });
  EXPECT_EQ(out.end, IsolatedEnd::threw);
  EXPECT_EQ(out.message, "threw: boom in the kernel");
  EXPECT_EQ(out.payload, "");
}

TEST(Isolate, TimeoutKillsTheChild) {
  const auto start = std::chrono::steady_clock::now();
  const IsolatedOutcome out = run_isolated(
      [] {
        std::this_thread::sleep_for(std::chrono::seconds(30));
        return std::string("late");
      },
      IsolateOptions{.timeout_seconds = 0.5});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(out.end, IsolatedEnd::timed_out);
  EXPECT_EQ(out.message, "exceeded 0.5 s; killed");
  EXPECT_GE(seconds, 0.5);
  EXPECT_LT(seconds, 5.0);
}

TEST(Isolate, ExitWithoutPayload) {
  const IsolatedOutcome out = run_isolated([]() -> std::string { std::exit(7); });
  EXPECT_EQ(out.end, IsolatedEnd::exited);
  EXPECT_EQ(out.exit_code, 7);
  EXPECT_EQ(out.message, "exited with code 7 without a result");
}

TEST(Isolate, PayloadPastItsLimitIsCutShort) {
  const IsolatedOutcome out = run_isolated([] { return std::string(1 << 20, 'x'); },
                                           IsolateOptions{.payload_bytes_max = 1000});
  EXPECT_EQ(out.end, IsolatedEnd::timed_out);
  EXPECT_EQ(out.message, "wrote more than 1000 bytes of payload; killed");
}

// Under AddressSanitizer a heap overflow is the sanitizer's to see: it prints its report and
// exits 1, and the line quotes the report's ERROR line.
TEST(Isolate, SanitizerReportIsAnExitWithItsErrorLine) {
#if defined(__SANITIZE_ADDRESS__)
  const IsolatedOutcome out = run_isolated([] {
    // The size through a volatile: UBSan's object-size check (on from -O1) would otherwise
    // see the store past a known 16 bytes first and report it as its own runtime error.
    volatile std::size_t size = 16;
    auto* bytes = new std::uint8_t[size];
    const std::size_t past = size;
    bytes[past] = 1;
    delete[] bytes;
    return std::string("unreachable");
  });
  EXPECT_EQ(out.end, IsolatedEnd::exited);
  EXPECT_EQ(out.exit_code, 1);
  const std::string prefix = "exited with code 1 without a result: ERROR: AddressSanitizer: "
                             "heap-buffer-overflow on address 0x";
  EXPECT_EQ(out.message.substr(0, prefix.size()), prefix) << out.message;
#else
  GTEST_SKIP() << "this build has no AddressSanitizer";
#endif
}

// A signal that is no fault (here sent by the child to itself) is named, with no address.
TEST(Isolate, SignalFromOutsideIsNamed) {
  const IsolatedOutcome out = run_isolated([]() -> std::string {
    kill(getpid(), SIGKILL);
    std::this_thread::sleep_for(std::chrono::seconds(10));
    return "unreachable";
  });
  EXPECT_EQ(out.end, IsolatedEnd::signaled);
  EXPECT_EQ(out.signal, SIGKILL);
  EXPECT_EQ(out.message, "killed by SIGKILL (killed)");
}

// SIGINT and SIGTERM, which a terminal or a job scheduler sends to the whole process group, do
// not end the case: it runs to its end and the campaign stops after it (model/interrupt.h).
TEST(Isolate, TheCaseOutlivesSigintAndSigterm) {
  const IsolatedOutcome out = run_isolated([]() -> std::string {
    kill(getpid(), SIGINT);
    kill(getpid(), SIGTERM);
    return "finished";
  });
  EXPECT_EQ(out.end, IsolatedEnd::returned) << out.message;
  EXPECT_EQ(out.payload, "finished");
}

} // namespace
} // namespace mc::fuzz
