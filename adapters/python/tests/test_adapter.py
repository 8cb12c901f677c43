"""Tests of mambacheck_adapter that need numpy only (CI): case and result directories, the
host reference kernels against the oracle's expected results, deliberately broken variants,
guards, the first-difference messages (compared with `mambacheck case --check`), and the
worker protocol.

    MAMBACHECK=build/mambacheck /usr/bin/python3 -m unittest discover -s adapters/python/tests
    MAMBACHECK=build/mambacheck /usr/bin/python3 -m pytest adapters/python/tests

MAMBACHECK names the mambacheck binary (it exports the cases); unset, the one on PATH. Without
either the module's tests are skipped. Exit 77 (skipped) from run_tests.py when numpy is
missing.
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import types
import unittest

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from mambacheck_adapter import casefile, compare, devices, forward, launch, reference  # noqa: E402

MAMBACHECK = os.environ.get("MAMBACHECK") or shutil.which("mambacheck") or ""
EXPORT_CASES = 40
WORKER = [sys.executable, "-m", "mambacheck_adapter.worker", "--kernels",
          "mambacheck_adapter.reference"]
ENV = dict(os.environ, PYTHONPATH=str(HERE.parent))


def export(out, cases, seed, max_size=35, kinds=None):
    args = [MAMBACHECK, "export", "--cases", str(cases), "--seed", str(seed), "--max-size",
            str(max_size), "--out", str(out)]
    if kinds:
        args += ["--kinds", kinds]
    subprocess.run(args, check=True, capture_output=True)
    return sorted(p for p in pathlib.Path(out).iterdir() if p.name.startswith("case-"))


ROOT = None  # the shared export (setUpModule)
CASES = []


SLOT_TABLES = reference.select_variant("slot_tables")


def reference_for(kind):
    """The clean reference kernels of `kind`'s block-table convention."""
    columns = launch.columns_of(kind)
    return SLOT_TABLES if columns.table_rows == "slot" else reference


def setUpModule():
    global ROOT, CASES
    if not MAMBACHECK:
        raise unittest.SkipTest("no mambacheck binary: set MAMBACHECK or put it on PATH")
    ROOT = tempfile.TemporaryDirectory(prefix="mc-adapter-test-")
    CASES = export(pathlib.Path(ROOT.name) / "cases", EXPORT_CASES, seed=5)


def tearDownModule():
    ROOT.cleanup()


