"""Shards and merge: a campaign run as N shards (N = 1, 2, 3), each shard a process of its own
started the way a scheduler starts it (--shard K/N, a Slurm job array, a Kubernetes Indexed Job,
Open MPI, a PMI launcher), merged by `mambacheck merge` into the report, JUnit file and exit code
of the single campaign with the same seed and cases: every field of the JSON report equal (the
reports hold no timings; the files are compared byte for byte), the JUnit file equal but for its
time attributes. Campaigns that hold and campaigns with findings (a kernel and an engine mutant,
several signatures, some seen in several shards), both levels, required coverage. Values that
make no shard and reports that are not one campaign are one line and exit 2.

usage: shard_cli_test.py MAMBACHECK WORK_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys

from cli_checks import check, finish

MC, WORK = sys.argv[1], sys.argv[2]


def path(name):
    return os.path.join(WORK, name)


# The environment of the test process, without any scheduler's variables it may run under.
SCHEDULER_VARIABLES = re.compile(r"^(SLURM_|OMPI_|PMI_|PMIX_|JOB_COMPLETION_INDEX$|MC_SHARDS$)")
BASE_ENV = {k: v for k, v in os.environ.items() if not SCHEDULER_VARIABLES.match(k)}


def run(args, env=None):
    return subprocess.run([MC, *args], cwd=WORK, capture_output=True, text=True,
                          env={**BASE_ENV, **(env or {})}, timeout=600)


# How each scheduler tells a process its shard: (extra arguments, environment, the source the
# run must name).
def convention(name, k, n):
    if name == "flag":
        return ["--shard", f"{k}/{n}"], {}, f"from --shard {k}/{n}"
    if name == "slurm":
        return [], {"SLURM_ARRAY_TASK_ID": str(k), "SLURM_ARRAY_TASK_COUNT": str(n),
                    "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": str(n - 1)}, \
            f"from SLURM_ARRAY_TASK_ID={k}, SLURM_ARRAY_TASK_COUNT={n}"
    if name == "slurm-from-1":  # sbatch --array=1-N
        return [], {"SLURM_ARRAY_TASK_ID": str(k + 1), "SLURM_ARRAY_TASK_MIN": "1",
                    "SLURM_ARRAY_TASK_MAX": str(n)}, f"from SLURM_ARRAY_TASK_ID={k + 1}"
    if name == "kubernetes":
        return ["--shards", str(n)], {"JOB_COMPLETION_INDEX": str(k)}, \
            f"from JOB_COMPLETION_INDEX={k}, --shards {n} (a Kubernetes Indexed Job)"
    if name == "kubernetes-env":
        return [], {"JOB_COMPLETION_INDEX": str(k), "MC_SHARDS": str(n)}, \
            f"from JOB_COMPLETION_INDEX={k}, MC_SHARDS={n}"
    if name == "openmpi":
        return [], {"OMPI_COMM_WORLD_RANK": str(k), "OMPI_COMM_WORLD_SIZE": str(n)}, \
            f"from OMPI_COMM_WORLD_RANK={k}, OMPI_COMM_WORLD_SIZE={n} (Open MPI)"
    if name == "pmi":
        return [], {"PMI_RANK": str(k), "PMI_SIZE": str(n)}, f"from PMI_RANK={k}, PMI_SIZE={n}"
    raise ValueError(name)


CONVENTIONS = ["flag", "slurm", "slurm-from-1", "kubernetes", "kubernetes-env", "openmpi", "pmi"]


def junit_without_times(file):
    with open(path(file)) as f:
        return re.sub(r' time="[0-9.]+"', "", f.read())


def run_shards(name, args, n, conv):
    """Runs the N shards of a campaign at once, as N processes; returns their report files."""
    processes = []
    for k in range(n):
        extra, env, source = convention(conv, k, n)
        # {shard} in the paths: one command line for every shard, as on a cluster.
        p = subprocess.Popen([MC, *args, *extra, "--report", f"{name}-{conv}-{n}-{{shard}}.json",
                              "--junit", f"{name}-{conv}-{n}-{{shard}}.xml"], cwd=WORK,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**BASE_ENV, **env})
        processes.append((p, source))
    for k, (p, source) in enumerate(processes):
        out, err = p.communicate(timeout=600)
        check(p.returncode in (0, 1), f"{name} shard {k}/{n} ({conv}): exit {p.returncode}: {err}")
        check(f"fuzz: shard {k}/{n}" in out and source in out,
              f"{name} shard {k}/{n} ({conv}) names its source '{source}': {out[:300]}")
    return [f"{name}-{conv}-{n}-{k}.json" for k in range(n)]


def check_campaign(name, args, conventions):
    single = run([*args, "--report", f"{name}.json", "--junit", f"{name}.xml"])
    check(single.returncode in (0, 1), f"{name}: single campaign exit {single.returncode}: "
          f"{single.stderr}")
    check("fuzz: shard" not in single.stdout, f"{name}: no shard line without a shard")
    whole = json.load(open(path(f"{name}.json")))
    for n, conv in conventions:
        reports = run_shards(name, args, n, conv)
        merged_name = f"{name}-{conv}-{n}-merged"
        shuffled = reports[1:] + reports[:1]  # the order of the arguments does not matter
        m = run(["merge", *shuffled, "--report", f"{merged_name}.json", "--junit",
                 f"{merged_name}.xml"])
        check(m.returncode == single.returncode,
              f"{name}, {n} shards ({conv}): merge exits {m.returncode}, the single campaign "
              f"{single.returncode}: {m.stderr}")
        merged = json.load(open(path(f"{merged_name}.json")))
        for key in sorted(set(whole) | set(merged)):
            check(merged.get(key) == whole.get(key),
                  f"{name}, {n} shards ({conv}): '{key}' differs: merged "
                  f"{json.dumps(merged.get(key))[:300]} single {json.dumps(whole.get(key))[:300]}")
        with open(path(f"{merged_name}.json"), "rb") as a, open(path(f"{name}.json"), "rb") as b:
            check(a.read() == b.read(), f"{name}, {n} shards ({conv}): the files differ")
        check(junit_without_times(f"{merged_name}.xml") == junit_without_times(f"{name}.xml"),
              f"{name}, {n} shards ({conv}): JUnit differs:\n"
              f"{junit_without_times(merged_name + '.xml')}\n{junit_without_times(name + '.xml')}")
    return whole


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)

# Every convention at every N; the shards of a campaign share --out, as on a shared file system.
kernel = ["fuzz", "--backend", "host", "--seed", "5", "--cases", "60", "--max-size", "30",
          "--out", "k-out"]
whole = check_campaign("kernel", kernel, [(1, "flag"), (2, "slurm"), (3, "openmpi"),
                                          (2, "kubernetes"), (3, "pmi"), (3, "slurm-from-1"),
                                          (2, "kubernetes-env")])
check(whole["held"] is True and whole["cases"] == 60, f"kernel: held {whole['held']}")

# Findings: several signatures, some failing in cases of different shards; each merged finding is
# the earliest case's, shrunk as the single campaign shrank it, with every shard's failing cases.
# The mutant breaks the V2 postprocess: drawn among its two kinds alone, it fails in several
# cases per signature (among all eight kinds, once per signature in 60 cases).
mutant = ["fuzz", "--backend", "host", "--cases", "60", "--max-size", "30", "--out", "m-out",
          "--kinds", "postprocess_align,postprocess_align_slot_tables",
          "--mutant", "reset_races_other_programs", "--keep-going", "--shrink-time", "none"]
whole = check_campaign("kernel-mutant", mutant, [(1, "pmi"), (2, "flag"), (3, "kubernetes")])
check(len(whole["findings"]) >= 2 and any(f["cases"] >= 2 for f in whole["findings"]),
      f"the mutant campaign has several findings, one of several cases: {whole['findings']}")

engine = ["fuzz", "--level", "engine", "--backend", "host", "--cases", "40", "--max-size", "20",
          "--out", "e-out"]
whole = check_campaign("engine", engine, [(1, "slurm"), (2, "openmpi"), (3, "flag")])
check(whole["held"] and whole["cases"] == 40, f"engine: {whole['held']}")
runner = [*engine[:-2], "--out", "r-out", "--mutant", "skip_cleanup_of_resumed", "--keep-going",
          "--shrink-time", "none"]
whole = check_campaign("engine-mutant", runner, [(2, "kubernetes-env"), (3, "slurm-from-1")])
check(len(whole["findings"]) >= 2, f"engine mutant findings: {whole['findings']}")

# Both levels, and required coverage: a feature one shard missed and another reached is not
# missing; one that no shard reached is (exit 1, as the single campaign).
both = ["fuzz", "--level", "both", "--backend", "host", "--cases", "30", "--max-size", "20",
        "--out", "b-out", "--require-coverage", "all"]
whole = check_campaign("both", both, [(2, "flag"), (3, "openmpi")])
check(whole["kernel"]["coverage_missing"] != [], "the small kernel campaign misses features")
shard0 = json.load(open(path("both-openmpi-3-0.json")))
check(len(shard0["kernel"]["coverage_missing"]) > len(whole["kernel"]["coverage_missing"]),
      "a shard alone misses more than the campaign")

# A shard that finds nothing among findings: the merged exit code is the campaign's (1).
check(run(["merge", "kernel-mutant-flag-2-0.json", "kernel-mutant-flag-2-1.json"]).returncode == 1,
      "merged findings exit 1")

# --- Values that make no shard: one line, exit 2, nothing run.
def refused(args, env, what, expect):
    r = run(["fuzz", "--backend", "host", "--cases", "3", "--report", "refused.json", *args], env)
    lines = r.stderr.strip().splitlines()
    check(r.returncode == 2, f"{what}: exit {r.returncode}: {r.stderr}")
    check(len(lines) == 1 and expect in r.stderr, f"{what}: one line naming '{expect}': {r.stderr}")
    check(not os.path.exists(path("refused.json")), f"{what}: nothing ran")


refused(["--shard", "3/3"], {}, "K = N", "shard 3 of 3 does not exist")
refused(["--shard", "5/2"], {}, "K > N", "shard 5 of 2 does not exist")
refused(["--shard", "0/0"], {}, "N = 0", "the shard count N is 0")
refused(["--shard", "1"], {}, "no N", "expected K/N")
refused(["--shard", "a/2"], {}, "a letter", "expected K/N")
refused(["--shard", "-1/2"], {}, "negative", "expected K/N")
refused(["--shard", "1/2", "--shards", "3"], {}, "two counts", "two different shard counts")
refused(["--shards", "2"], {}, "--shards without an index", "no JOB_COMPLETION_INDEX")
refused([], {"SLURM_ARRAY_TASK_ID": "x", "SLURM_ARRAY_TASK_COUNT": "2"}, "Slurm id not a number",
        "SLURM_ARRAY_TASK_ID='x'")
refused([], {"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "2"}, "Slurm id = count",
        "shard 2 of 2 does not exist")
refused([], {"SLURM_ARRAY_TASK_ID": "1"}, "Slurm id alone", "SLURM_ARRAY_TASK_COUNT")
refused([], {"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_TASK_MIN": "1",
             "SLURM_ARRAY_TASK_MAX": "9"}, "a sparse Slurm array", "do not fill its id range")
refused([], {"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "0"}, "Slurm count 0",
        "the shard count N is 0")
refused([], {"JOB_COMPLETION_INDEX": "1"}, "an Indexed Job without a count", "--shards N")
refused(["--shards", "0"], {"JOB_COMPLETION_INDEX": "0"}, "--shards 0", "the shard count N is 0")
refused(["--shards", "2"], {"JOB_COMPLETION_INDEX": "0", "MC_SHARDS": "3"}, "two counts",
        "two different shard counts")
refused([], {"JOB_COMPLETION_INDEX": "3", "MC_SHARDS": "3"}, "index = count",
        "shard 3 of 3 does not exist")
refused([], {"OMPI_COMM_WORLD_RANK": "1"}, "a rank without a size", "OMPI_COMM_WORLD_SIZE is not")
refused([], {"PMI_RANK": "0", "PMI_SIZE": "two"}, "a size not a number", "PMI_SIZE='two'")
refused([], {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2", "PMI_RANK": "0",
             "PMI_SIZE": "2"}, "two launchers disagreeing", "disagree")
refused([], {"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "2", "PMI_RANK": "1",
             "PMI_SIZE": "2"}, "two schedulers", "two schedulers give a shard")
# --shard wins over the environment.
r = run(["fuzz", "--backend", "host", "--cases", "4", "--max-size", "5", "--shard", "1/2"],
        {"SLURM_ARRAY_TASK_ID": "x"})
check(r.returncode == 0 and "from --shard 1/2" in r.stdout, f"--shard over the environment: {r}")


# --- Reports that are not one campaign: one line, exit 2.
def merge_refused(files, expect, extra=()):
    r = run(["merge", *files, *extra, "--report", "refused-merge.json"])
    lines = r.stderr.strip().splitlines()
    check(r.returncode == 2, f"merge {files}: exit {r.returncode}: {r.stderr}")
    check(len(lines) == 1 and expect in r.stderr, f"merge {files}: one line with '{expect}': "
          f"{r.stderr}")
    check(not os.path.exists(path("refused-merge.json")), f"merge {files}: nothing written")


k2 = ["kernel-slurm-2-0.json", "kernel-slurm-2-1.json"]
def with_option(args, option, value):
    i = args.index(option)
    return [*args[:i + 1], value, *args[i + 2:]]


run([*with_option(kernel, "--seed", "6"), "--shard", "1/2", "--report", "seed6.json"])
run([*with_option(kernel, "--cases", "61"), "--shard", "1/2", "--report", "cases61.json"])
run([*kernel, "--shard", "1/2", "--resume-from", "31", "--report", "late.json"])
merge_refused([k2[0], "seed6.json"], "'seed' is 5 in")
merge_refused([k2[0], "cases61.json"], "'cases_max' is 60 in")
merge_refused([k2[0], "engine.json"], "'level' is \"kernel\" in")
merge_refused([*k2, "late.json"], "overlap: both ran case 31")
merge_refused([*k2, k2[1]], "are the same part")
merge_refused([k2[0]], "no report has shard 1/2")
merge_refused([k2[0], "kernel-openmpi-3-1.json"], "different shard counts")
merge_refused([k2[0], "late.json"], "no report has cases 1 to 29 of shard 1/2")
merge_refused([k2[0], "kernel.json"], "different shard counts")
merge_refused(["kernel.json", "both.json"], "holds both levels")
merge_refused(["kernel.json", "missing.json"], "cannot read 'missing.json'")
with open(path("not.json"), "w") as f:
    f.write("{not json")
merge_refused(["not.json"], "not.json: not a JSON report")
with open(path("other.json"), "w") as f:
    json.dump({"level": "kernel", "cases": 3}, f)
merge_refused(["other.json"], "other.json: not a fuzz report")
# --partial merges what is there and says what is missing.
r = run(["merge", k2[0], "late.json", "--partial", "--report", "partial.json"])
check(r.returncode == 0, f"--partial: exit {r.returncode}: {r.stderr}")
partial = json.load(open(path("partial.json")))
check(partial["partial"] == ["no report has cases 1 to 29 of shard 1/2 (before late.json)"],
      f"partial: {partial.get('partial')}")
check(partial["cases"] == 30 + 15, f"partial cases: {partial['cases']}")

finish("all shard checks passed")
