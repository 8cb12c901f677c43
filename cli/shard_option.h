// Which shard of a campaign this process runs (fuzz/shard.h): `--shard K/N`, or else what the
// scheduler that started the process says, so that one command line serves every task of a
// Slurm job array, every pod of a Kubernetes Indexed Job and every rank of an MPI launcher:
//
//   Slurm job array    SLURM_ARRAY_TASK_ID with SLURM_ARRAY_TASK_COUNT, or with
//                      SLURM_ARRAY_TASK_MIN/MAX (and _STEP): K = (ID - MIN) / STEP
//   Kubernetes         JOB_COMPLETION_INDEX (an Indexed Job), N from --shards N or MC_SHARDS
//   MPI launchers      OMPI_COMM_WORLD_RANK/SIZE (Open MPI), PMI_RANK/PMI_SIZE (MPICH, Intel MPI)
//
// Values that do not make one shard (K >= N, N = 0, text that is not a whole number, a rank
// without a size, two schedulers at once) are bad input: one line, exit 2.
#pragma once

#include "fuzz/shard.h"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace mc::cli {

// The environment variable that gives a Kubernetes Indexed Job's shard count (its completions).
inline constexpr std::string_view kShardCountVariable = "MC_SHARDS";

struct ShardOptions {
  std::string shard;       // --shard K/N; empty: not given
  std::int64_t shards = -1; // --shards N; -1: not given
};

void add_shard_options(CLI::App& cmd, ShardOptions& options);

struct ShardChoice {
  fuzz::Shard shard;  // 0/1 when nothing chose one
  std::string source; // what chose it ("--shard 2/4", "SLURM_ARRAY_TASK_ID=2, ..."); empty: none
};

using EnvironmentLookup = std::function<std::optional<std::string>(const char* name)>;
std::optional<std::string> process_environment(const char* name);

// Throws InputError (one line) for values that make no shard.
ShardChoice choose_shard(const ShardOptions& options,
                         const EnvironmentLookup& environment = process_environment);

// "shard 2/4 (cases 2, 6, 10, ...) from SOURCE", or empty when none was chosen.
std::string shard_line(const ShardChoice& choice);

// `path` with every "{shard}" replaced by the shard's index (0 for the whole campaign), so one
// command line gives each shard its own report, JUnit file or counterexample directory.
std::string with_shard_index(std::string path, const fuzz::Shard& shard);

} // namespace mc::cli
