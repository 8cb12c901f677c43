#include "cli/shard_option.h"

#include "model/errors.h"

#include <fmt/format.h>

#include <cstdlib>
#include <vector>

namespace mc::cli {
namespace {

// More shards than this is a typo, not a cluster (and keeps K * N arithmetic far from overflow).
inline constexpr std::int64_t kShardCountMax = std::int64_t{1} << 32;

std::optional<std::int64_t> whole_number(std::string_view text) {
  if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != text.npos)
    return std::nullopt;
  return std::strtoll(std::string(text).c_str(), nullptr, 10);
}

// A whole number from the environment, or nothing when the variable is not set.
std::optional<std::int64_t> env_number(const EnvironmentLookup& env, const char* name) {
  const std::optional<std::string> text = env(name);
  if (!text) return std::nullopt;
  const std::optional<std::int64_t> n = whole_number(*text);
  if (!n)
    model::fail_input("{}='{}': expected a whole number (the shard comes from it; give --shard "
                      "K/N to choose one yourself)",
                      name, *text);
  return n;
}

void check_shard(const fuzz::Shard& shard, const std::string& source) {
  if (shard.count == 0) model::fail_input("{}: the shard count N is 0; it must be at least 1", source);
  if (shard.count > kShardCountMax)
    model::fail_input("{}: the shard count N is above {}", source, kShardCountMax);
  if (shard.index >= shard.count)
    model::fail_input("{}: shard {} of {} does not exist (K must be below N: shards are numbered "
                      "0 to N-1)",
                      source, shard.index, shard.count);
}

fuzz::Shard parse_shard(const std::string& text) {
  const std::size_t slash = text.find('/');
  const std::optional<std::int64_t> k =
      slash == std::string::npos ? std::nullopt : whole_number(text.substr(0, slash));
  const std::optional<std::int64_t> n =
      slash == std::string::npos ? std::nullopt : whole_number(text.substr(slash + 1));
  if (!k || !n)
    model::fail_input("--shard: expected K/N, the K-th of N parts (0 <= K < N), got '{}'", text);
  return fuzz::Shard{.index = *k, .count = *n};
}

// A Slurm job array task: K from its task id, N from the task count or the id range.
std::optional<ShardChoice> slurm_array(const EnvironmentLookup& env) {
  const std::optional<std::int64_t> id = env_number(env, "SLURM_ARRAY_TASK_ID");
  if (!id) return std::nullopt;
  const std::optional<std::int64_t> count = env_number(env, "SLURM_ARRAY_TASK_COUNT");
  const std::optional<std::int64_t> min = env_number(env, "SLURM_ARRAY_TASK_MIN");
  const std::optional<std::int64_t> max = env_number(env, "SLURM_ARRAY_TASK_MAX");
  const std::int64_t step = env_number(env, "SLURM_ARRAY_TASK_STEP").value_or(1);
  std::string source = fmt::format("SLURM_ARRAY_TASK_ID={}", *id);
  if (count) source += fmt::format(", SLURM_ARRAY_TASK_COUNT={}", *count);
  if (min) source += fmt::format(", SLURM_ARRAY_TASK_MIN={}", *min);
  if (max) source += fmt::format(", SLURM_ARRAY_TASK_MAX={}", *max);
  if (step != 1) source += fmt::format(", SLURM_ARRAY_TASK_STEP={}", step);
  source += " (a Slurm job array)";
  if (!count && !max)
    model::fail_input("{}: no SLURM_ARRAY_TASK_COUNT or SLURM_ARRAY_TASK_MAX says how many "
                      "shards there are",
                      source);
  if (step == 0) model::fail_input("{}: the array step is 0", source);
  const std::int64_t first = min.value_or(0);
  if (*id < first || (*id - first) % step != 0)
    model::fail_input("{}: the task id is not one of the array's", source);
  std::optional<std::int64_t> n = count;
  if (max) {
    if (*max < first) model::fail_input("{}: the array's MAX is below its MIN", source);
    const std::int64_t from_range = (*max - first) / step + 1;
    // A sparse array (--array=1,4,9) has more ids in its range than tasks: no shard numbering.
    if (n && *n != from_range)
      model::fail_input("{}: the array's {} tasks do not fill its id range (give it as "
                        "--array=0-{})",
                        source, *n, *n - 1);
    n = from_range;
  }
  return ShardChoice{.shard = {.index = (*id - first) / step, .count = *n},
                     .source = std::move(source)};
}

// A pod of a Kubernetes Indexed Job: K from its completion index, N given alongside.
std::optional<ShardChoice> kubernetes_index(const EnvironmentLookup& env,
                                            const ShardOptions& options) {
  const std::optional<std::int64_t> index = env_number(env, "JOB_COMPLETION_INDEX");
  if (!index) return std::nullopt;
  const std::optional<std::int64_t> from_env =
      env_number(env, std::string(kShardCountVariable).c_str());
  std::string source = fmt::format("JOB_COMPLETION_INDEX={}", *index);
  if (options.shards >= 0) source += fmt::format(", --shards {}", options.shards);
  if (from_env) source += fmt::format(", {}={}", kShardCountVariable, *from_env);
  source += " (a Kubernetes Indexed Job)";
  if (options.shards < 0 && !from_env)
    model::fail_input("{}: how many shards? Give --shards N or set {} to the Job's completions",
                      source, kShardCountVariable);
  if (options.shards >= 0 && from_env && options.shards != *from_env)
    model::fail_input("{}: two different shard counts", source);
  return ShardChoice{.shard = {.index = *index, .count = options.shards >= 0 ? options.shards
                                                                            : *from_env},
                     .source = std::move(source)};
}

// A rank of an MPI launch (mpirun, mpiexec, srun --mpi): its rank and the world's size.
std::optional<ShardChoice> mpi_rank(const EnvironmentLookup& env, const char* rank_name,
                                    const char* size_name, const char* launcher) {
  const std::optional<std::int64_t> rank = env_number(env, rank_name);
  if (!rank) return std::nullopt;
  const std::optional<std::int64_t> size = env_number(env, size_name);
  std::string source = fmt::format("{}={}", rank_name, *rank);
  if (size) source += fmt::format(", {}={}", size_name, *size);
  source += fmt::format(" ({})", launcher);
  if (!size) model::fail_input("{}: {} is not set", source, size_name);
  return ShardChoice{.shard = {.index = *rank, .count = *size}, .source = std::move(source)};
}

std::optional<ShardChoice> mpi_launch(const EnvironmentLookup& env) {
  std::optional<ShardChoice> open_mpi =
      mpi_rank(env, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "Open MPI");
  std::optional<ShardChoice> pmi = mpi_rank(env, "PMI_RANK", "PMI_SIZE", "an MPI launcher");
  // One launcher may set both; they must then agree.
  if (open_mpi && pmi && (open_mpi->shard.index != pmi->shard.index ||
                          open_mpi->shard.count != pmi->shard.count))
    model::fail_input("{} and {} disagree", open_mpi->source, pmi->source);
  return open_mpi ? open_mpi : pmi;
}

} // namespace

