"""Tests of mambacheck_recorder.py (the vLLM recorder) against stand-in scheduler outputs.

vLLM cannot be installed here, so the scheduler outputs are SimpleNamespace objects with the
fields vLLM's SchedulerOutput has (as the seeds show them: scheduled_new_reqs,
scheduled_cached_reqs with req_ids / resumed_req_ids / new_block_ids / num_computed_tokens,
num_scheduled_tokens, scheduled_spec_decode_tokens, preempted_req_ids, finished_req_ids).
With --trace-out PATH the main scenario's trace is left at PATH for the C++ read-back test
(scenarios_recorder_readback), which checks it with TraceReader. Without it they run with the
package's other tests (run_tests.py, pytest).

Exit status: 0 all passed, 1 a failure (unittest's own).
"""

import argparse
import json
import os
import sys
import tempfile
import unittest
from types import SimpleNamespace as NS

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import mambacheck_recorder as rec  # noqa: E402

TRACE_OUT = None  # set from --trace-out

ATTN = [90, 91]  # the attention group's row: the recorder must drop it


def new_req(req_id, prompt, mamba_row, num_computed=0):
    return NS(req_id=req_id, prompt_token_ids=prompt, block_ids=(ATTN, mamba_row),
              num_computed_tokens=num_computed)


def cached(req_ids, num_computed, new_block_ids=None, resumed=()):
    return NS(req_ids=req_ids, resumed_req_ids=set(resumed),
              new_block_ids=new_block_ids or [None] * len(req_ids),
              num_computed_tokens=num_computed)


def output(new=(), cached_reqs=None, counts=None, spec=None, preempted=None, finished=()):
    return NS(scheduled_new_reqs=list(new), scheduled_cached_reqs=cached_reqs or cached([], []),
              num_scheduled_tokens=dict(counts or {}), scheduled_spec_decode_tokens=dict(spec or {}),
              preempted_req_ids=preempted, finished_req_ids=set(finished))


def make_recorder(path):
    return rec.TraceRecorder(
        path,
        config=rec.cache_config(mamba_block_size=4, attn_block_size=2, num_spec_tokens=2),
        layout={"preset": "tiny-mamba2"}, num_mamba_groups=1, mamba_group_indices=[1],
        source={"test": "recorder_test.py"})


def record_main_scenario(path):
    """Five steps: prefix hit, chunked prefill, drafts with every outcome, a preemption, a
    reset with both requests resumed, a finish (and an unknown finished id, dropped)."""
    steps = []
    with make_recorder(path) as r:
        steps.append(r.record(
            output(new=[new_req("a", list(range(1, 10)), [1, 2, 3]),
                        new_req("b", [1, 2, 3, 4, 50, 51], [0, 4, 5, 6], num_computed=4)],
                   counts={"a": 8, "b": 2}),
            {"a": [], "b": [60]}))
        steps.append(r.record(
            output(cached_reqs=cached(["a", "b"], [8, 6], [(ATTN, [7]), None]),
                   counts={"b": 3, "a": 1}, spec={"b": [61, 62]}),
            {"b": [61, 99], "a": [10]}))
        steps.append(r.record(
            output(cached_reqs=cached(["a"], [9]), counts={"a": 3}, spec={"a": [11, 12]},
                   preempted={"b"}),
            rec.sampled_by_request(["a"], [[11, 12, 13]])))
        r.note_reset_prefix_cache()
        steps.append(r.record(
            output(cached_reqs=cached(["b", "a"], [0, 0], [(ATTN, [0, 8, 9, 10]),
                                                           (ATTN, [11, 12, 13])],
                                      resumed={"a", "b"}),
                   counts={"b": 8, "a": 4}),
            {"b": [], "a": []}, batch_order=["a", "b"]))
        steps.append(r.record(
            output(cached_reqs=cached(["b"], [8]), counts={"b": 1}, finished={"a", "never-seen"}),
            {"b": [100]}))
    return steps


