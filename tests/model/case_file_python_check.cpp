// Runs model/examples/read_case.py on case directories written here, as a Python user
// would: it must accept good cases (with and without an expected result) and reject one
// whose expected arena does not hold the bytes its decision says were copied.
//
// It also runs the worked example of CASE_FORMAT.md as written there, so the document
// cannot drift from the format.
//
// Usage: case_file_python_check PYTHON3 READ_CASE_PY CASE_FORMAT_MD WORK_DIR
// Exit: 0 all held, 1 a check failed, 77 python3 or numpy is missing (ctest: skipped).
#include "model/case_file.h"
#include "model/npy.h"
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
  if (posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

bool check(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAILED", what.c_str());
  return ok;
}

// Files numpy writes (np.save, and format versions 2.0 and 3.0) read back in C++.
constexpr const char* kNumpyWrites = R"py(
import sys, numpy as np
from numpy.lib import format
d = sys.argv[1]
np.save(d + "/i4.npy", np.arange(-3, 9, dtype="<i4").reshape(3, 4))
np.save(d + "/i8.npy", np.array([-(2**62), 2**40, 5], dtype="<i8"))
np.save(d + "/u8.npy", np.array([2**64 - 1, 0], dtype="<u8"))
np.save(d + "/u1.npy", np.arange(256, dtype=np.uint8).reshape(2, 8, 16))
for v in (2, 3):
    with open(f"{d}/v{v}.npy", "wb") as fh:
        format.write_array(fh, np.arange(6, dtype="<i4").reshape(2, 3), version=(v, 0))
)py";

// A Python user rewrites every array of a case directory with numpy.
constexpr const char* kNumpyResaves = R"py(
import sys, pathlib, numpy as np
for p in pathlib.Path(sys.argv[1]).rglob("*.npy"):
    np.save(p, np.load(p))
)py";

// The first python block of CASE_FORMAT.md, run on a case directory.
constexpr const char* kRunDocExample = R"py(
import re, sys, pathlib
text = pathlib.Path(sys.argv[1]).read_text()
code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
code = code.replace('pathlib.Path("case_dir")', "pathlib.Path(sys.argv[2])")
exec(compile(code, "CASE_FORMAT.md example", "exec"), {"sys": sys, "__name__": "__main__"})
)py";

template <typename T> std::vector<T> iota(std::size_t n, T first) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = static_cast<T>(first + static_cast<T>(i));
  return v;
}

bool numpy_files_read_back(const std::string& python, const fs::path& dir) {
  fs::create_directories(dir);
  if (!check(run({python, "-c", kNumpyWrites, dir.string()}) == 0, "numpy wrote .npy files"))
    return false;
  bool ok = true;
  const auto i4 = read_npy<std::int32_t>(dir / "i4.npy");
  ok &=
      check(i4.values == iota<std::int32_t>(12, -3) && i4.shape == std::vector<std::int64_t>{3, 4},
            "int32 (3, 4) from np.save");
  ok &= check(read_npy<std::int64_t>(dir / "i8.npy").values ==
                  std::vector<std::int64_t>{-(std::int64_t{1} << 62), std::int64_t{1} << 40, 5},
              "int64 from np.save");
  ok &= check(read_npy<std::uint64_t>(dir / "u8.npy").values ==
                  std::vector<std::uint64_t>{~std::uint64_t{0}, 0},
              "uint64 from np.save");
  const auto u1 = read_npy<std::uint8_t>(dir / "u1.npy");
  ok &= check(u1.values == iota<std::uint8_t>(256, 0) &&
                  u1.shape == std::vector<std::int64_t>{2, 8, 16},
              "uint8 (2, 8, 16) from np.save");
  for (const char* v : {"v2.npy", "v3.npy"})
    ok &= check(read_npy<std::int32_t>(dir / v).values == iota<std::int32_t>(6, 0),
                std::string(v) + " (format version 2.0 / 3.0)");
  return ok;
}

bool same_arenas(const std::vector<Arena>& a, const std::vector<Arena>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].first_difference(b[i]) != -1) return false;
  return true;
}

// save_case, numpy rewrites every array, load_case: the same case, byte for byte.
bool numpy_resaved_case_loads(const std::string& python, const fs::path& dir) {
  const LaunchCase c = testing::make_case("tiny-mixed", ConvLayout::DS, LaunchKind::precopy, 9);
  const LaunchResult r = testing::precopy_result(c);
  save_case(c, dir);
  save_result(r, dir);
  if (!check(run({python, "-c", kNumpyResaves, dir.string()}) == 0, "numpy re-saved a case"))
    return false;
  const LaunchCase c2 = load_case(dir);
  const LaunchResult r2 = load_result(dir);
  return check(c2.block_tables == c.block_tables && c2.requests == c.requests &&
                   same_arenas(c2.arenas, c.arenas) && r2.decisions == r.decisions &&
                   r2.requests == r.requests && same_arenas(r2.arenas, r.arenas),
               "a case re-saved by numpy loads unchanged");
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s PYTHON3 READ_CASE_PY CASE_FORMAT_MD WORK_DIR\n", argv[0]);
    return 2;
  }
  const std::string python = argv[1];
  const std::string script = argv[2];
  const std::string format_md = argv[3];
  const fs::path work = argv[4];
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
    ok &= numpy_files_read_back(python, work / "numpy_written");
    ok &= numpy_resaved_case_loads(python, work / "numpy_resaved");
    for (const auto& [preset, conv] :
         {std::pair{"tiny-mixed", ConvLayout::DS}, std::pair{"tiny-mixed", ConvLayout::SD},
          std::pair{"tiny-gdn", ConvLayout::DS}, std::pair{"tiny-mamba1", ConvLayout::SD}}) {
      const fs::path dir = work / (std::string(preset) + "_" + std::string(to_string(conv)));
      const LaunchCase c = testing::make_case(preset, conv, LaunchKind::precopy, 5);
      save_case(c, dir);
      save_result(testing::precopy_result(c), dir);
      expect_rc(dir, true);
      ok &= check(run({python, "-c", kRunDocExample, format_md, dir.string()}) == 0,
                  "the CASE_FORMAT.md example on " + dir.filename().string());
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
