"""Malformed input files, each refused by the command that reads it with exit 2 and exactly one
line on stderr that names the file and where in it (the line, the column or the field, the .npy
file of a case directory) in mambacheck's own words, never the JSON parser's; promptly, and with
no report or output file left behind.

Traces (replay) and workloads (run --workload): a number past a double (1e400), JSON that does
not parse, text after the JSON value of a line, a NUL byte in a line, a file that is not text
(/dev/zero) or has an over-long line. Case directories (case): a column or a block id out of
range in an .npy array.

usage: bad_files_cli_test.py MAMBACHECK WORK_DIR SOURCE_DIR
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import time

MC, WORK, SOURCE = sys.argv[1], sys.argv[2], sys.argv[3]
LIBRARY_TRACE = os.path.join(SOURCE, "scenarios/library/a-decode-crossing-each-acceptance.jsonl")
WORKLOAD = os.path.join(SOURCE, "scenarios/workloads/mooncake-style-small.jsonl")
SECONDS_MAX = 30  # per command, under AddressSanitizer on a loaded machine
failures = []


def write(name, data):
    path = os.path.join(WORK, name)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())
    return path


def refused(what, args, needles, left=()):
    """`args` must exit 2 with one stderr line holding every string of `needles`, none of the
    parser's own words, and leave none of the paths in `left`."""
    start = time.monotonic()
    try:
        done = subprocess.run([MC, *args], cwd=WORK, capture_output=True, timeout=SECONDS_MAX)
    except subprocess.TimeoutExpired:
        failures.append(f"{what}: still running after {SECONDS_MAX} s")
        return
    seconds = time.monotonic() - start
    stderr = done.stderr.decode(errors="replace")
    lines = stderr.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if done.returncode != 2 or len(lines) != 1 or not lines[0].strip():
        failures.append(f"{what}: exit {done.returncode}, stderr {stderr[:500]!r}")
        return
    line = lines[0]
    for needle in needles:
        if needle not in line:
            failures.append(f"{what}: {needle!r} is not in {line!r}")
    for parser_words in ("json.exception", "parse_error", "out_of_range", "syntax error"):
        if parser_words in line:
            failures.append(f"{what}: the parser's own text {parser_words!r} in {line!r}")
    for path in left:
        if os.path.exists(path):
            failures.append(f"{what}: left {path}")
    print(f"{what}: {seconds:.2f} s: {line}")


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
report = os.path.join(WORK, "report.json")
steps_out = os.path.join(WORK, "steps.jsonl")

# Traces: the header and the first two steps of a library trace, one of them spoilt.
with open(LIBRARY_TRACE) as f:
    header, step0, step1 = [next(f).rstrip("\n") for _ in range(3)]
assert '"num_computed_tokens":3' in step1


def trace(name, bad_step1):
    return write(name, "\n".join([header, step0, bad_step1]) + "\n")


def replay(what, path, needles):
    refused(f"replay: {what}", ["replay", path, "--report", report, "--steps-out", steps_out],
            [f"{path}:3:", *needles], left=[report, steps_out])


replay("a number past a double",
       trace("overflow.jsonl", step1.replace('"num_computed_tokens":3', '"num_computed_tokens":1e400', 1)),
       ["cached_requests[0].num_computed_tokens:", "1e400", "too large"])
bad = step1.replace('"num_computed_tokens":3', '"num_computed_tokens":3x', 1)
replay("JSON that does not parse", trace("syntax.jsonl", bad),
       ["cached_requests[0]: not valid JSON at column {}: invalid literal".format(bad.index("3x") + 2)])
replay("a line cut short", trace("cut.jsonl", step1[:40]),
       ["cached_requests[0].req_id: the JSON value is cut short: the line ends at column 40"])
replay("text after the JSON value",
       trace("trailing.jsonl", step1 + " garbage"),
       ["json: text after the end of the JSON value, at column {}".format(len(step1) + 2)])
