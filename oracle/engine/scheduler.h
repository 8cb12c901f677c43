// The scheduler model: requests, token budget, chunked prefill, drafts, acceptance,
// preemption, reset_prefix_cache; one model::Step per call (REFERENCE.md 3).
//
// Per step, as vLLM's scheduler: running requests first (in order), then waiting ones
// (preempted or resumed first). A prefill chunk of a running or resumed request is split at
// block boundaries in align mode; a decode schedules the last sampled token plus 0..num_spec
// drafts, whose outcome (a accepted, 1..1+drafts) is drawn here: the first a-1 drafts equal
// the true continuation, the others differ. When blocks run out the last running request is
// preempted (blocks freed, num_computed back to 0, it resumes later, maybe with a prefix hit).
// reset_prefix_cache force-preempts every running request WITHOUT listing it as preempted
// (it only comes back among the resumed) and empties the cache. update() commits the step:
// computed counts, sampled tokens, cached boundary blocks (only now: never in the step that
// produced them), finished requests.
//
// Async scheduling (options.async_scheduling, REFERENCE.md 3), as vLLM's async scheduler: the
// next step is planned before update() of the step in flight. The planning counts a request
// with a row in flight as if every draft of it were accepted (its computed count plus the
// row's scheduled tokens, and one more sampled token when the row reaches the end of what is
// known), grows its tables and frees its stale block from that optimistic count, and does not
// schedule a request the step in flight may finish. Every block of the in-flight rows' tables
// is marked in flight, so a block freed while planning (a stale block, a preemption, an abort,
// a reset) is held back until update() of the step in flight. Since such frees help nobody in
// this planning, a running request that finds too few free blocks but would have enough once
// they are released waits a step instead of preempting more. A request preempted while its
// row is in flight keeps that row's sampled tokens (the step did compute them) and resumes at
// the earliest in the next planning. finalize() then gives the planned step the true counts and
// token ids, once update() of the step in flight has rolled back its rejected drafts.
#pragma once