class Exported(unittest.TestCase):
    """Tests over one export of small cases of every kind."""

    def setUp(self):
        self.root = pathlib.Path(ROOT.name)
        self.cases = CASES

    def run_on(self, case_dir, kernels, out):
        case = casefile.Case(case_dir)
        result = launch.run_case(case, kernels, devices.HostDevice())
        casefile.write_result(case, result, out)
        return case, casefile.StoredResult(case, case_dir), casefile.StoredResult(case, out)

    def test_export_covers_every_kind(self):
        kinds = {casefile.Case(c).kind for c in self.cases}
        self.assertLessEqual(set(casefile.KINDS), kinds)  # a newer kind needs no entry here

    def test_cases_carry_their_kinds_columns(self):
        """case.json names its kind's columns (model/launch_kinds.h); the adapter's table of the
        kinds it knows by name, read only for older case files, agrees with them."""
        for case_dir in self.cases:
            case = casefile.Case(case_dir)
            self.assertIn("family", case.meta["launch"])
            if case.kind in casefile.LEGACY_KIND_COLUMNS:
                self.assertEqual(case.columns, casefile.LEGACY_KIND_COLUMNS[case.kind], case_dir)

    def test_a_kind_is_launched_from_its_columns(self):
        """A case of a kind the adapter does not know by name runs from the columns it carries,
        and a case written before the columns were carried runs from the adapter's table."""
        columns = ("family", "phase", "slots", "table_rows", "moves_state", "work", "inputs")
        edits = (("renamed", lambda launch: launch.update(kind=launch["kind"] + "_variant")),
                 ("old", lambda launch: [launch.pop(name) for name in columns]))
        for kind in ("precopy_slot_tables", "postprocess_align", "precopy_v1", "postprocess"):
            case_dir = next(c for c in self.cases if casefile.Case(c).kind == kind)
            for name, edit in edits:
                copy = self.root / f"columns-{kind}-{name}"
                shutil.copytree(case_dir, copy)
                meta = json.loads((copy / "case.json").read_text())
                edit(meta["launch"])
                (copy / "case.json").write_text(json.dumps(meta))
                kernels = reference_for(casefile.LEGACY_KIND_COLUMNS[kind])
                case, expected, actual = self.run_on(copy, kernels, self.root / f"{copy.name}-out")
                self.assertEqual(case.columns, casefile.LEGACY_KIND_COLUMNS[kind])
                self.assertIsNone(compare.first_difference(case, expected, actual), copy)
        meta = json.loads((self.cases[0] / "case.json").read_text())
        meta["launch"]["kind"] = "unknown_kind"
        for column in columns:
            meta["launch"].pop(column)
        unknown = self.root / "unknown-kind"
        shutil.copytree(self.cases[0], unknown)
        (unknown / "case.json").write_text(json.dumps(meta))
        with self.assertRaisesRegex(casefile.CaseError, "launch.kind: 'unknown_kind' is not one "
                                    "of .* and launch.family is missing"):
            casefile.Case(unknown)

    def test_reference_kernels_match_the_oracle(self):
        copies = 0
        for i, case_dir in enumerate(self.cases):
            kernels = reference_for(casefile.Case(case_dir).columns)
            case, expected, actual = self.run_on(case_dir, kernels, self.root / f"ref-{i}")
            self.assertIsNone(compare.first_difference(case, expected, actual), case_dir)
            self.assertFalse(actual.decisions_recorded)
            copies += len(expected.decisions)
        self.assertGreater(copies, 50)  # the cases did copy something

    def test_each_module_covers_one_table_convention(self):
        self.assertEqual(launch.supported_kinds(reference),
                         ["postprocess", "postprocess_align", "precopy", "preprocess_align",
                          "batch_copy", "precopy_v1"])
        self.assertEqual(launch.supported_kinds(SLOT_TABLES),
                         ["postprocess", "preprocess_align", "batch_copy", "precopy_v1",
                          "postprocess_align_slot_tables", "precopy_slot_tables"])
        # A module with the seed's precopy signature (no HAS_IDX_MAPPING) and no declarations.
        seed = types.SimpleNamespace(precopy_mamba_align_fused_kernel=object())
        self.assertEqual(launch.supported_kinds(seed), ["precopy"])
        slot_case = next(c for c in self.cases
                         if casefile.Case(c).kind == "precopy_slot_tables")
        with self.assertRaisesRegex(launch.LaunchError,
                                    "does not implement precopy_slot_tables .*'batch_row'"):
            self.run_on(slot_case, reference, self.root / "wrong-convention")
        bad = types.SimpleNamespace(precopy_mamba_align_fused_kernel=object(),
                                    BLOCK_TABLE_ROWS="rows")
        with self.assertRaisesRegex(launch.LaunchError, "BLOCK_TABLE_ROWS is 'rows'"):
            launch.supported_kinds(bad)

    def test_broken_variants_are_caught(self):
        for variant in ("guard_by_address", "temporal_size_from_stride",
                        "conv_shift_not_memmove", "ds_ignores_bias", "temporal_ignores_bias",
                        "preprocess_floor", "table_by_batch_row"):
            kernels = reference.select_variant(variant)
            found = []
            for i, case_dir in enumerate(self.cases):
                if not launch.covers(kernels, casefile.Case(case_dir).columns):
                    continue  # the other table convention's cases
                try:
                    case, expected, actual = self.run_on(case_dir, kernels,
                                                         self.root / f"{variant}-{i}")
                except launch.LaunchError as e:  # a write outside the arena is caught too
                    found.append(str(e))
                    break
                message = compare.first_difference(case, expected, actual)
                if message:
                    found.append(message)
                    break
            self.assertTrue(found, f"{variant} was not caught by any of {len(self.cases)} cases")

    def test_unsupported_batch_copy_is_reported(self):
        statuses = []
        for i, case_dir in enumerate(self.cases):
            kernels = reference_for(casefile.Case(case_dir).columns)
            case, expected, actual = self.run_on(case_dir, kernels, self.root / f"st-{i}")
            statuses.append((expected.status, actual.status))
        self.assertIn(("unsupported", "unsupported"), statuses)
        self.assertTrue(all(e == a for e, a in statuses))

    def test_messages_match_the_cpp_report(self):
        """A tampered expected byte: the adapter names it exactly as `mambacheck case`."""
        for case_dir in self.cases:
            case = casefile.Case(case_dir)
            result = json.loads((case_dir / "expected" / "result.json").read_text())
            if case.kind != "precopy" or not result["decisions"]:
                continue
            tampered = self.root / "tampered"
            subprocess.run(["cp", "-r", str(case_dir), str(tampered)], check=True)
            d = result["decisions"][0]
            t = case.tensors[d["tensor"]]
            page = int(case.arena_specs[t["arena"]]["page_bytes"])
            offset = d["dst_block_id"] * page + t["offset_bytes"] + 1
            arena = np.load(tampered / "expected" / f"arena_{t['arena']}.npy", mmap_mode="r+")
            arena.reshape(-1)[offset] ^= 0xFF
            arena.flush()
            del arena
            cpp = subprocess.run([MAMBACHECK, "case", str(tampered), "--backend", "oracle",
                                  "--check"], capture_output=True, text=True)
            self.assertEqual(cpp.returncode, 1, cpp.stdout + cpp.stderr)
            py = subprocess.run([sys.executable, "-m", "mambacheck_adapter", str(tampered),
                                 "--kernels", "mambacheck_adapter.reference", "--check"],
                                capture_output=True, text=True, env=ENV)
            self.assertEqual(py.returncode, 1, py.stdout + py.stderr)
            line = [x for x in cpp.stdout.splitlines() if x.startswith("MISMATCH")][0]
            self.assertIn(f"bytes [{offset}, {offset + 1}) differ: group {t['group']} layer "
                          f"{t['layer']} state {t['name']}, block {d['dst_block_id']}, byte 1",
                          line)
            self.assertIn(line, py.stdout)
            return
        self.fail("no precopy case with a copy in the export")


