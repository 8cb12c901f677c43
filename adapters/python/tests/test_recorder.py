"""Tests of mambacheck_recorder.py (the vLLM recorder) against stand-in scheduler outputs.

vLLM cannot be installed here, so the scheduler outputs are SimpleNamespace objects with the
fields vLLM's SchedulerOutput has (as the seeds show them: scheduled_new_reqs,
scheduled_cached_reqs with req_ids / resumed_req_ids / new_block_ids / num_computed_tokens,
num_scheduled_tokens, scheduled_spec_decode_tokens, preempted_req_ids, finished_req_ids).
With --trace-out PATH the main scenario's trace is left at PATH for the C++ read-back test
(scenarios_recorder_readback), which checks it with TraceReader. Without it they run with the
package's other tests (run_tests.py, pytest).

Async scheduling: a small run by hand (exact fields), and a round trip. With --async-source
SRC (a trace `mambacheck run --async --record` wrote) every step of SRC is turned into what
vLLM's async scheduler and runner would have handed over for it (optimistic
num_computed_tokens, -1 placeholder drafts, the sampled tokens), recorded, and the recorded
trace must equal SRC but for the values of rejected drafts past the first (which never reach
vLLM's scheduler). --async-trace-out PATH leaves it for scenarios_recorder_async_replay, which
replays it and tampered copies of it.

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
ASYNC_SOURCE = None  # set from --async-source
ASYNC_TRACE_OUT = None  # set from --async-trace-out
PARTIAL_SOURCE = None  # set from --partial-source
PARTIAL_TRACE_OUT = None  # set from --partial-trace-out
PARTIAL_SYNC_SOURCE = None  # set from --partial-sync-source
PARTIAL_SYNC_TRACE_OUT = None  # set from --partial-sync-trace-out

ATTN = [90, 91]  # the attention group's row: the recorder must drop it


def new_req(req_id, prompt, mamba_row, num_computed=0):
    return NS(req_id=req_id, prompt_token_ids=prompt, block_ids=(ATTN, mamba_row),
              num_computed_tokens=num_computed)


def cached(req_ids, num_computed, new_block_ids=None, resumed=()):
    return NS(req_ids=req_ids, resumed_req_ids=set(resumed),
              new_block_ids=new_block_ids or [None] * len(req_ids),
              num_computed_tokens=num_computed)


def output(new=(), cached_reqs=None, counts=None, spec=None, preempted=None, finished=(),
           copies=()):
    return NS(scheduled_new_reqs=list(new), scheduled_cached_reqs=cached_reqs or cached([], []),
              num_scheduled_tokens=dict(counts or {}), scheduled_spec_decode_tokens=dict(spec or {}),
              preempted_req_ids=preempted, finished_req_ids=set(finished),
              kv_cache_block_copies=[NS(src_block_id=s, dst_block_id=d) for s, d in copies])


def make_recorder(path, async_scheduling=False):
    return rec.TraceRecorder(
        path,
        config=rec.cache_config(mamba_block_size=4, attn_block_size=2, num_spec_tokens=2),
        layout={"preset": "tiny-mamba2"}, num_mamba_groups=1, mamba_group_indices=[1],
        source={"test": "recorder_test.py"}, async_scheduling=async_scheduling)


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
        self.assertEqual(h["version"], 4)
        self.assertEqual(h["scheduler"], {"cache_registration": "at_schedule"})
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

    def test_a_row_past_the_known_tokens(self):
        # Scheduled past the known tokens: a step recorded before the one it followed.
        with self.assertRaisesRegex(rec.RecorderError, "up to position 5 .* only 4 are known"):
            self.rec.record(output(cached_reqs=cached(["a"], [4]), counts={"a": 1}), {})

    def test_acceptance_out_of_range(self):
        with self.assertRaisesRegex(rec.RecorderError, "expected 1..3"):
            self.rec.record(output(cached_reqs=cached(["a"], [3]), counts={"a": 3},
                                   spec={"a": [5, 6]}), {"a": [5, 6, 7, 8]})

    def test_unknown_cached_request(self):
        with self.assertRaisesRegex(rec.RecorderError, "never recorded"):
            self.rec.record(output(cached_reqs=cached(["z"], [0]), counts={"z": 1}), {})


class AsyncByHand(unittest.TestCase):
    """vLLM's AsyncScheduler: step 2 is planned while step 1 runs, so its num_computed_tokens
    counts step 1's two drafts as accepted (12), and its drafts are -1 placeholders; step 1
    accepted one of two drafts, so the runner starts from 11."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "async.jsonl")
        with make_recorder(self.path, async_scheduling=True) as r:
            self.steps = [
                r.record(output(new=[new_req("a", list(range(1, 9)), [1, 2, 3])],
                                counts={"a": 8}), {"a": [9]}),
                r.record(output(cached_reqs=cached(["a"], [8], [(ATTN, [4])]), counts={"a": 3},
                                spec={"a": [-1, -1]}), {"a": [10, 11]}),
                r.record(output(cached_reqs=cached(["a"], [11]), counts={"a": 3},
                                spec={"a": [-1, -1]}), {"a": [12]}),
                r.record(output(cached_reqs=cached(["a"], [13], [(ATTN, [5])]),
                                counts={"a": 3}, spec={"a": [-1, -1]}), {"a": [13, 14, 15]}),
            ]
        with open(self.path, encoding="utf-8") as f:
            self.lines = [json.loads(line) for line in f]

    def tearDown(self):
        self.dir.cleanup()

    def test_header(self):
        self.assertEqual(self.lines[0]["version"], 4)
        self.assertTrue(self.lines[0]["async_scheduling"])
        self.assertEqual(self.lines[0]["scheduler"], {"cache_registration": "at_schedule"})
        self.assertEqual(self.lines[0]["source"]["recorder"], "mambacheck_recorder 4")
        self.assertEqual(self.lines[1:], self.steps)

    def test_planned_during_the_step_before(self):
        self.assertNotIn("planned_during", self.steps[0])
        self.assertEqual([s.get("planned_during") for s in self.steps[1:]], [0, 1, 2])

    def test_true_and_optimistic_counts(self):
        # Step 0 was a prefill: nothing rolled back. Step 1 scheduled 3 from 8 and accepted
        # 1 draft of 2 (2 tokens sampled): vLLM planned step 2 from 11, the runner starts at 10.
        self.assertEqual(self.steps[1]["cached_requests"][0],
                         {"req_id": "a", "new_block_ids": [[4]], "num_computed_tokens": 8})
        self.assertEqual(self.steps[2]["cached_requests"][0],
                         {"req_id": "a", "num_computed_tokens": 10,
                          "num_computed_tokens_optimistic": 11})
        # Step 2 accepted no draft: planned from 10 + 3 = 13, true 11.
        self.assertEqual(self.steps[3]["cached_requests"][0],
                         {"req_id": "a", "new_block_ids": [[5]], "num_computed_tokens": 11,
                          "num_computed_tokens_optimistic": 13})

    def test_placeholders_filled_from_the_samples(self):
        # Accepted drafts are the tokens sampled in their place; a rejected one a stand-in that
        # differs from the token sampled there (bonus + 1).
        self.assertEqual(self.steps[1]["scheduled"][0],
                         {"req_id": "a", "num_scheduled_tokens": 3, "num_draft_tokens": 2,
                          "token_ids": [9, 10, 12], "num_accepted_tokens": 2})
        self.assertEqual(self.steps[2]["scheduled"][0]["token_ids"], [11, 13, 13])
        self.assertEqual(self.steps[3]["scheduled"][0]["token_ids"], [12, 13, 14])
        self.assertEqual(self.steps[3]["scheduled"][0]["num_accepted_tokens"], 3)


