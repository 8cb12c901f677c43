"""The reference block manager and its worker protocol (mambacheck_adapter.block_manager):
exact tables, free-queue order, retirement with and without the #55450 variant, the hit rules
and the answers of the protocol."""

import io
import json
import unittest

from mambacheck_adapter import block_manager, reference_manager as rm


def setup(**extra):
    s = {"block_size": 4, "attention_block_size": 4, "num_spec_blocks": 0, "mamba_groups": 1,
         "num_blocks": 64}
    s.update(extra)
    return s


def req(m, req_id, tokens, num_computed=0, num_in_flight=0):
    return m.request({"id": req_id, "tokens": tokens, "num_tokens": len(m.requests[req_id].tokens)
                      + len(tokens) if req_id in m.requests else len(tokens),
                      "num_computed": num_computed, "num_in_flight": num_in_flight})


class PoolTest(unittest.TestCase):
    def test_free_queue_order(self):
        pool = rm.Pool(6)
        self.assertEqual(pool.take(3), [1, 2, 3])
        pool.register(2, ("g", 7))
        pool.release([3, 2, 1])  # 3 and 1 unhashed: head, in that order; 2 hashed: tail
        self.assertEqual(list(pool.free), [3, 1, 4, 5, 2])
        self.assertEqual(pool.lookup(("g", 7)), 2)
        self.assertEqual(pool.take(5), [3, 1, 4, 5, 2])
        self.assertIsNone(pool.lookup(("g", 7)))  # taken: evicted

    def test_deferred_frees_hide_only_what_they_give_back(self):
        pool = rm.Pool(4)
        pool.take(1)
        pool.touch([1])  # two holders
        pool.register(1, ("g", 3))
        pool.pending.update([1])  # one holder's free deferred: the other still holds it
        self.assertEqual(pool.lookup(("g", 3)), 1)
        pool.pending.update([1])  # both: it goes back to the pool once the step reported
        self.assertIsNone(pool.lookup(("g", 3)))

    def test_double_free_raises(self):
        pool = rm.Pool(4)
        pool.take(1)
        pool.release([1])
        with self.assertRaises(rm.ManagerError):
            pool.release([1])


class RetirementTest(unittest.TestCase):
    def grow(self, variants):
        m = rm.ReferenceManager(setup(attention_groups=0), variants)
        r = req(m, "a", list(range(20)))
        # A first chunk of 8 tokens, then decodes to 9, 12 and 13 tokens.
        self.assertEqual(m.allocate_slots(r, 8, 0, 0), ([[0, 1]], []))
        counts = [(8, 1), (9, 3), (12, 1)]
        for computed, n in counts:
            r = req(m, "a", [], num_computed=computed)
            m.allocate_slots(r, n, 0, 0)
        return m

    def test_clean_frees_every_stale_state(self):
        m = self.grow(())
        # 13 tokens: running column 3; states below cdiv(12, 4) - 1 = 2 are freed.
        # Block 1 (column 1) was registered, so it waits at the queue's tail: 3 comes first.
        self.assertEqual(m.tables("a")[0], [[0, 0, 2, 3]])

    def test_null_gap_variant_keeps_the_state_beyond_the_gap(self):
        def run(variants):
            m = rm.ReferenceManager(setup(attention_groups=0), variants)
            # (computed, in flight, new): async growths overwrite the remembered state before
            # the older ones are stale, leaving states at columns 0 and 2 with a null between.
            for computed, in_flight, n in ((0, 0, 4), (4, 0, 8), (12, 8, 8), (20, 8, 8),
                                           (28, 0, 4)):
                r = req(m, "a", list(range(40)) if computed == 0 else [], computed, in_flight)
                self.assertIsNotNone(m.allocate_slots(r, n, 0, 0))
            return m.tables("a")[0][0]
        self.assertEqual(run(("null_gap_retirement",))[:6], [1, 0, 2, 0, 0, 0])
        self.assertEqual(run(())[:6], [0, 0, 0, 0, 0, 0])


class HitTest(unittest.TestCase):
    def test_hit_needs_attention_and_mamba_and_the_last_token_is_computed(self):
        m = rm.ReferenceManager(setup())
        m.allocate_slots(req(m, "a", list(range(12))), 8, 0, 0)  # Mamba column 1: 8 tokens
        m.new_step_starts()
        self.assertEqual(m.get_computed_blocks(req(m, "b", list(range(9)) + [99])), 8)
        self.assertEqual(m.get_computed_blocks(req(m, "c", list(range(8)) + [5])), 8)
        # 8 tokens: the last is computed, 7 are cacheable; the 4-token boundary is not cached.
        self.assertEqual(m.get_computed_blocks(req(m, "d", list(range(8)))), 0)

    def test_same_step_guard_and_its_variant(self):
        for variants, expect_none in (((), True), (("published_before_written",), False)):
            m = rm.ReferenceManager(setup(), variants)
            m.new_step_starts()
            m.allocate_slots(req(m, "a", list(range(12))), 8, 0, 0)
            b = req(m, "b", list(range(9)) + [7])
            hit = m.get_computed_blocks(b)
            self.assertEqual(hit, 8)
            self.assertEqual(m.allocate_slots(b, 2, hit, 0) is None, expect_none, variants)

    def test_short_hit_variant_at_an_exact_boundary(self):
        for variants, expected in (((), 8), (("hit_short_at_boundary",), 0)):
            m = rm.ReferenceManager(setup(), variants)
            m.allocate_slots(req(m, "a", list(range(12))), 8, 0, 0)
            m.new_step_starts()
            self.assertEqual(m.get_computed_blocks(req(m, "b", list(range(9)))), expected)


