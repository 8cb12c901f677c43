#include "oracle/engine/step_probe.h"

#include <utility>

namespace mc::oracle::engine {
namespace {

std::function<void(std::int64_t)>& probe() {
  static std::function<void(std::int64_t)> p;
  return p;
}

} // namespace

void set_step_probe_for_testing(std::function<void(std::int64_t step)> p) {
  probe() = std::move(p);
}

void probe_step(std::int64_t step) {
  if (probe()) probe()(step);
}

} // namespace mc::oracle::engine