class AsyncErrors(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.rec = make_recorder(os.path.join(self.dir.name, "t.jsonl"), async_scheduling=True)
        self.rec.record(output(new=[new_req("a", [1, 2, 3], [1, 2, 3])], counts={"a": 3}),
                        {"a": [4]})
        self.rec.record(output(cached_reqs=cached(["a"], [3]), counts={"a": 3},
                               spec={"a": [-1, -1]}), {"a": [5]})

    def tearDown(self):
        self.rec.close()
        self.dir.cleanup()

    def test_a_count_that_ignores_the_step_in_flight(self):
        # Step 1 scheduled 3 from 3: a step planned during it counts from 6, not 4.
        with self.assertRaisesRegex(rec.RecorderError, "counts its row there as computed: 6"):
            self.rec.record(output(cached_reqs=cached(["a"], [4]), counts={"a": 1}), {})

    def test_planned_after_the_step_before_completed(self):
        step = self.rec.record(output(cached_reqs=cached(["a"], [4]), counts={"a": 1}),
                               {"a": [7]}, planned_during_previous=False)
        self.assertNotIn("planned_during", step)
        self.assertEqual(step["cached_requests"][0]["num_computed_tokens"], 4)

    def test_given_drafts_must_fit(self):
        with self.assertRaisesRegex(rec.RecorderError, "draft_token_ids"):
            self.rec.record(output(cached_reqs=cached(["a"], [6]), counts={"a": 3},
                                   spec={"a": [-1, -1]}), {"a": [6]},
                            draft_token_ids={"a": [1]})

    def test_reset_refused(self):
        with self.assertRaisesRegex(rec.RecorderError, "async scheduling"):
            self.rec.note_reset_prefix_cache()

    def test_a_padded_prompt_tail_without_async(self):
        """pad_spec_decode: a new request with one prompt token left, padded to 1 + 2 tokens
        with -1 drafts, all rejected."""
        with tempfile.TemporaryDirectory() as d:
            r = make_recorder(os.path.join(d, "t.jsonl"))
            step = r.record(output(new=[new_req("b", [1, 2, 3, 4, 5], [0, 7, 8, 9],
                                                num_computed=4)],
                                   counts={"b": 3}, spec={"b": [-1, -1]}), {"b": [6]})
            r.close()
        row = step["scheduled"][0]
        self.assertEqual(row["num_scheduled_tokens"], 3)
        self.assertEqual(row["num_draft_tokens"], 2)
        self.assertEqual(row["token_ids"][0], 5)
        self.assertEqual(row["token_ids"][1:], [7, 7])  # stand-ins, not the sampled 6
        self.assertNotIn("num_accepted_tokens", row)  # 1: every placeholder rejected


def vllm_async_outputs(steps, attention=False):
    """What vLLM's async scheduler and runner hand over for each step of a trace a mambacheck
    async run wrote: SchedulerOutput stand-ins (optimistic counts, -1 placeholder drafts, the
    attention group's row ahead of the mamba group's: the trace's own with `attention`, else
    a stand-in; the block copies without their group), each row's sampled tokens, the batch
    order and the tables held."""
    no_row = [] if attention else ATTN
    truth = {}  # (req_id, position) -> token, from every row's tokens the step committed
    for step in steps:
        computed = {e["req_id"]: e.get("num_computed_tokens", 0)
                    for e in step.get("new_requests", []) + step.get("cached_requests", [])}
        for row in step.get("scheduled", []):
            c = computed[row["req_id"]]
            known = row["num_scheduled_tokens"] - row.get("num_draft_tokens", 0)
            accepted = row.get("num_accepted_tokens", 1) if row.get("num_draft_tokens") else 0
            for i, token in enumerate(row["token_ids"][:known + max(accepted - 1, 0)]):
                truth[(row["req_id"], c + i)] = token
    out = []
    for step in steps:
        cached_entries = step.get("cached_requests", [])
        # The attention group's row: the trace's own (a run through a block manager), else a
        # stand-in the recorder drops.
        cached_out = cached(
            [e["req_id"] for e in cached_entries],
            [e.get("num_computed_tokens_optimistic", e["num_computed_tokens"])
             for e in cached_entries],
            [(e.get("attention_block_ids", [no_row])[0], e.get("new_block_ids", [[]])[0])
             if "new_block_ids" in e or "attention_block_ids" in e else None
             for e in cached_entries],
            resumed=[e["req_id"] for e in cached_entries if e.get("resumed")])
        new = [NS(req_id=e["req_id"], prompt_token_ids=e["prompt_token_ids"],
                  block_ids=(e.get("attention_block_ids", [no_row])[0], e["block_ids"][0]),
                  num_computed_tokens=e.get("num_computed_tokens", 0))
               for e in step.get("new_requests", [])]
        computed = {e["req_id"]: e.get("num_computed_tokens", 0)
                    for e in step.get("new_requests", []) + cached_entries}
        prompt_len = {e["req_id"]: len(e["prompt_token_ids"]) for e in step.get("new_requests", [])}
        sampled = {}
        for row in step.get("scheduled", []):
            req_id, c = row["req_id"], computed[row["req_id"]]
            end = c + row["num_scheduled_tokens"]
            if row.get("num_draft_tokens"):
                a = row.get("num_accepted_tokens", 1)
                sampled[req_id] = [truth.get((req_id, c + 1 + i), 0) for i in range(a)]
                if a <= row["num_draft_tokens"] and (req_id, c + a) not in truth:
                    # A bonus token no later row shows: the engine writes the rejected draft in
                    # its place as the true token plus one.
                    sampled[req_id][a - 1] = row["token_ids"][a] - 1
            elif (req_id, end) in truth or end >= prompt_len.get(req_id, 0):
                # A chunk that reaches the end of the known tokens samples the next one.
                sampled[req_id] = [truth.get((req_id, end), 0)]
        out.append((output(new=new, cached_reqs=cached_out,
                           counts={r["req_id"]: r["num_scheduled_tokens"]
                                   for r in step.get("scheduled", [])},
                           spec={r["req_id"]: [-1] * r["num_draft_tokens"]
                                 for r in step.get("scheduled", []) if r.get("num_draft_tokens")},
                           preempted=set(step.get("preempted_req_ids", [])),
                           finished=set(step.get("finished_req_ids", [])),
                           copies=[(c[1], c[2]) for c in step.get("block_copies", [])]),
                    sampled, [r["req_id"] for r in step.get("scheduled", [])],
                    {e["req_id"]: ([], e["held_block_ids"][0]) for e in cached_entries
                     if "held_block_ids" in e}))
    return out


class SchedulerContract(unittest.TestCase):
    def header(self, **kwargs):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.jsonl")
            with rec.TraceRecorder(
                    path, config=rec.cache_config(mamba_block_size=4, attn_block_size=4,
                                                  num_spec_tokens=2),
                    layout={"preset": "tiny-mamba2"}, num_mamba_groups=1, **kwargs):
                pass
            with open(path, encoding="utf-8") as f:
                return json.loads(f.readline())

    def test_eagle_and_a_connector_are_said(self):
        h = self.header(use_eagle=True, unordered_writer=True)
        self.assertEqual(h["version"], 4)
        self.assertEqual(h["scheduler"], {"cache_registration": "at_schedule", "eagle": True,
                                          "unordered_writer": True})

    def test_attention_groups_are_recorded_with_the_shared_pool(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.jsonl")
            with rec.TraceRecorder(
                    path, config=rec.cache_config(mamba_block_size=4, attn_block_size=4,
                                                  num_spec_tokens=2),
                    layout={"preset": "tiny-mamba2"}, num_mamba_groups=1,
                    mamba_group_indices=[1], attention_group_indices=[0]) as r:
                first = r.record(output(new=[NS(req_id="a", prompt_token_ids=list(range(1, 10)),
                                                block_ids=([5], [6]), num_computed_tokens=0)],
                                        counts={"a": 8}), {"a": [9]})
                second = r.record(output(cached_reqs=cached(["a"], [8], new_block_ids=[([7], [])]),
                                         counts={"a": 1}), {"a": [40]})
            with open(path, encoding="utf-8") as f:
                header = json.loads(f.readline())
        self.assertEqual(header["scheduler"], {"cache_registration": "at_schedule",
                                               "attention_groups": 1, "shared_pool": True})
        self.assertEqual(first["new_requests"][0]["attention_block_ids"], [[5]])
        self.assertEqual(first["new_requests"][0]["block_ids"], [[6]])
        self.assertEqual(second["cached_requests"][0]["attention_block_ids"], [[7]])
        self.assertNotIn("new_block_ids", second["cached_requests"][0])

    def test_an_empty_contract_is_mambacheck_s_own_and_written_as_version_1(self):
        h = self.header(scheduler={})
        self.assertEqual(h["version"], 1)
        self.assertNotIn("scheduler", h)


class AsyncRoundTrip(unittest.TestCase):
    def test_recorded_trace_is_the_source(self):
        if not ASYNC_SOURCE:
            self.skipTest("no --async-source")
        source_path = ASYNC_SOURCE
        with open(source_path, encoding="utf-8") as f:
            lines = [json.loads(line) for line in f]
        header, steps = lines[0], lines[1:]
        self.assertTrue(header["async_scheduling"])
        self.assertGreater(sum(1 for s in steps for c in s.get("cached_requests", [])
                               if "num_computed_tokens_optimistic" in c), 0)
        with tempfile.TemporaryDirectory() as d:
            path = ASYNC_TRACE_OUT or os.path.join(d, "async.jsonl")
            config = header["config"]
            with rec.TraceRecorder(
                    path, config=config, layout=header["layout"], num_mamba_groups=1,
                    mamba_group_indices=[1], async_scheduling=True,
                    scheduler=header.get("scheduler", {}),
                    source={"test": "recorder_test.py", "from": "mambacheck run --async"}) as r:
                recorded = [r.record(o, sampled, batch_order=order)
                            for o, sampled, order, _ in vllm_async_outputs(steps)]
        self.assertEqual(len(recorded), len(steps))
        rejected_past_first = 0
        for want, got in zip(steps, recorded):
            for w, g in zip(want.get("scheduled", []), got.get("scheduled", [])):
                d = w.get("num_draft_tokens", 0)
                a = w.get("num_accepted_tokens", 1)
                first_unseen = len(w["token_ids"]) - d + a  # past the first rejected draft
                rejected_past_first += max(len(w["token_ids"]) - first_unseen, 0)
                g["token_ids"][first_unseen:] = w["token_ids"][first_unseen:]
            self.assertEqual(got, want)
        self.assertGreater(rejected_past_first, 0)


class PartialHashRoundTrip(unittest.TestCase):
    """Runs through the reference block manager with partial-hash hits (attention tables in a
    shared pool, the manager's copies), async and sync, handed over as vLLM would and recorded:
    each trace is its source, copies and their groups included."""

    def round_trip(self, source_path, trace_out, async_scheduling):
        with open(source_path, encoding="utf-8") as f:
            lines = [json.loads(line) for line in f]
        header, steps = lines[0], lines[1:]
        self.assertEqual(header["version"], 5)
        self.assertEqual(header.get("async_scheduling", False), async_scheduling)
        self.assertGreater(sum(len(s.get("block_copies", [])) for s in steps), 0)
        outputs = vllm_async_outputs(steps, True)
        if not async_scheduling:  # a synchronous scheduler hands the drafts over themselves
            for (o, _, _, _), step in zip(outputs, steps):
                for row in step.get("scheduled", []):
                    if row.get("num_draft_tokens"):
                        o.scheduled_spec_decode_tokens[row["req_id"]] = \
                            row["token_ids"][-row["num_draft_tokens"]:]
        with tempfile.TemporaryDirectory() as d:
            path = trace_out or os.path.join(d, "partial.jsonl")
            with rec.TraceRecorder(
                    path, config=header["config"], layout=header["layout"],
                    num_mamba_groups=1, mamba_group_indices=[1], attention_group_indices=[0],
                    async_scheduling=async_scheduling,
                    hash_block_size=header["scheduler"]["hash_block_size"],
                    source={"test": "recorder_test.py", "from": "mambacheck run "
                            "--hash-block-size --block-manager"}) as r:
                recorded = [r.record(o, sampled, batch_order=order, held_tables=held)
                            for o, sampled, order, held in outputs]
            with open(path, encoding="utf-8") as f:
                self.assertEqual(json.loads(f.readline())["scheduler"], header["scheduler"])
        for want, got in zip(steps, recorded):
            for w, g in zip(want.get("scheduled", []), got.get("scheduled", [])):
                first_unseen = (len(w["token_ids"]) - w.get("num_draft_tokens", 0)
                                + w.get("num_accepted_tokens", 1))
                if async_scheduling:  # rejected drafts past the first never reach vLLM
                    g["token_ids"][first_unseen:] = w["token_ids"][first_unseen:]
            if "preempted_req_ids" in want:  # a set to vLLM: the recorder sorts it
                want["preempted_req_ids"].sort()
            self.assertEqual(got, want)

    def test_async_recorded_trace_is_the_source(self):
        if not PARTIAL_SOURCE:
            self.skipTest("no --partial-source")
        self.round_trip(PARTIAL_SOURCE, PARTIAL_TRACE_OUT, True)

    def test_sync_recorded_trace_is_the_source(self):
        if not PARTIAL_SYNC_SOURCE:
            self.skipTest("no --partial-sync-source")
        self.round_trip(PARTIAL_SYNC_SOURCE, PARTIAL_SYNC_TRACE_OUT, False)

    def test_copies_of_attention_blocks_are_dropped_and_unknown_blocks_refused(self):
        with tempfile.TemporaryDirectory() as d:
            with rec.TraceRecorder(
                    os.path.join(d, "t.jsonl"),
                    config=rec.cache_config(mamba_block_size=4, attn_block_size=4,
                                            num_spec_tokens=0),
                    layout={"preset": "tiny-mamba2"}, num_mamba_groups=1,
                    mamba_group_indices=[1], attention_group_indices=[0],
                    hash_block_size=2) as r:
                step = r.record(output(new=[NS(req_id="a", prompt_token_ids=list(range(1, 10)),
                                               block_ids=([5, 6], [0, 7]),
                                               num_computed_tokens=6)],
                                       counts={"a": 2}, copies=[(3, 6), (4, 7)]), {})
                self.assertEqual(step["block_copies"], [[0, 4, 7]])
                with self.assertRaisesRegex(rec.RecorderError, "neither block is in a table"):
                    r.record(output(copies=[(40, 41)]), {})


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
    parser.add_argument("--async-source", help="an async trace of `mambacheck run --async`")
    parser.add_argument("--async-trace-out", help="leave the async round trip's trace here")
    parser.add_argument("--partial-source", help="an async trace of `mambacheck run --async "
                        "--hash-block-size N --block-manager ...` (the reference manager)")
    parser.add_argument("--partial-trace-out", help="leave the partial-hash round trip's "
                        "trace here")
    parser.add_argument("--partial-sync-source", help="the same, synchronous")
    parser.add_argument("--partial-sync-trace-out", help="leave its round trip's trace here")
    args, rest = parser.parse_known_args()
    TRACE_OUT = args.trace_out
    ASYNC_SOURCE = args.async_source
    ASYNC_TRACE_OUT = args.async_trace_out
    PARTIAL_SOURCE = args.partial_source
    PARTIAL_TRACE_OUT = args.partial_trace_out
    PARTIAL_SYNC_SOURCE = args.partial_sync_source
    PARTIAL_SYNC_TRACE_OUT = args.partial_sync_trace_out
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
