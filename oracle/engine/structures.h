// Which implementation of the engine oracle's speed structures a run uses.
//
// Every structure the oracle keeps only for speed has two implementations behind one interface:
// a plain one, written like the spec (a map lookup by request id, a linear search, a full walk),
// and the fast one the oracle runs by default. They must give the same results, exactly:
// - the prefix-cache index of a pool (boundary_index.h) and its free queue (free_queue.h);
// - records found through a request's dense key (request_records.h) and batch rows found
//   through the step's new and cached lists (listed_rows.h);
// - the block manager's settled prefix of a table, where registering cached blocks starts;
// - the scheduler's batch rows kept from schedule() to update(), the ledger's and the runner's
//   records kept by batch row;
// - the invariant checker's search of a table (the access's own column first, a whole-row
//   compare before the search) and its visit of new registrations only (cached_selection.h).
// Unit tests drive each pair with the same operations; `--reference` (run, bench --engine)
// runs a whole workload on the plain ones, which must give the same counters and traces.
#pragma once

#include <cstdint>

namespace mc::oracle::engine {

enum class Structures : std::uint8_t { fast, reference };

} // namespace mc::oracle::engine