def racy_candidate(case_dir):
    """Whether the racy host variant must fail in some runs and hold in others on this case:
    a postprocess_align case with one row that resets a and copies (src_col == dst_col), of
    2..4 state tensors, whose copy of some tensor s > 0 changes bytes. Its programs run in a
    random order per launch: the run fails when such a program comes after the row's program
    0 (which resets a), and holds when program 0 comes last, with chance >= 1/4."""
    case = casefile.Case(case_dir)
    if case.kind != "postprocess_align" or not 2 <= len(case.tensors) <= 4:
        return False
    decisions = json.loads((case_dir / "expected" / "result.json").read_text())["decisions"]
    racy = [d for d in decisions if d["src_col"] == d["dst_col"]]
    if len({d["batch_row"] for d in racy}) != 1:
        return False
    for d in racy:
        t = case.tensors[d["tensor"]]
        if d["tensor"] == 0 or d["bytes"] == 0:
            continue
        page = int(case.arena_specs[t["arena"]]["page_bytes"])
        start = d["dst_block_id"] * page + int(t["offset_bytes"])
        end = start + int(t["natural_bytes"])
        name = f"arena_{t['arena']}.npy"
        before = np.load(case_dir / name, mmap_mode="r").reshape(-1)[start:end]
        after = np.load(case_dir / "expected" / name, mmap_mode="r").reshape(-1)[start:end]
        if not np.array_equal(before, after):
            return True
    return False