void add_shard_options(CLI::App& cmd, ShardOptions& options) {
  cmd.add_option("--shard", options.shard,
                 "Run the K-th of N disjoint parts of the campaign, K/N with 0 <= K < N (case i "
                 "goes to shard i % N). Default: from a Slurm job array, a Kubernetes Indexed "
                 "Job or an MPI launcher when present; merge the reports with mambacheck merge");
  cmd.add_option("--shards", options.shards,
                 "The number of shards N when the index comes from JOB_COMPLETION_INDEX (a "
                 "Kubernetes Indexed Job); or set MC_SHARDS");
}

std::optional<std::string> process_environment(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

ShardChoice choose_shard(const ShardOptions& options, const EnvironmentLookup& environment) {
  if (!options.shard.empty()) {
    ShardChoice choice{.shard = parse_shard(options.shard),
                       .source = fmt::format("--shard {}", options.shard)};
    check_shard(choice.shard, choice.source);
    if (options.shards >= 0 && options.shards != choice.shard.count)
      model::fail_input("--shard {} and --shards {}: two different shard counts", options.shard,
                        options.shards);
    return choice;
  }
  std::vector<ShardChoice> found;
  for (std::optional<ShardChoice> choice :
       {slurm_array(environment), kubernetes_index(environment, options), mpi_launch(environment)})
    if (choice) found.push_back(std::move(*choice));
  if (found.size() > 1)
    model::fail_input("two schedulers give a shard, {} and {}: give --shard K/N", found[0].source,
                      found[1].source);
  if (found.empty()) {
    if (options.shards >= 0)
      model::fail_input("--shards {}: no JOB_COMPLETION_INDEX (a Kubernetes Indexed Job) gives "
                        "the index; give --shard K/N",
                        options.shards);
    return {};
  }
  ShardChoice& choice = found.front();
  if (options.shards >= 0 && options.shards != choice.shard.count)
    model::fail_input("{}: --shards {} gives another shard count", choice.source, options.shards);
  check_shard(choice.shard, choice.source);
  return std::move(choice);
}

std::string shard_line(const ShardChoice& choice) {
  if (choice.source.empty()) return {};
  const fuzz::Shard& s = choice.shard;
  const std::string cases =
      s.whole() ? "every case"
                : fmt::format("cases {}, {}, {}, ...", s.index, s.index + s.count,
                              s.index + 2 * s.count);
  return fmt::format("shard {}/{} ({}) from {}", s.index, s.count, cases, choice.source);
}

std::string with_shard_index(std::string path, const fuzz::Shard& shard) {
  static constexpr std::string_view kPlaceholder = "{shard}";
  const std::string index = std::to_string(shard.index);
  for (std::size_t at = path.find(kPlaceholder); at != std::string::npos;
       at = path.find(kPlaceholder, at + index.size()))
    path.replace(at, kPlaceholder.size(), index);
  return path;
}

} // namespace mc::cli
