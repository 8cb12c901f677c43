#include "fuzz/isolate_pool.h"

#include "model/errors.h"

#include <vector>

namespace mc::fuzz {
namespace {

// Finished children kept waiting behind a slow older one, per job: enough that a big case does
// not idle the other jobs for long, few enough to bound the payloads held.
constexpr std::int64_t kWaitingPerJobMax = 8;

} // namespace

IsolatedPool::IsolatedPool(int jobs) : jobs_(jobs) { MC_ASSERT(jobs >= 1); }

std::int64_t IsolatedPool::running() {
  std::int64_t n = 0;
  for (const std::unique_ptr<IsolatedChild>& child : children_)
    n += child->done() ? 0 : 1;
  return n;
}

bool IsolatedPool::has_room() {
  return static_cast<std::int64_t>(children_.size()) < kWaitingPerJobMax * jobs_ &&
         running() < jobs_;
}

void IsolatedPool::start(const IsolatedWork& work, const IsolateOptions& options) {
  MC_ASSERT(has_room());
  children_.push_back(std::make_unique<IsolatedChild>(work, options));
}

bool IsolatedPool::oldest_done() { return !children_.empty() && children_.front()->done(); }

void IsolatedPool::wait() {
  std::vector<IsolatedChild*> running;
  for (const std::unique_ptr<IsolatedChild>& child : children_)
    if (!child->done()) running.push_back(child.get());
  if (!running.empty()) wait_for_any(running);
}

void IsolatedPool::settle() {
  while (running() > 0)
    wait();
}

IsolatedOutcome IsolatedPool::take_oldest() {
  MC_ASSERT(!children_.empty());
  while (!oldest_done())
    wait();
  IsolatedOutcome out = children_.front()->outcome();
  children_.pop_front();
  return out;
}

} // namespace mc::fuzz