class RacyVariant(unittest.TestCase):
    """racy_reset on the host: the programs' order is drawn per launch, so one fixed case
    fails in some runs and holds in others; the clean kernels hold on every run."""

    RUNS = 50
    case_dir = None

    @classmethod
    def setUpClass(cls):
        cls.root = pathlib.Path(ROOT.name)
        cases = export(cls.root / "racy-cases", 80, seed=11, max_size=20,
                       kinds="postprocess_align")
        cls.case_dir = next((c for c in cases if racy_candidate(c)), None)

    def setUp(self):
        self.assertIsNotNone(self.case_dir, "no postprocess_align case with one racy row")

    def run_verdicts(self, kernels):
        """Per run: whether it failed."""
        case = casefile.Case(self.case_dir)
        expected = casefile.StoredResult(case, self.case_dir)
        verdicts = []
        for _ in range(self.RUNS):
            with tempfile.TemporaryDirectory(dir=self.root) as tmp:
                out = pathlib.Path(tmp) / "result"
                result = launch.run_case(case, kernels, devices.HostDevice())
                casefile.write_result(case, result, out)
                actual = casefile.StoredResult(case, out)
                verdicts.append(compare.first_difference(case, expected, actual) is not None)
        return verdicts

    def failing_runs(self, kernels):
        return sum(self.run_verdicts(kernels))

    def seeded_verdicts(self, seed):
        """The runs' verdicts in a process that starts with MC_REFERENCE_ORDER_SEED=seed."""
        before = os.environ.get(reference.ORDER_SEED_VARIABLE)
        os.environ[reference.ORDER_SEED_VARIABLE] = seed
        reference._seeded_orders = None  # as a fresh worker process finds it
        try:
            return self.run_verdicts(reference.select_variant("racy_reset"))
        finally:
            reference._seeded_orders = None
            if before is None:
                del os.environ[reference.ORDER_SEED_VARIABLE]
            else:
                os.environ[reference.ORDER_SEED_VARIABLE] = before

    def test_fails_in_some_runs_but_not_all(self):
        failed = self.failing_runs(reference.select_variant("racy_reset"))
        self.assertGreater(failed, 0, f"{self.case_dir}: held on all {self.RUNS} runs")
        self.assertLess(failed, self.RUNS, f"{self.case_dir}: failed on all {self.RUNS} runs")

    def test_clean_never_fails(self):
        self.assertEqual(self.failing_runs(reference.select_variant("clean")), 0)

    def test_an_order_seed_repeats_the_same_runs(self):
        first = self.seeded_verdicts("5")
        self.assertEqual(self.seeded_verdicts("5"), first)
        # Still a race: the runs of one process differ.
        self.assertIn(True, first)
        self.assertIn(False, first)

    def test_an_order_seed_that_is_no_integer_is_refused(self):
        with self.assertRaisesRegex(Exception, "MC_REFERENCE_ORDER_SEED='five': expected an "
                                               "integer"):
            self.seeded_verdicts("five")

    def test_combined_with_a_deterministic_bug(self):
        kernels = reference.select_variant("offset_32bit", "racy_reset")
        self.assertEqual(kernels.postprocess_mamba_fused_kernel.bugs,
                         {"offset_32bit", "racy_reset"})
        self.assertGreater(self.failing_runs(kernels), 0)


class Variants(unittest.TestCase):
    def test_one_or_two_names(self):
        from mambacheck_adapter import kernels
        one = kernels.load_kernels("mambacheck_adapter.reference", "ds_ignores_bias")
        self.assertEqual(one.precopy_mamba_align_fused_kernel.bugs, {"ds_ignores_bias"})
        two = kernels.load_kernels("mambacheck_adapter.reference", "ds_ignores_bias,racy_reset")
        self.assertEqual(two.postprocess_mamba_fused_kernel.bugs,
                         {"ds_ignores_bias", "racy_reset"})
        for bad, message in (("a,b,c", "up to 2 names"), ("racy_reset,", "up to 2 names"),
                             ("racy_reset,racy_reset", "given twice"),
                             ("racy_reset,nope", "unknown variant 'nope'")):
            with self.assertRaisesRegex(kernels.KernelsError, message):
                kernels.load_kernels("mambacheck_adapter.reference", bad)

    def test_a_module_taking_one_name_refuses_two(self):
        from mambacheck_adapter import kernels
        with tempfile.TemporaryDirectory() as tmp:
            module = pathlib.Path(tmp) / "one_variant.py"
            module.write_text("def select_variant(name):\n    return name\n")
            self.assertEqual(kernels.load_kernels(str(module), "x"), "x")
            with self.assertRaisesRegex(kernels.KernelsError, "takes one name"):
                kernels.load_kernels(str(module), "x,y")


