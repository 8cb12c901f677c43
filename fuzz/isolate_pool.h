// Several forked children at once (fuzz/isolate.h), for a campaign that runs `--jobs N` cases
// in parallel: children are started in case order, at most `jobs` run at a time, and their
// outcomes are taken in the order they were started, whatever order they finish in. What a
// case gives does not depend on what runs beside it, so a campaign that takes the outcomes in
// case order reports the same for any number of jobs.
#pragma once

#include "fuzz/isolate.h"

#include <cstdint>
#include <deque>
#include <memory>

namespace mc::fuzz {

class IsolatedPool {
public:
  explicit IsolatedPool(int jobs);

  int jobs() const { return jobs_; }
  // Another child may start: fewer than `jobs` are running, and not too many finished ones
  // wait behind an older one still running.
  bool has_room();
  // No child left whose outcome has not been taken.
  bool empty() const { return children_.empty(); }
  // Forks a child running `work` (throws std::system_error when it cannot).
  void start(const IsolatedWork& work, const IsolateOptions& options);
  // The oldest child not yet taken is done.
  bool oldest_done();
  // Waits until a running child is done, reading what every child writes meanwhile.
  void wait();
  // Waits until every child is done (before the campaign forks children of its own elsewhere).
  void settle();
  // The oldest child's outcome; waits for it.
  IsolatedOutcome take_oldest();
  // Kills and reaps every child not taken yet; their outcomes are dropped.
  void clear() { children_.clear(); }

private:
  std::int64_t running();

  int jobs_;
  std::deque<std::unique_ptr<IsolatedChild>> children_; // oldest first
};

} // namespace mc::fuzz
