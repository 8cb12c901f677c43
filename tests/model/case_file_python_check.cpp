// Runs model/examples/read_case.py on case directories written here, as a Python user
// would: it must accept good cases (with and without an expected result) and reject one
// whose expected arena does not hold the bytes its decision says were copied.
//
// Usage: case_file_python_check PYTHON3 READ_CASE_PY WORK_DIR
// Exit: 0 all held, 1 a check failed, 77 python3 or numpy is missing (ctest: skipped).
#include "model/case_file.h"
#include "tests/model/case_fixtures.h"

#include <spawn.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

extern char** environ;

namespace {

namespace fs = std::filesystem;
using namespace mc::model;

constexpr int kSkip = 77;

// Runs argv, its output passed through; the exit status, or -1 when it could not start.
int run(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

bool check(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAILED", what.c_str());
  return ok;
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s PYTHON3 READ_CASE_PY WORK_DIR\n", argv[0]);
    return 2;
  }
  const std::string python = argv[1];
  const std::string script = argv[2];
  const fs::path work = argv[3];
  if (python.empty() || python.ends_with("NOTFOUND") || run({python, "--version"}) != 0) {
    std::printf("python3 not found: skipped\n");
    return kSkip;
  }
  if (run({python, "-c", "import numpy"}) != 0) {
    std::printf("numpy is missing (Debian: python3-numpy): skipped\n");
    return kSkip;
  }
  fs::remove_all(work);
  bool ok = true;
  const auto expect_rc = [&](const fs::path& dir, bool accept) {
    const int rc = run({python, script, dir.string()});
    ok &= check(accept ? rc == 0 : rc == 1, dir.filename().string() +
                                                (accept ? " accepted" : " rejected") + " (exit " +
                                                std::to_string(rc) + ")");
  };
  try {
    for (const auto& [preset, conv] :
         {std::pair{"tiny-mixed", ConvLayout::DS}, std::pair{"tiny-mixed", ConvLayout::SD},
          std::pair{"tiny-gdn", ConvLayout::DS}, std::pair{"tiny-mamba1", ConvLayout::SD}}) {
      const fs::path dir = work / (std::string(preset) + "_" + std::string(to_string(conv)));
      const LaunchCase c = testing::make_case(preset, conv, LaunchKind::precopy, 5);
      save_case(c, dir);
      save_result(testing::precopy_result(c), dir);
      expect_rc(dir, true);
    }
    const fs::path plain = work / "postprocess_no_result";
    save_case(testing::make_case("tiny-kda", ConvLayout::SD, LaunchKind::postprocess, 6), plain);
    expect_rc(plain, true);

    // A decision whose bytes did not arrive: flip one byte of the first nonempty copy.
    const fs::path broken = work / "precopy_wrong_bytes";
    const LaunchCase c = testing::make_case("tiny-mixed", ConvLayout::DS, LaunchKind::precopy, 5);
    LaunchResult r = testing::precopy_result(c);
    const CopyDecision& d = r.decisions.front();
    const StateTensor& t = c.layout.tensors[static_cast<std::size_t>(d.tensor)];
    std::byte& b =
        r.arenas[static_cast<std::size_t>(t.arena)].data()[t.block_offset_bytes(d.dst_block_id)];
    b = ~b;
    save_case(c, broken);
    save_result(r, broken);
    expect_rc(broken, false);
  } catch (const std::exception& e) {
    std::printf("FAILED: %s\n", e.what());
    return 1;
  }
  return ok ? 0 : 1;
}