class PartialHashHitTest(unittest.TestCase):
    """hash_block_size 2 under blocks of 4: a prompt of 11 tokens caches its partial tail after
    10 tokens; a hit on it is copied on write, and so is the producer's own block."""

    def setUp(self):
        self.m = rm.ReferenceManager(setup(hash_block_size=2))
        self.m.new_step_starts()
        a = req(self.m, "a", list(range(11)))
        # The chunk ends on the tail: attention blocks 1 2 3, the Mamba running block 4.
        self.assertEqual(self.m.allocate_slots(a, 10, 0, 0), ([[0, 0, 4]], [[1, 2, 3]]))
        self.assertEqual(self.m.take_copies(), [])

    def test_a_hit_on_the_tail_copies_the_shared_blocks(self):
        m = self.m
        m.new_step_starts()
        b = req(m, "b", list(range(10)) + [77, 78])
        self.assertEqual(m.get_computed_blocks(b), 10)
        self.assertEqual(m.allocate_slots(b, 2, 10, 0), ([[]], [[]]))  # the hit fills both
        self.assertEqual(m.tables("b"), ([[0, 0, 6]], [[1, 2, 5]]))
        # The attention copy (3 -> 5) is the runner's alone; the Mamba copy is said.
        self.assertEqual(m.take_copies(), [[0, 4, 6]])
        self.assertEqual(m.pool_state()["refs"], {"1": 2, "2": 2, "3": 1, "4": 1, "5": 1, "6": 1})

    def test_the_producer_moves_its_entry_to_a_copy_and_runs_on_in_place(self):
        m = self.m
        m.new_step_starts()
        a = req(m, "a", [], num_computed=10)
        self.assertEqual(m.allocate_slots(a, 1, 0, 0), ([[]], [[]]))
        self.assertEqual(m.tables("a"), ([[0, 0, 4]], [[1, 2, 3]]))
        self.assertEqual(m.take_copies(), [[0, 4, 5]])
        m.new_step_starts()
        c = req(m, "c", list(range(10)) + [55, 56, 57])
        self.assertEqual(m.get_computed_blocks(c), 10)
        self.assertEqual(m.hits["c"][2], [5])  # the copy holds the entry now

    def test_a_hit_waits_for_a_copy_made_this_step(self):
        m = self.m
        m.new_step_starts()
        m.allocate_slots(req(m, "a", [], num_computed=10), 1, 0, 0)
        c = req(m, "c", list(range(10)) + [55])
        self.assertEqual(m.get_computed_blocks(c), 10)
        self.assertIsNone(m.allocate_slots(c, 1, 10, 0))

    def test_deferred_frees_keep_the_copy_ends_until_the_step_reported(self):
        m = rm.ReferenceManager(setup(hash_block_size=2, defer_block_free=True))
        m.new_step_starts()
        m.allocate_slots(req(m, "a", list(range(11))), 10, 0, 0)
        m.new_step_starts()
        m.allocate_slots(req(m, "a", [], num_computed=10), 1, 0, 0)
        self.assertEqual(m.take_copies(), [[0, 4, 5]])
        m.output_processed()  # the first step's
        self.assertEqual(m.pool.ref[5], 1)
        m.output_processed()  # the step that ran the copy
        self.assertEqual((m.pool.ref[4], m.pool.ref[5]), (1, 0))

    def test_the_split_stops_at_the_tail(self):
        m = self.m
        d = req(m, "d", list(range(100, 119)))  # 19 tokens: tail 18, past the boundary 16
        self.assertEqual(m.aligned_split(d, 19, 0), 16)
        d = req(m, "d", [], num_computed=16)
        self.assertEqual(m.aligned_split(d, 3, 0), 2)