class ForwardKernels(unittest.TestCase):
    """forward.py on the reference kernels: what each wrote, decoded from the tracer states."""

    MESSAGE = {"op": "forward", "num_blocks": 12, "state_len": 5, "conv_width": 4, "rows": 3,
               "width": 3, "state_indices": [3, 4, 5, 6, 7, 8, 0, 0, 0],
               "num_accepted": [2, 3, 1], "query_start_loc": [0, 3, 5, 8],
               "kernels": ["ssm", "conv"]}

    def answer(self, variant):
        return forward.answer(dict(self.MESSAGE), reference.select_variant(variant),
                              devices.make_device("host"))

    def test_clean_reads_entry_a_minus_1_and_writes_each_token_and_skips_padding(self):
        got = self.answer("clean")
        # Row 0 reads entry 1 (block 4), row 1 entry 2 (block 8); token t goes to entry t.
        self.assertEqual(got["ssm"], {"writes": [[3, 4, 1], [4, 4, 2], [5, 4, 3], [6, 8, 1],
                                                 [7, 8, 2]], "outside": []})
        # Conv: entry 0 in place, the window from offset a - 1 shifted by one, then the tokens;
        # row 1's last row (past its 2 tokens) keeps what it held.
        self.assertEqual(got["conv"], {"writes": [
            [3, [[3, 2], [3, 3], [-1, 0], [-1, 1], [-1, 2]]],
            [6, [[6, 3], [6, 4], [-1, 0], [-1, 1], [6, 4]]]], "outside": []})

    def test_variants_change_what_is_written(self):
        self.assertEqual(self.answer("drafts_into_one_column")["ssm"]["writes"],
                         [[3, 4, 3], [6, 8, 2]])
        self.assertEqual(self.answer("null_block_not_skipped")["ssm"]["writes"][0], [0, 0, 3])
        with self.assertRaisesRegex(IndexError, "outside"):
            self.answer("reads_column_a")

    def test_count_out_of_range_is_bounded_or_read_wild(self):
        # Row 0 given 4 (past its window of 3) and 0: the clean kernel skips the row, then
        # reads entry 0; the unbounded one reads flat entry 3 (row 1's entry 0, block 6), then
        # flat entry -1, before the table.
        host = devices.make_device("host")
        past = dict(self.MESSAGE, kernels=["ssm"], num_accepted=[4, 3, 1])
        self.assertEqual(forward.answer(past, reference, host)["ssm"]["writes"],
                         [[6, 8, 1], [7, 8, 2]])
        zero = dict(past, num_accepted=[0, 3, 1])
        self.assertEqual(forward.answer(zero, reference, host)["ssm"]["writes"],
                         [[3, 3, 1], [4, 3, 2], [5, 3, 3], [6, 8, 1], [7, 8, 2]])
        broken = reference.select_variant("no_accepted_bound")
        self.assertEqual(forward.answer(past, broken, host)["ssm"]["writes"],
                         [[3, 6, 1], [4, 6, 2], [5, 6, 3], [6, 8, 1], [7, 8, 2]])
        with self.assertRaisesRegex(IndexError, "flat entry -1"):
            forward.answer(zero, broken, host)

    def test_scan_reads_and_writes_each_prefill_rows_block(self):
        message = dict(self.MESSAGE, rows=0, state_indices=[], kernels=["scan"],
                       prefill_state_indices=[3, 5, 0], prefill_query_start_loc=[0, 4, 10, 12],
                       prefill_has_initial_state=[True, False, True])
        del message["num_accepted"], message["query_start_loc"]
        host = devices.make_device("host")
        # Block 3 from its own state after 4 tokens, block 5 from zeros (-4) after 6; the
        # null block's row skipped.
        self.assertEqual(forward.answer(message, reference, host)["scan"]["writes"],
                         [[3, 3, 4], [5, -4, 6]])
        broken = reference.select_variant("scan_ignores_initial_state")
        self.assertEqual(forward.answer(message, broken, host)["scan"]["writes"],
                         [[3, -4, 4], [5, -4, 6]])

    def test_all_mode_gathers_and_prefix_caching(self):
        host = devices.make_device("host")
        # Decode rows (no spec decode), whole table rows: row 0 reads column 0 (block 3) and
        # writes column 1 (block 4); row 1 reads and writes column 1 (block 7).
        decode = {"op": "forward", "num_blocks": 12, "state_len": 3, "conv_width": 4,
                  "rows": 2, "width": 3, "state_indices": [3, 4, 5, 6, 7, -1],
                  "kernels": ["ssm", "conv"], "block_size": 4,
                  "block_idx_last_computed": [0, 1], "block_idx_last_scheduled": [1, 1]}
        got = forward.answer(decode, reference, host)
        self.assertEqual(got["ssm"]["writes"], [[4, 3, 1], [7, 7, 1]])
        self.assertEqual(got["conv"]["writes"], [[4, [[3, 1], [3, 2], [-1, 0]]],
                                                 [7, [[7, 1], [7, 2], [-1, 0]]]])
        # Prefill rows, B = 4: row 0 has 4 tokens computed (reads column 0, block 3) and
        # runs 10: boundaries after 4 and 8 of them into columns 1 and 2, the final state
        # into column 3. Row 1 starts from zeros: 6 tokens, a boundary into column 0.
        prefill = {"op": "forward", "num_blocks": 12, "state_len": 3, "conv_width": 4,
                   "rows": 0, "width": 1, "state_indices": [], "kernels": ["scan"],
                   "block_size": 4, "block_idx_last_computed": [],
                   "block_idx_last_scheduled": [], "prefill_width": 4,
                   "prefill_state_indices": [3, 4, 5, 6, 7, 8, -1, -1],
                   "prefill_query_start_loc": [0, 10, 16],
                   "prefill_has_initial_state": [True, False],
                   "prefill_block_idx_first_scheduled": [1, 0],
                   "prefill_block_idx_last_scheduled": [3, 1],
                   "prefill_block_idx_last_computed": [0, 0]}
        self.assertEqual(forward.answer(prefill, reference, host)["scan"]["writes"],
                         [[4, 3, 4], [5, 3, 8], [6, 3, 10], [7, -4, 4], [8, -4, 6]])
        broken = reference.select_variant("final_state_to_initial_block")
        self.assertEqual(forward.answer(prefill, broken, host)["scan"]["writes"],
                         [[3, 3, 10], [4, 3, 4], [5, 3, 8], [7, -4, 6]])
        with self.assertRaises(forward.ForwardError):
            forward.answer(dict(prefill, prefill_block_idx_last_scheduled=[4, 1]), reference,
                           host)

    def test_bad_messages_are_refused(self):
        for change in ({"state_indices": [1, 2]}, {"query_start_loc": None},
                       {"kernels": ["attention"]}, {"conv_width": 9}):
            message = dict(self.MESSAGE, **change)
            with self.assertRaises(forward.ForwardError, msg=str(change)):
                forward.answer(message, reference, devices.make_device("host"))


