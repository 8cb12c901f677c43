// One large piece of a step's work spread over the cores: the host executor's forward and the
// host's comparison of a large pool each move hundreds of megabytes a step at production depth
// (nemotron-h-8b: about 180 MB written, read back and compared per step), more than one core
// keeps up with. Callers split the work so that no result depends on which thread runs which
// part: the bytes and every verdict are the same for any number of threads.
#pragma once

#include <cstdint>
#include <functional>

namespace mc::model {

// Threads one piece of work may use. 1 until a command that runs one simulation at a time sets
// it to the cores it may use; a campaign leaves it at 1, its jobs already fill the cores.
inline constexpr std::int64_t kWorkThreadsMax = 256;
std::int64_t work_threads();
// At least 1; more than kWorkThreadsMax counts as kWorkThreadsMax.
void set_work_threads(std::int64_t threads);

// Below this many bytes a piece runs on the calling thread alone: starting a thread costs tens
// of microseconds, the whole step of a small preset.
std::int64_t parallel_bytes_min();
void set_parallel_bytes_min_for_testing(std::int64_t bytes);

// Runs body(part, parts) for every part in [0, parts) and returns when all have: parts is
// work_threads() for at least parallel_bytes_min() bytes of work and else 1; part 0 runs on the
// calling thread, and so does a part whose thread could not be started. If parts throw, the
// lowest part's exception is rethrown here.
void run_parts(std::int64_t work_bytes,
               const std::function<void(std::int64_t part, std::int64_t parts)>& body);

} // namespace mc::model