class SplitTest(unittest.TestCase):
    """The aligned split: B = 4, a budget of 64 tokens."""

    def split(self, prompt_len, num_computed, num_new, variants=(), eagle=False, hit=0):
        m = rm.ReferenceManager(setup(eagle=eagle, max_num_scheduled_tokens=64), variants)
        r = m.request({"id": "a", "tokens": list(range(prompt_len)), "num_tokens": prompt_len,
                       "num_prompt": prompt_len, "num_computed": num_computed})
        return m.aligned_split(r, num_new, hit)

    def test_a_chunk_short_of_the_prefill_end_ends_on_a_boundary(self):
        self.assertEqual(self.split(30, 0, 10), 8)
        self.assertEqual(self.split(30, 8, 21), 20)  # 29 floored to 28
        self.assertEqual(self.split(30, 8, 22), 20)  # the last boundary, 28, is cacheable: stop
        self.assertEqual(self.split(30, 28, 2), 2)   # the prompt's last chunk: as asked
        self.assertEqual(self.split(30, 4, 10, hit=4), 8)  # an admitted request from its hit

    def test_a_chunk_starting_mid_block_stops_at_the_next_boundary(self):
        self.assertEqual(self.split(30, 6, 20), 2)

    def test_eagle_backs_the_last_cacheable_boundary_off_by_a_block(self):
        # 30 tokens: last cacheable 28, with EAGLE 24; every end short of 29 stays aligned.
        self.assertEqual(self.split(30, 0, 27, eagle=True), 24)
        self.assertEqual(self.split(30, 24, 5, eagle=True), 4)
        self.assertEqual(self.split(30, 24, 6, eagle=True), 6)

    def test_the_unaligned_variant_ends_mid_block_past_the_backed_off_boundary(self):
        # vLLM #43559: from 24 (the backed-off boundary) a 3-token chunk ends at 27, mid-block,
        # where the fixed split waits for a budget that reaches 28; from 27 the next chunk runs
        # across 28 to the end, where the fixed one stops at 28. Below 24 both align.
        variant = ("eagle_split_unaligned",)
        self.assertEqual(self.split(30, 24, 3, eagle=True), 0)
        self.assertEqual(self.split(30, 24, 3, variant, eagle=True), 3)
        self.assertEqual(self.split(30, 27, 3, eagle=True), 1)
        self.assertEqual(self.split(30, 27, 3, variant, eagle=True), 3)
        self.assertEqual(self.split(30, 0, 27, variant, eagle=True), 24)
        self.assertEqual(self.split(30, 0, 10, variant, eagle=True), 8)
        # A prompt under two blocks: EAGLE backs the last cacheable boundary off to 0.
        self.assertEqual(self.split(7, 0, 3, variant, eagle=True), 3)
        self.assertEqual(self.split(7, 3, 4, variant, eagle=True), 4)
        self.assertEqual(self.split(7, 3, 4, eagle=True), 1)
        self.assertEqual(self.split(30, 24, 3, variant), 0)  # without EAGLE: no effect there

    def test_the_shared_prefix_junction_is_a_stop(self):
        # "a" caches attention blocks up to 16 and its Mamba state at 8 only: a request sharing
        # 17 tokens hits 8, and its chunk stops at the junction, 16, so that state is cached.
        m = rm.ReferenceManager(setup(max_num_scheduled_tokens=64))
        a = req(m, "a", list(range(20)))
        m.allocate_slots(a, 8, 0, 0)
        m.allocate_slots(req(m, "a", [], num_computed=8), 8, 0, 0)
        m.pool._evict(m.mamba[0].tables["a"][3])  # the state at 16 evicted, the KV kept
        m.new_step_starts()
        b = m.request({"id": "b", "tokens": list(range(17)) + [99] * 13, "num_tokens": 30,
                       "num_prompt": 30, "num_computed": 0})
        hit = m.get_computed_blocks(b)
        self.assertEqual((hit, b.shared_prefix_boundary), (8, 16))
        self.assertEqual(m.aligned_split(b, 22, hit), 8)


class ProtocolTest(unittest.TestCase):
    def serve(self, lines, variant=""):
        args = block_manager.parse_args(["--variant", variant] if variant else [])
        out = io.StringIO()
        block_manager.serve(io.StringIO("\n".join(json.dumps(l) for l in lines) + "\n"), out,
                            block_manager.Session(block_manager.make_factory(args)))
        return [l if l.startswith("error:") else json.loads(l)
                for l in out.getvalue().splitlines()]

    def test_a_run(self):
        r = {"id": "a", "tokens": list(range(5)), "num_tokens": 5, "num_computed": 0}
        answers = self.serve([setup(op="setup"), {"op": "step"}, {"op": "hit", "req": r},
                              {"op": "allocate", "req": dict(r, tokens=[]), "num_new": 5},
                              {"op": "free", "id": "a"}, {"op": "reset"}])
        self.assertEqual(answers[0]["contract"], {"registration": "at_schedule", "eagle": False,
                                                  "attention_groups": 1, "shared_pool": True,
                                                  "unordered_writer": False, "hash_block_size": 0})
        self.assertEqual(answers[2], {"tokens": 0})
        self.assertEqual(answers[3], {"ok": True, "new": [[0, 3]], "attention_new": [[1, 2]],
                                      "held": [[0, 3]], "attention_held": [[1, 2]]})
        self.assertEqual(answers[4], {})
        self.assertEqual(answers[5], {"ok": True})

    def test_errors_are_answers(self):
        answers = self.serve([{"op": "step"}, setup(op="setup"), {"op": "nonsense"}])
        self.assertTrue(answers[0].startswith("error: ManagerError"), answers[0])
        self.assertTrue(answers[2].startswith("error: ManagerError: unknown op"), answers[2])


if __name__ == "__main__":
    unittest.main()
