// The sequential ground truth: per request, the committed token sequence and its hashes.
//
// Built from the steps alone (so a recorded trace can be checked the same way): a new request
// brings its prompt; every scheduled row brings its non-draft tokens (which must agree with
// what is already known: a resumed request recomputes the same tokens); after the step the
// first a tokens of a decode (the a - 1 accepted drafts and the bonus token before them) or
// the whole prefill chunk are committed. state "after p tokens" = stamps of hash(p).
#pragma once

#include "model/stamps.h"
#include "model/step.h"
#include "oracle/engine/listed_rows.h"
#include "oracle/engine/request_records.h"
#include "oracle/engine/structures.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mc::oracle::engine {

struct RequestTruth {
  std::vector<std::int32_t> tokens;     // known: committed + the last sampled token
  std::vector<model::TokenHash> hashes; // hashes[p] = running hash of tokens[0..p)
  std::int32_t num_committed = 0;       // tokens whose state is the ground truth
  std::int32_t num_prompt_tokens = 0;
  std::int32_t num_committed_max = 0; // the most ever committed (a preemption restarts below it)
  // The scheduler's num_tokens: the prompt, or once a token was sampled after the prompt every
  // committed token and that sampled one (known or not). What a resumed request can hit.
  std::int32_t num_tokens() const {
    return num_committed_max >= num_prompt_tokens ? num_committed_max + 1 : num_prompt_tokens;
  }
  // begin_step's note of the request's entry in the step's new or cached requests.
  std::int64_t listed_step = -1;
  std::int32_t listed_computed = 0;
};

class Ledger {
public:
  explicit Ledger(Structures structures);

  // Learns prompts and scheduled tokens; the first contradiction, if any, as a message.
  std::optional<std::string> begin_step(const model::Step& step);
  // Commits accepted tokens and drops finished requests.
  void end_step(const model::Step& step);

  const RequestTruth& truth(const std::string& req_id) const { return requests_.at(req_id); }
  // Null when not known.
  const RequestTruth* find(const std::string& req_id) const { return requests_.find(req_id); }
  // The truth of batch row `batch_row` of `step`, the step begun last (asserted): truth(its
  // id), which the fast structures keep by batch row.
  const RequestTruth& row_truth(const model::Step& step, std::size_t batch_row) const;

private:
  void append(RequestTruth& t, std::int32_t token);
  bool keep_rows_ = true;                 // the fast structures: rows_ is kept
  RequestRecords<RequestTruth> requests_; // stable addresses
  std::int64_t rows_step_ = -1;           // the step begun last, once every row agreed
  std::vector<RequestTruth*> rows_;       // its batch rows' truths
  ListedRows<RequestTruth> listed_;       // its new and cached requests' truths
};

} // namespace mc::oracle::engine