class ResultFiles(unittest.TestCase):
    def test_sparse_copy_keeps_holes_and_applies_patches(self):
        with tempfile.TemporaryDirectory() as tmp:
            src, dst = pathlib.Path(tmp) / "a.npy", pathlib.Path(tmp) / "b.npy"
            arena = np.lib.format.open_memmap(src, mode="w+", dtype=np.uint8,
                                              shape=(64, 1 << 16))
            arena[3, 5] = 7
            arena[60, :] = 9
            arena.flush()
            offset = casefile.npy_header(src)[2]
            casefile.copy_sparse(src, dst, [(offset + 10 * (1 << 16) + 1, b"\x01\x02")])
            got = np.load(dst)
            want = np.array(arena)
            want[10, 1:3] = (1, 2)
            np.testing.assert_array_equal(got, want)
            self.assertLess(os.stat(dst).st_blocks * 512, 1 << 20)  # holes stayed holes
            del arena

    def test_page_runs(self):
        self.assertEqual(launch.page_runs([7, 1, 2, 3, 9, 8]), [(1, 3), (7, 9)])
        self.assertEqual(launch.page_runs([]), [])


class Guards(unittest.TestCase):
    setUp = Exported.setUp

    def test_write_past_the_arena_is_reported(self):
        kernels = types.SimpleNamespace(precopy_mamba_align_fused_kernel=None)
        for case_dir in self.cases:
            case = casefile.Case(case_dir)
            if case.kind != "postprocess" or case.num_reqs == 0:
                continue
            lp = launch.Launch(case, devices.HostDevice())
            arena = lp.arenas[0]
            kernels.postprocess_mamba_fused_kernel = {
                (case.num_reqs, len(case.tensors)): lambda *a, **k: reference.ctypes.memset(
                    arena.address + arena.size + 3, 0, 2)}
            lp.run(kernels)
            with self.assertRaisesRegex(launch.LaunchError,
                                        rf"past the end of arena 0 .*byte {arena.size + 3} "):
                lp.read_back("ok", "")
            return
        self.fail("no postprocess case")

    def test_write_outside_an_array_is_reported(self):
        for case_dir in self.cases:
            case = casefile.Case(case_dir)
            if case.kind != "precopy" or case.num_reqs == 0:
                continue
            lp = launch.Launch(case, devices.HostDevice())
            target = lp.arrays["state_idx"]
            kernels = types.SimpleNamespace(precopy_mamba_align_fused_kernel={
                (case.num_reqs, len(case.tensors)): lambda *a, **k: reference.ctypes.memset(
                    target.address - 4, 0, 4)})
            lp.run(kernels)
            with self.assertRaisesRegex(launch.LaunchError, r"state_idx\[-1\], before"):
                lp.read_back("ok", "")
            return
        self.fail("no precopy case")