replay("a NUL byte in a line", trace("nul.jsonl", step1 + "\0garbage"),
       ["line: a NUL byte at column {}".format(len(step1) + 1)])

# Workloads: run --workload reads the whole file before it runs a step.
with open(WORKLOAD) as f:
    first, second = f.readline().rstrip("\n"), f.readline().rstrip("\n")


def workload(what, path, needles):
    refused(f"run --workload: {what}",
            ["run", "--workload", path, "--steps", "5", "--steps-out", steps_out], needles,
            left=[steps_out])


def workload_file(name, bad_second):
    return write(name, first + "\n" + bad_second + "\n")


path = workload_file("w-overflow.jsonl", second.replace('"timestamp": 150', '"timestamp": 1e400'))
workload("a number past a double", path, [f"{path}:2: timestamp:", "1e400", "too large"])
path = workload_file("w-syntax.jsonl", second.replace("[0, 1, 3]", "[0, 1, 3"))
workload("JSON that does not parse", path, [f"{path}:2:", "column"])
path = workload_file("w-trailing.jsonl", second + "}")
workload("text after the JSON value", path,
         [f"{path}:2: json: text after the end of the JSON value, at column {len(second) + 1}"])
path = workload_file("w-nul.jsonl", second[:10] + "\0" + second[10:])
workload("a NUL byte in a line", path, [f"{path}:2: line: a NUL byte at column 11"])
workload("a file that is not text (/dev/zero)", "/dev/zero",
         ["/dev/zero:1: line: a NUL byte at column 1 (not a text file)"])
path = write("w-long.jsonl", first + "\n" + "7" * (17 << 20))
workload("an over-long line", path, [f"{path}:2: line: longer than 16777216 bytes"])

# Case directories: a value out of range in an .npy array names the directory and the file.
cases = os.path.join(WORK, "cases")
subprocess.run([MC, "export", "--cases", "8", "--kinds", "batch_copy", "--max-size", "20",
                "--out", cases], check=True, capture_output=True)


def case_with_rows():
    for name in sorted(os.listdir(cases)):
        with open(os.path.join(cases, name, "case.json")) as f:
            launch = json.load(f)["launch"]
        if (launch["num_reqs"] > 0 and launch["block_table"]["row_width"] >= 2
                and "src_col" in launch["arrays"]):
            return os.path.join(cases, name)
    raise AssertionError(f"no batch_copy case with rows among {os.listdir(cases)}")


def fill_npy(path, value):
    """Every int32 of the .npy file at `path` set to `value` (a format 1.0 header)."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[6] == 1, path
    start = 10 + struct.unpack("<H", data[8:10])[0]
    count = (len(data) - start) // 4
    with open(path, "wb") as f:
        f.write(data[:start] + struct.pack(f"<{count}i", *([value] * count)))


good = case_with_rows()
bad = os.path.join(WORK, "bad-src-col")
shutil.copytree(good, bad)
fill_npy(os.path.join(bad, "src_col.npy"), 1000)
refused("case: a column out of range", ["case", bad, "--report", report],
        [f"{bad}: src_col.npy: launch batch_copy: request row ", "src column 1000 is outside"],
        left=[report])
bad = os.path.join(WORK, "bad-block-id")
shutil.copytree(good, bad)
# Every row copies column 0 to column 1, so its block ids are read.
fill_npy(os.path.join(bad, "src_col.npy"), 0)
fill_npy(os.path.join(bad, "state_idx.npy"), 1)
fill_npy(os.path.join(bad, "token_bias.npy"), 0)
fill_npy(os.path.join(bad, "block_table_0.npy"), 999999)
refused("case: a block id out of range", ["case", bad, "--report", report],
        [f"{bad}: block_table_0.npy: launch batch_copy: request row ", "block id 999999"],
        left=[report])

for failure in failures:
    print("FAIL:", failure)
sys.exit(1 if failures else 0)
