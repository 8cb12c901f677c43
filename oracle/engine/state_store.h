// Where the engine oracle keeps the states of its pool, and what it can say of them.
//
// Two implementations, which agree on every check, text and byte (tests drive both through
// the same steps):
// - byte states (`--reference`): the arenas' bytes themselves. A write stamps every natural
//   byte of the block, a check reads them all back (state_io.h): a step costs the bytes of the
//   states it touches, hundreds of megabytes at a production preset's full depth.
// - meaning states (the default): per block and state tensor, what it holds: a temporal
//   state's token hash, and per conv row (SD) or column (DS) the (token, position) it stamps,
//   a row with no token (0), or the poison a row or state was copied from. A write or a check
//   costs O(rows) whatever the state's size; bytes are made only where the backend's are
//   compared (read()) or where a check fails: the failing block is made into a scratch arena
//   and checked there by the byte check itself, so the finding's text is the reference's.
// A small pool (up to byte_mirror_bytes_max(), 64 MiB: every fuzz case at the default sizes, the
// tiny presets) also keeps a byte mirror beside its meanings, written as the byte states are:
// such a pool is compared whole after every step, and a memcmp against a mirror is cheaper than
// making every stamp again each step. Its checks still read the meanings.
// Bytes the oracle never writes (the page padding past a state's natural bytes, the gaps of an
// arena) hold the arena's poison (model/arena.h) in both.
#pragma once

#include "model/arena.h"
#include "model/block_copy.h"
#include "model/expected_bytes.h"
#include "model/launch.h"
#include "model/layout.h"
#include "model/stamps.h"
#include "oracle/engine/state_io.h"
#include "oracle/engine/structures.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace mc::oracle::engine {

class StateStore {
public:
  virtual ~StateStore() = default;

  // The checks and writes of state_io.h, on block `block` of state tensor `tensor` (a block
  // of the pool: 1 .. num_blocks - 1, asserted).
  virtual std::optional<std::string> check_temporal(std::int32_t tensor, std::int32_t block,
                                                    model::TokenHash hash,
                                                    std::span<const model::TokenHash> known) = 0;
  virtual void write_temporal(std::int32_t tensor, std::int32_t block, model::TokenHash hash) = 0;
  virtual std::optional<std::string> check_conv(std::int32_t tensor, std::int32_t block,
                                                std::int64_t history, std::int64_t num_tokens,
                                                std::int64_t offset, const TokenWindow& tokens) = 0;
  virtual void write_conv(std::int32_t tensor, std::int32_t block, std::int64_t history,
                          std::int64_t running, const TokenWindow& tokens) = 0;

  // A launch's copy decisions (oracle/copy.h), in order.
  virtual void apply_copies(std::span<const model::CopyDecision> decisions) = 0;
  // A step's block copies (model/block_copy.h).
  virtual void copy_blocks(std::span<const model::BlockCopy> copies) = 0;

  // The bytes of `range` as the oracle holds them, into `out` (range.size_bytes long).
  virtual void read(const model::ArenaRange& range, std::span<std::byte> out) = 0;
  // What `ranges` (each one state's natural bytes) must hold, appended to `out` in order, for a
  // backend that compares where its bytes are (model/expected_bytes.h). false, and `out`
  // unspecified, where this store keeps only bytes or a range is not one state's.
  virtual bool describe(std::span<const model::ArenaRange> ranges, model::ExpectedStates& out) = 0;
  // The same for every byte of the arenas: ranges that cover them, in arena order.
  virtual bool describe_whole(model::ExpectedStates& out) = 0;
  // Whether read() hands out bytes it keeps (the byte states, a mirror) rather than making them:
  // a comparison on the host then compares those; else it asks the backend to compare against
  // describe()'s ranges where its bytes are.
  virtual bool keeps_bytes() const = 0;
  // The whole arenas, for a counterexample's files: the meaning states make them on each call
  // (the pool's size in memory; only after a failure).
  virtual const std::vector<model::Arena>& arenas() = 0;
};

// Pools up to this many bytes keep a byte mirror (64 MiB unless a test set it).
std::int64_t byte_mirror_bytes_max();
// Tests: 0 drives the meanings alone at any size; negative restores the default.
void set_byte_mirror_bytes_max_for_testing(std::int64_t bytes);

// The meaning states for `fast` (with a mirror up to `mirror_bytes_max` bytes of pool), the
// byte states for `reference`.
std::unique_ptr<StateStore>
make_state_store(const model::Layout& layout, Structures structures,
                 std::int64_t mirror_bytes_max = byte_mirror_bytes_max());

} // namespace mc::oracle::engine