class MainScenario(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = TRACE_OUT or os.path.join(self.dir.name, "trace.jsonl")
        self.steps = record_main_scenario(self.path)
        with open(self.path, encoding="utf-8") as f:
            self.lines = [json.loads(line) for line in f]

    def tearDown(self):
        self.dir.cleanup()

    def test_header(self):
        h = self.lines[0]
        self.assertEqual(h["format"], "mambacheck-trace")
        self.assertEqual(h["version"], 1)
        self.assertEqual(h["config"]["num_spec_blocks"], 2)
        self.assertEqual(h["layout"], {"preset": "tiny-mamba2"})
        self.assertEqual(h["source"]["test"], "recorder_test.py")

    def test_one_line_per_step_as_returned(self):
        self.assertEqual(self.lines[1:], self.steps)
        self.assertEqual([s["index"] for s in self.steps], [0, 1, 2, 3, 4])

    def test_new_requests_keep_only_mamba_groups(self):
        new = self.steps[0]["new_requests"]
        self.assertEqual(new[0]["block_ids"], [[1, 2, 3]])
        self.assertEqual(new[1], {"req_id": "b", "prompt_token_ids": [1, 2, 3, 4, 50, 51],
                                  "num_computed_tokens": 4, "block_ids": [[0, 4, 5, 6]]})

    def test_token_ids_follow_prompt_samples_and_drafts(self):
        rows = {r["req_id"]: r for r in self.steps[0]["scheduled"]}
        self.assertEqual(rows["a"]["token_ids"], [1, 2, 3, 4, 5, 6, 7, 8])
        self.assertEqual(rows["b"]["token_ids"], [50, 51])
        s1 = self.steps[1]["scheduled"]
        self.assertEqual([r["req_id"] for r in s1], ["b", "a"])  # num_scheduled_tokens order
        self.assertEqual(s1[0], {"req_id": "b", "num_scheduled_tokens": 3, "num_draft_tokens": 2,
                                 "token_ids": [60, 61, 62], "num_accepted_tokens": 2})
        self.assertEqual(s1[1]["token_ids"], [9])
        self.assertEqual(self.steps[2]["scheduled"][0]["token_ids"], [10, 11, 12])
        self.assertEqual(self.steps[2]["scheduled"][0]["num_accepted_tokens"], 3)

    def test_preemption_reset_resume_finish(self):
        self.assertEqual(self.steps[2]["preempted_req_ids"], ["b"])
        s3 = self.steps[3]
        self.assertTrue(s3["reset_prefix_cache"])
        self.assertEqual([c["resumed"] for c in s3["cached_requests"]], [True, True])
        self.assertEqual(s3["cached_requests"][0]["new_block_ids"], [[0, 8, 9, 10]])
        self.assertEqual([r["req_id"] for r in s3["scheduled"]], ["a", "b"])  # batch_order
        # "b" recomputes its prompt and the tokens it had sampled before the preemption.
        self.assertEqual(s3["scheduled"][1]["token_ids"], [1, 2, 3, 4, 50, 51, 60, 61])
        self.assertEqual(self.steps[4]["finished_req_ids"], ["a"])
        self.assertEqual(self.steps[4]["scheduled"][0]["token_ids"], [99])
        self.assertNotIn("reset_prefix_cache", self.steps[4])


class Errors(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.rec = make_recorder(os.path.join(self.dir.name, "t.jsonl"))
        self.rec.record(output(new=[new_req("a", [1, 2, 3], [1, 2, 3])], counts={"a": 3}),
                        {"a": [4]})

    def tearDown(self):
        self.rec.close()
        self.dir.cleanup()

    def test_async_scheduling_is_refused(self):
        # Scheduled past the known tokens: step 0's sample was never handed over.
        with self.assertRaisesRegex(rec.RecorderError, "async scheduling"):
            self.rec.record(output(cached_reqs=cached(["a"], [4]), counts={"a": 1}), {})

    def test_acceptance_out_of_range(self):
        with self.assertRaisesRegex(rec.RecorderError, "expected 1..3"):
            self.rec.record(output(cached_reqs=cached(["a"], [3]), counts={"a": 3},
                                   spec={"a": [5, 6]}), {"a": [5, 6, 7, 8]})

    def test_unknown_cached_request(self):
        with self.assertRaisesRegex(rec.RecorderError, "never recorded"):
            self.rec.record(output(cached_reqs=cached(["z"], [0]), counts={"z": 1}), {})


class OlderVllm(unittest.TestCase):
    def test_resumed_from_preemption_flags(self):
        with tempfile.TemporaryDirectory() as d:
            r = make_recorder(os.path.join(d, "t.jsonl"))
            r.record(output(new=[new_req("a", [1, 2], [1, 2, 3])], counts={"a": 2}), {"a": [3]})
            old = NS(req_ids=["a"], resumed_from_preemption=[True],
                     new_block_ids=[(ATTN, [4, 5, 6])], num_computed_tokens=[0])
            step = r.record(output(cached_reqs=old, counts={"a": 3}), {"a": [4]})
            r.close()
        self.assertTrue(step["cached_requests"][0]["resumed"])
        self.assertEqual(step["scheduled"][0]["token_ids"], [1, 2, 3])


class DerivedPrompts(unittest.TestCase):
    def test_check_values_of_format_md(self):
        self.assertEqual([rec.derived_token(0, i) for i in range(6)],
                         [19887, 23745, 22222, 4077, 2762, 17242])
        self.assertEqual(rec.derive_prompt(6, 7), [22865, 9024, 28685, 31848, 28392, 10544])
        self.assertEqual(rec.derive_prompt(6, 7, prefix_len=3, suffix_id=9),
                         [22865, 9024, 28685, 3806, 15858, 4317])
        self.assertEqual([rec.derived_token(4294967295, i, 1000) for i in range(4)],
                         [797, 259, 611, 703])


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--trace-out", help="leave the main scenario's trace here")
    args, rest = parser.parse_known_args()
    TRACE_OUT = args.trace_out
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
