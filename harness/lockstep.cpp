// The lockstep loop and its two oracle sides (lockstep.h).
#include "harness/lockstep.h"

#include "harness/engine_coverage.h"
#include "harness/managed_steps.h"
#include "model/errors.h"
#include "model/interrupt.h"

#include <fmt/format.h>

#include <exception>

namespace mc::harness {
namespace {

// A difference in the destination of one of the step's block copies (partial-hash hits) says
// so: that copy runs before the step's kernels, and may be what the backend got wrong.
void name_block_copy(const model::Step& step, Difference& d) {
  for (const model::BlockCopy& c : step.block_copies)
    if (c.group == d.group && c.dst == d.block) {
      d.text += fmt::format(" (the destination of the step's block copy [{}, {}, {}], run "
                            "before its kernels)",
                            c.group, c.src, c.dst);
      return;
    }
}

} // namespace

ScheduledSteps::ScheduledSteps(oracle::engine::Engine& engine,
                               std::function<void(model::Step&)> edit)
    : engine_(engine), edit_(std::move(edit)) {}

std::optional<OracleStep> ScheduledSteps::next() {
  if (!more_) return std::nullopt;
  const std::int64_t steps_before = engine_.report().steps;
  more_ = engine_.step(edit_);
  if (engine_.report().steps == steps_before) return std::nullopt; // nothing was scheduled
  return OracleStep{.step = engine_.last_step(),
                    .record = engine_.last_record(),
                    .finding = engine_.report().first_finding,
                    .last = !more_};
}

TracedSteps::TracedSteps(scenarios::TraceReader& reader, oracle::engine::Replayer& replayer)
    : reader_(reader), replayer_(replayer) {}

std::int32_t ScheduledSteps::lookahead() const {
  return kv_lookahead(engine_.runner().layout().config, engine_.options());
}

std::int32_t TracedSteps::lookahead() const {
  return replayer_.contract().eagle ? reader_.header().config.num_spec_tokens : 0;
}

std::optional<OracleStep> TracedSteps::next() {
  std::optional<model::Step> step = reader_.next();
  if (!step) return std::nullopt;
  step_ = std::move(*step);
  std::optional<oracle::engine::Finding> finding = replayer_.step(step_);
  return OracleStep{.step = step_, .record = replayer_.last_record(), .finding = finding};
}

LockstepResult run_lockstep(OracleSide& oracle, gpu::engine::EngineRunner& backend,
                            std::int64_t steps_max, const LockstepHooks& hooks) {
  const model::Layout& layout = backend.layout();
  LockstepResult result;
  ArenaComparer arenas(layout, hooks.arena_compare);
  const OracleStates oracle_states{
      .read = [&](const model::ArenaRange& r,
                  std::span<std::byte> out) { oracle.runner().states().read(r, out); },
      .describe =
          [&](std::span<const model::ArenaRange> ranges, model::ExpectedStates& out) {
            oracle::engine::StateStore& states = oracle.runner().states();
            return ranges.empty() ? states.describe_whole(out) : states.describe(ranges, out);
          }};
  BackendArenas backend_arenas{
      .whole = [&]() -> const std::vector<model::Arena>& { return backend.arenas(); },
      .read = [&](std::span<const model::ArenaRange> r) { return backend.read(r); }};
  // The backend compares against the oracle's descriptions where its bytes are on a device, or
  // where the oracle keeps no bytes to compare with (a large pool's meanings alone).
  if (backend.compares_where_bytes_are() || !oracle.runner().states().keeps_bytes())
    backend_arenas.compare = [&](const model::ExpectedStates& e) { return backend.compare(e); };
  const auto stop_at = [&](std::int64_t step, Difference d) {
    d.step = step;
    if (!d.text.starts_with("step ")) d.text = fmt::format("step {}: {}", step, d.text);
    result.failure = std::move(d);
  };
  std::int64_t last_compared = -1;
  EngineCoverageCounter coverage(layout, oracle.lookahead());
  while (steps_max < 0 || result.steps_run < steps_max) {
    if (hooks.stop_on_interrupt && model::interrupted()) {
      result.interrupted = true;
      break;
    }
    if (hooks.before_step) hooks.before_step();
    const std::optional<std::int64_t> aborts_before = oracle.aborts();
    std::optional<OracleStep> o = oracle.next();
    if (!o) break;
    ++result.steps_run;
    if (hooks.on_step) hooks.on_step(*o);
    if (o->finding) {
      result.finding = o->finding;
      result.failure = difference_of_finding(*o->finding);
      break;
    }
    if (hooks.check_step) hooks.check_step(*o);
    const auto failed = [&o](std::string kind, std::string_view what, const std::exception& e) {
      return Difference{.kind = std::move(kind),
                        .step = o->step.index,
                        .text = fmt::format("step {}: {}: {}", o->step.index, what, e.what())};
    };
    gpu::engine::StepRecord record;
    try {
      record = backend.execute(o->step);
    } catch (const gpu::engine::KernelFailure& e) {
      result.failure = failed(e.kind, "the kernels under test failed", e);
      break;
    } catch (const model::DeviceFault& e) {
      if (!hooks.backend_errors_are_findings) throw;
      result.failure = failed("device-fault", "the device faulted", e);
      break;
    } catch (const std::exception& e) {
      if (!hooks.backend_errors_are_findings) throw;
      result.failure = failed("backend-error", "the backend failed", e);
      break;
    }
    std::optional<Difference> d = difference_of_forward(o->step, o->record, record);
    if (!d) d = difference_of_step(layout, o->step, o->record, record);
    if (!d) {
      d = arenas.after_step(oracle_states, backend_arenas, o->record.access.writes, o->step.index);
      if (d) name_block_copy(o->step, *d);
    }
    ++result.steps_compared;
    last_compared = o->step.index;
    if (d) {
      stop_at(o->step.index, std::move(*d));
      break;
    }
    const std::optional<std::int64_t> aborts_after = oracle.aborts();
    coverage.count(o->step, o->record,
                   aborts_after ? std::optional(*aborts_after - aborts_before.value_or(0))
                                : std::nullopt);
    if (hooks.on_held) hooks.on_held(result.steps_run);
    if (o->last) break;
  }
  if (!result.failure && last_compared >= 0)
    if (std::optional<Difference> d = arenas.finish(oracle_states, backend_arenas, last_compared))
      stop_at(last_compared, std::move(*d));
  result.bytes_compared = arenas.bytes_compared();
  result.arenas = arenas.coverage();
  result.coverage = coverage.coverage();
  return result;
}

} // namespace mc::harness