class Worker(unittest.TestCase):
    setUp = Exported.setUp

    def start(self, *extra):
        return subprocess.Popen(WORKER + list(extra), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=ENV)

    def test_protocol(self):
        w = self.start("--results", str(self.root / "worker-results"))
        greeting = w.stdout.readline().split()
        self.assertEqual(greeting[:2], ["mambacheck-worker", "1"])
        self.assertIn("kinds=" + ",".join(launch.supported_kinds(reference)), greeting)
        kinds = launch.supported_kinds(reference)
        covered = [c for c in self.cases if casefile.Case(c).kind in kinds]
        for case_dir in covered[:5]:
            w.stdin.write(f"{case_dir}\n")
            w.stdin.flush()
            answer = pathlib.Path(w.stdout.readline().strip())
            self.assertEqual(answer, self.root / "worker-results" / case_dir.name)
            case = casefile.Case(case_dir)
            self.assertIsNone(compare.first_difference(
                case, casefile.StoredResult(case, case_dir), casefile.StoredResult(case, answer)))
        explicit = self.root / "explicit-result"
        w.stdin.write(f"{covered[0]}\t{explicit}\n\nno/such/case\n")
        w.stdin.flush()
        self.assertEqual(w.stdout.readline().strip(), str(explicit.resolve()))
        self.assertTrue(casefile.has_result(explicit))
        self.assertRegex(w.stdout.readline(), r"^error: no/such/case/case.json: cannot read")
        out, _ = w.communicate(timeout=30)
        self.assertEqual(w.returncode, 0)
        self.assertEqual(out, "")

    def test_slot_tables_greet_with_their_kinds(self):
        w = self.start("--variant", "slot_tables")
        greeting = w.stdout.readline().split()
        self.assertIn("kinds=postprocess,preprocess_align,batch_copy,precopy_v1,"
                      "postprocess_align_slot_tables,precopy_slot_tables", greeting)
        out, err = w.communicate("", timeout=30)
        self.assertEqual(w.returncode, 0, err)

    def test_two_variants_at_once(self):
        w = self.start("--variant", "guard_by_address,racy_reset")
        greeting = w.stdout.readline().split()
        self.assertEqual(greeting[:2], ["mambacheck-worker", "1"])
        out, err = w.communicate("", timeout=30)
        self.assertEqual(w.returncode, 0, err)

    def test_bad_kernels_module_exits_before_greeting(self):
        w = self.start("--variant", "no_such_variant")
        out, err = w.communicate(timeout=30)
        self.assertEqual(w.returncode, 1)
        self.assertEqual(out, "")
        self.assertIn("unknown variant 'no_such_variant'", err)


if __name__ == "__main__":
    unittest.main()