#include "model/layout.h"
#include "model/prng.h"
#include "model/step.h"
#include "oracle/engine/block_manager.h"
#include "oracle/engine/kv_manager.h"
#include "oracle/engine/options.h"
#include "oracle/engine/structures.h"
#include "oracle/engine/workload.h"

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace mc::oracle::engine {

enum class RequestStatus : std::uint8_t { future, waiting, running, finished };

struct SchedRequest {
  RequestSpec spec;
  std::vector<model::TokenHash> prefix_hashes; // h(p) of spec.tokens, p in [0, size]
  std::int32_t num_tokens = 0; // prompt + outputs so far (the last sampled token included)
  std::int32_t num_computed = 0;
  RequestStatus status = RequestStatus::future;
  bool started = false; // sent once as a new request
  // A row update() has not committed yet: the row of the step just planned (`planned`), and
  // with async scheduling the row of the step in flight while the next is planned
  // (`in_flight`). `start`: the true computed count it starts from; `stale`: preempted,
  // aborted or reset since, so the row commits its sampled tokens only.
  struct PendingRow {
    std::int64_t step = -1; // -1: none
    std::int32_t start = 0;
    std::int32_t tokens = 0;
    bool stale = false;
  };
  PendingRow planned;
  PendingRow in_flight;
};

struct SchedulerStats {
  std::int64_t steps = 0;
  std::int64_t request_steps = 0;      // scheduled (request, step) pairs
  std::int64_t tokens = 0;             // scheduled tokens, drafts included
  std::int64_t preemptions = 0;        // out of blocks
  std::int64_t forced_preemptions = 0; // by reset_prefix_cache
  std::int64_t resets = 0;
  std::int64_t prefix_hits = 0;
  std::int64_t aborts = 0;
  std::int64_t finished = 0;
};

// A request admitted (new or resumed) by the last schedule() and the longest prefix hit its
// lookup could take at that moment (table_rules.h): blocks taken later in the same step may
// evict cached boundaries, so the invariant needs the value of the lookup's moment.
struct PrefixLookup {
  std::string req_id;
  std::int32_t longest_tokens = 0;
};

class Scheduler {
public:
  Scheduler(const model::Layout& layout, const SchedulerOptions& options,
            std::vector<RequestSpec> requests, std::uint64_t seed, Structures structures);

  // `spent`: a step done with (the engine's last one), whose rows and their vectors are
  // reused for this one's, so that a step costs no allocation per row.
  model::Step schedule(model::Step spent = {});
  void update(const model::Step& step);
  // Async: after update() of the step in flight, the true computed counts (the optimistic ones
  // kept as num_computed_tokens_optimistic) and token ids of `step`, planned last.
  void finalize(model::Step& step);
  // Every call on the KV cache manager goes to `kv` from now on (kv_manager.h), in vLLM's
  // Scheduler's order; its own BlockManager stays empty. `lookahead`: the tokens an EAGLE/MTP
  // drafter adds to each allocation (vLLM's num_lookahead_tokens).
  void use_manager(KvManager& kv, std::int32_t lookahead) {
    kv_ = &kv;
    lookahead_ = lookahead;
  }
  // The next schedule() runs reset_prefix_cache (tests and traces choose the step).
  void request_reset_prefix_cache() { reset_requested_ = true; }
  bool done() const { return num_finished_ == static_cast<std::int64_t>(requests_.size()); }

  const BlockManager& blocks() const { return blocks_; }
  std::span<const PrefixLookup> prefix_lookups() const { return prefix_lookups_; }
  const SchedulerStats& stats() const { return stats_; }
  const SchedRequest& request(const std::string& req_id) const;
  // Rows of conv history a cached block must keep for checks (the largest H of the layout).
  std::int32_t tail_tokens() const { return tail_tokens_; }

private:
  // The counts the planning sees: the committed ones plus a row in flight taken as accepted.
  std::int32_t planned_computed(const SchedRequest& r) const;
  std::int32_t planned_tokens(const SchedRequest& r) const;
  std::int32_t prefill_end(const SchedRequest& r) const;
  bool in_prefill(const SchedRequest& r) const;
  // The prefill chunk r runs now, of the `remaining` tokens it could and `budget` left. A
  // waiting r is being admitted: r.num_computed is the hit just found.
  std::int32_t split_chunk(const SchedRequest& r, std::int32_t remaining,
                           std::int32_t budget) const;
  // The manager's split (KvManager::aligned_split), checked; nullopt: the model splits.
  std::optional<std::int32_t> manager_split(const SchedRequest& r, std::int32_t num_new,
                                            std::int32_t budget) const;
  std::int32_t draw_drafts(const SchedRequest& r, std::int32_t budget);
  std::int32_t placeholder_drafts(const SchedRequest& r, std::int32_t num_new,
                                  std::int32_t budget) const;
  // Appends r's row to step.scheduled; `held`: r's tables (just allocated).
  void make_scheduled(SchedRequest& r, std::int32_t num_new, std::int32_t num_draft,
                      RequestBlocks* held, model::Step& step);
  // Appends a row to `rows`, made of a spent one from `spare` when there is one.
  template <typename Row> static Row& reuse_spare(std::vector<Row>& spare, std::vector<Row>& rows) {
    if (spare.empty()) spare.emplace_back();
    rows.push_back(std::move(spare.back()));
    spare.pop_back();
    return rows.back();
  }
  // With an external manager (use_manager): r as vLLM's Request shows it (`fresh`: admitted
  // now, computed 0), a running request's allocation with preemption until it fits (false:
  // r preempted itself), a waiting request's admission, and r's blocks given back.
  KvRequest kv_request(const SchedRequest& r, bool fresh) const;
  bool allocate_running(std::size_t i, std::int32_t num_new, model::Step& step,
                        model::CachedRequestData& cached);
  bool admit_external(SchedRequest& r, model::Step& step, std::int32_t& budget);
  // An admitted request's first row: its whole tables listed (new, or resumed), its row made.
  void start_running(SchedRequest& r, model::GroupBlockIds table,
                     model::GroupBlockIds attention_table, std::int32_t num_new,
                     RequestBlocks* held, model::Step& step, std::int32_t& budget);
  void release(SchedRequest& r);
  // The row's token ids from the request's true sequence at `computed`, drafts last (the
  // first a - 1 of them true, the others not).
  void fill_tokens(const SchedRequest& r, std::int32_t computed, model::ScheduledRequest& s) const;
  void mark_in_flight();
  void admit_arrivals();
  void maybe_abort(model::Step& step);
  void force_preempt_all(model::Step& step);
  // The last running request back to the front of the waiting queue, counted in `counter`.
  void preempt_last(model::Step& step, std::int64_t& counter);
  void schedule_running(model::Step& step, std::int32_t& budget);
  void schedule_waiting(model::Step& step, std::int32_t& budget);
  bool admit_one(SchedRequest& r, model::Step& step, std::int32_t& budget);
  void finish(SchedRequest& r);

  model::CacheConfig config_;
  SchedulerOptions options_;
  bool keep_rows_ = true; // the fast structures: update() uses the rows schedule() kept
  BlockManager blocks_;
  model::SplitMix64 rng_;
  std::vector<SchedRequest> requests_;
  std::unordered_map<std::string, std::size_t> index_;
  std::size_t next_arrival_ = 0;
  std::deque<std::size_t> waiting_;
  std::vector<std::size_t> running_;
  std::vector<model::RequestId> finished_pending_;
  // The batch rows of a planned step, as request indices, and their tables in the block
  // manager (valid while the request runs: update() skips a row preempted since, and a
  // finished request is freed only after its own row). With the plain structures update()
  // finds both by id instead.
  struct Rows {
    std::int64_t step = -1;
    std::vector<std::size_t> requests;
    std::vector<RequestBlocks*> held;
  };
  Rows planned_;                             // the last schedule()'s
  Rows in_flight_;                           // async: the one before it, not committed yet
  std::vector<PrefixLookup> prefix_lookups_; // the last schedule()'s admissions
  // Rows of spent steps, kept for their vectors' capacity.
  std::vector<model::ScheduledRequest> spare_scheduled_;
  std::vector<model::CachedRequestData> spare_cached_;
  std::int64_t step_ = 0;
  std::int64_t num_finished_ = 0;
  std::int32_t idle_steps_ = 0;
  bool reset_requested_ = false;
  std::int32_t tail_tokens_ = 1;
  KvManager* kv_ = nullptr; // not owned
  std::int32_t lookahead_ = 0;
  KvAllocation allocation_; // the last allocate_slots answer, reused step after step
  SchedulerStats stats_;
};

} // namespace mc::oracle::engine
