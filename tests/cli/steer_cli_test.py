"""fuzz --level engine --steer: the report is the same for any --jobs (byte for byte) and with
--no-isolate; one epoch as long as the campaign is the unsteered campaign (same counts and
coverage); in narrow settings where a feature is rare or missing by default, steering reaches it
in fewer cases (exact first cases for fixed seeds); a steered finding's reproduce line (with
--steer-boosts) redraws its case; --steer with a shard (given or from the scheduler's
environment), --resume-from or the kernel level is one line, exit 2.

usage: steer_cli_test.py MAMBACHECK WORK_DIR
"""
import json
import os
import shlex
import shutil
import subprocess
import sys

from cli_checks import check, finish

MC, WORK = sys.argv[1], sys.argv[2]


def path(name):
    return os.path.join(WORK, name)


def run(args, env=None):
    return subprocess.run([MC, *args], cwd=WORK, capture_output=True, text=True, timeout=600,
                          env=env)


def read(name):
    with open(path(name), "rb") as f:
        return f.read()


def campaign(name, args):
    r = run(["fuzz", "--level", "engine", "--backend", "host", "--out", name + "-out",
             "--report", name + ".json", *args])
    check(r.returncode == 0, f"{name}: exit {r.returncode}: {r.stderr}")
    return json.load(open(path(name + ".json")))


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)

# Deterministic whatever runs the cases: epochs start only when the epoch before is judged.
steered = ["--cases", "200", "--max-size", "20", "--steer", "--steer-epoch", "64"]
for jobs in ("1", "2", "3"):
    campaign(f"steered-{jobs}", [*steered, "--jobs", jobs])
campaign("steered-here", [*steered, "--no-isolate"])
for other in ("steered-2", "steered-3", "steered-here"):
    check(read(other + ".json") == read("steered-1.json"),
          f"{other}: the steered report differs from --jobs 1")
report = json.load(open(path("steered-1.json")))
check(report["steer"]["epoch"] == 64, f"steer: {report['steer']}")
check([e["first_case"] for e in report["steer"]["boosted_epochs"]] == [64, 128, 192],
      f"boosted epochs: {report['steer']['boosted_epochs']}")

# Epoch 0 is drawn unboosted: one epoch as long as the campaign is the default campaign.
plain = campaign("plain", ["--cases", "200", "--max-size", "20"])
one = campaign("one-epoch", ["--cases", "200", "--max-size", "20", "--steer", "--steer-epoch",
                             "200"])
check("steer" not in plain, "the unsteered report records steering")
check(one["steer"]["boosted_epochs"] == [], f"one epoch boosted: {one['steer']}")
del one["steer"]
check(one == plain, "one epoch of --steer differs from the unsteered campaign")


# Narrow settings where a feature is rare or missing in the first epoch: the first case reaching
# it, and how many events of it, unsteered (one epoch) and steered (epochs of 256).
def first_reached(args, feature):
    out = []
    for name, epoch in (("narrow-plain", "100000"), ("narrow-steered", "256")):
        r = campaign(name, [*args, "--steer", "--steer-epoch", epoch])
        out.append((r["steer"]["first_reached"][feature], r["coverage"]["counts"][feature]))
    return out


narrow = {
    ("--cases", "400", "--max-size", "5"): ("resume-after-accepted-drafts", [(347, 1), (271, 5)]),
    ("--cases", "400", "--max-size", "0"): ("prefix-hit-several-blocks", [(366, 1), (286, 11)]),
    ("--cases", "300", "--max-size", "20", "--block-size", "560"):
        ("prefill-crosses-several", [(None, 0), (257, 65)]),
}
for args, (feature, expected) in narrow.items():
    got = first_reached(list(args), feature)
    check(got == expected, f"{' '.join(args)}: {feature} (first case, count) unsteered, steered: "
                           f"{got}, expected {expected}")

# A steered finding names its boosts in its reproduce line, which redraws the failing case.
mutant = ["--cases", "40", "--max-size", "20", "--mutant", "skip_cleanup_of_resumed",
          "--keep-going", "--shrink-time", "none", "--steer", "--steer-epoch", "4"]
r = run(["fuzz", "--level", "engine", "--backend", "host", "--out", "mutant-out", "--report",
         "mutant.json", *mutant])
check(r.returncode == 1, f"steered mutant campaign: exit {r.returncode}: {r.stderr}")
findings = json.load(open(path("mutant.json")))["findings"]
boosted = [f for f in findings if "--steer-boosts" in f["counterexample"]["reproduce"]]
check(len(boosted) >= 2,
      f"steered findings: {[f['counterexample']['reproduce'] for f in findings]}")
for f in boosted[:2]:
    args = shlex.split(f["counterexample"]["reproduce"])[1:]
    again = run([*args, "--out", "again-out", "--report", "again.json"])
    check(again.returncode == 1, f"{args}: exit {again.returncode}")
    got = [g["signature"] for g in json.load(open(path("again.json")))["findings"]]
    check(got == [f["signature"]], f"{args}: {got}, expected {f['signature']}")

# Refused, one line, exit 2.
refused = {
    "shard": (["--steer", "--shard", "1/2"], None),
    "shard from the environment": (["--steer"], {"SLURM_ARRAY_TASK_ID": "1",
                                                  "SLURM_ARRAY_TASK_COUNT": "2"}),
    "resume": (["--steer", "--resume-from", "10"], None),
    "epoch without steer": (["--steer-epoch", "10"], None),
    "epoch 0": (["--steer", "--steer-epoch", "-1"], None),
    "both": (["--steer", "--steer-boosts", "async=rare"], None),
    "bad boost": (["--steer-boosts", "async=often"], None),
    "bad knob": (["--steer-boosts", "warp=rare"], None),
}
for what, (args, env_add) in refused.items():
    env = None
    if env_add:
        env = dict(os.environ)
        env.update(env_add)
    r = run(["fuzz", "--level", "engine", "--backend", "host", "--cases", "20", *args], env)
    lines = r.stderr.strip().splitlines()
    check(r.returncode == 2 and len(lines) == 1, f"{what}: exit {r.returncode}, {r.stderr!r}")
r = run(["fuzz", "--level", "kernel", "--backend", "host", "--cases", "20", "--steer"])
check(r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1,
      f"kernel --steer: exit {r.returncode}, {r.stderr!r}")
r = run(["fuzz", "--level", "engine", "--backend", "host", "--steer", "--shard", "0/2"])
check("a shard does not see the other shards' coverage counts" in r.stderr, r.stderr)

finish("steer: all checks passed")
