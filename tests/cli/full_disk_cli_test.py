"""A full disk, injected into every subcommand that writes: one error line naming what could
not be written, exit 3 (the machine's, not the user's), and no half-written report, trace or
step file left where the user looks for one.

Three injections: a file size limit of 0 (RLIMIT_FSIZE, with SIGXFSZ ignored, so a write fails
with EFBIG), always; a real full file system, a 64 KiB tmpfs filled to its last byte (a write
fails with ENOSPC), where this process may mount one (root, a kernel that allows it), otherwise
that half says skipped; and /dev/full as the report, JUnit or JSON file of every command that
writes one (it opens, then every write fails with ENOSPC; the file is written in place, never
replaced). /dev/full is named through a symbolic link in WORK_DIR, so that a build that renamed
a temporary over it would replace the link, not the device; the path itself is given once, run
as an unprivileged user where this test is root (who cannot write /dev, so nothing is replaced
there either).

usage: full_disk_cli_test.py MAMBACHECK WORK_DIR SOURCE_DIR
"""
import glob
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys

MC, WORK, SOURCE = sys.argv[1], sys.argv[2], sys.argv[3]
TRACE = os.path.join(SOURCE, "scenarios/library/a-decode-crossing-each-acceptance.jsonl")
failures = []
NOBODY = 65534


def writers(out):
    """(arguments, the path that must not be left half written or None)"""
    case = os.path.join(WORK, "case", "case-000000")
    return [
        (["fuzz", "--backend", "host", "--cases", "3", "--report", f"{out}/r.json"], f"{out}/r.json"),
        (["fuzz", "--backend", "host", "--cases", "3", "--junit", f"{out}/r.xml"], f"{out}/r.xml"),
        (["fuzz", "--backend", "host", "--max-size", "30", "--mutant", "null_block_skipped",
          "--out", f"{out}/mc-out"], None),
        (["export", "--cases", "2", "--out", f"{out}/export"], None),
        (["run", "--steps", "50", "--record", f"{out}/t.jsonl"], f"{out}/t.jsonl"),
        (["run", "--steps", "50", "--steps-out", f"{out}/s.jsonl"], f"{out}/s.jsonl"),
        (["replay", TRACE, "--report", f"{out}/rr.json"], f"{out}/rr.json"),
        (["replay", TRACE, "--junit", f"{out}/rr.xml"], f"{out}/rr.xml"),
        (["replay", TRACE, "--steps-out", f"{out}/rs.jsonl"], f"{out}/rs.jsonl"),
        (["mutants", "--backend", "host", "--level", "kernel", "--only", "null_block_skipped",
          "--out", f"{out}/mutants"], None),
        (["case", case, "--report", f"{out}/c.json"], f"{out}/c.json"),
        (["case", case, "--backend", "host", "--out", f"{out}/case-out"], None),
        (["show", TRACE, "--out", f"{out}/show.html"], f"{out}/show.html"),
        (["bench", "--engine", "--steps", "5", "--json", f"{out}/b.json"], f"{out}/b.json"),
    ]


def check_all(out, limit_files, how):
    def preexec():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        if limit_files:
            resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))

    for args, target in writers(out):
        done = subprocess.run([MC, *args], cwd=WORK, capture_output=True, text=True,
                              timeout=300, preexec_fn=preexec)
        lines = [l for l in done.stderr.splitlines() if l.strip()]
        what = f"{how}: mambacheck {' '.join(args)}"
        if done.returncode != 3 or len(lines) != 1:
            failures.append(f"{what}: exit {done.returncode}, {len(lines)} error lines: "
                            f"{done.stderr.strip()[:400]!r}")
            continue
        if "unavailable:" not in lines[0] or out not in lines[0]:
            failures.append(f"{what}: the line does not name what failed: {lines[0]!r}")
        if target and os.path.exists(target):
            failures.append(f"{what}: left {target} ({os.path.getsize(target)} bytes)")
        left = glob.glob(f"{out}/*.tmp-*")
        if left:
            failures.append(f"{what}: left temporaries {left}")
    print(f"{how}: {len(writers(out))} writers tried")


def dev_full_writers(full):
    """(arguments, what the line must name): every report, JUnit and JSON file to `full`."""
    case = os.path.join(WORK, "case", "case-000000")
    fuzz = ["fuzz", "--backend", "host", "--cases", "3"]
    # The cheapest runs that still reach their report: a mutant that survives a 1 s budget,
    # and a gate of one case per seed, one scenario and 1 s per smoke mutant.
    mutants = ["mutants", "--backend", "host", "--level", "kernel", "--only",
               "overlap_copied_backwards", "--time-budget-per-mutant", "1s",
               "--out", os.path.join(WORK, "mutants-full")]
    library = os.path.join(WORK, "library-one")
    os.makedirs(library, exist_ok=True)
    shutil.copy(TRACE, library)
    gate = ["gate", "--backend", "host", "--kernel-cases", "1", "--engine-cases", "1",
            "--require-coverage", "none", "--mutant-budget", "1s", "--library", library,
            "--out", os.path.join(WORK, "gate-full")]
    return [
        [*fuzz, "--report", full], [*fuzz, "--junit", full],
        ["replay", TRACE, "--report", full], ["replay", TRACE, "--junit", full],
        ["replay", TRACE, "--steps-out", full],
        ["run", "--steps", "5", "--steps-out", full], ["run", "--steps", "5", "--record", full],
        ["case", case, "--report", full],
        [*mutants, "--report", full], [*mutants, "--junit", full],
        [*gate, "--junit", full],
        ["bench", "--engine", "--steps", "5", "--json", full],
    ]


def check_dev_full():
    if not os.path.exists("/dev/full") or not stat.S_ISCHR(os.stat("/dev/full").st_mode):
        print("/dev/full: skipped (no such character device here)")
        return
    link = os.path.join(WORK, "full-link")
    os.symlink("/dev/full", link)
    runs = [(args, None) for args in dev_full_writers(link)]
    if os.geteuid() == 0:
        runs.append((["fuzz", "--backend", "host", "--cases", "3", "--report", "/dev/full"],
                     NOBODY))
    for args, user in runs:
        cwd = WORK
        if user is not None:
            cwd = os.path.join(WORK, "nobody")
            os.makedirs(cwd, exist_ok=True)
            os.chmod(cwd, 0o777)
        done = subprocess.run([MC, *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                              user=user)
        lines = done.stderr.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        target = args[-1]
        what = f"/dev/full{' as nobody' if user else ''}: mambacheck {' '.join(args)}"
        if done.returncode != 3 or len(lines) != 1 or not lines[0].strip():
            failures.append(f"{what}: exit {done.returncode}, stderr {done.stderr[:400]!r}")
        elif (not lines[0].startswith("mambacheck: unavailable: ") or target not in lines[0]
              or "No space left on device" not in lines[0]):
            failures.append(f"{what}: the line does not say what failed: {lines[0]!r}")
        if not stat.S_ISCHR(os.stat("/dev/full").st_mode):
            failures.append(f"{what}: /dev/full is no longer a character device")
            break
        if not os.path.islink(link):
            failures.append(f"{what}: replaced the link to /dev/full")
            os.remove(link)
            os.symlink("/dev/full", link)
    print(f"/dev/full: {len(runs)} writers tried")


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
subprocess.run([MC, "export", "--cases", "1", "--max-size", "5", "--out",
                os.path.join(WORK, "case")], check=True, capture_output=True)

check_dev_full()

limited = os.path.join(WORK, "limited")
os.makedirs(limited)
check_all(limited, True, "file size limit 0")

full = os.path.join(WORK, "full")
os.makedirs(full)
mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", full],
                         capture_output=True).returncode == 0
if mounted:
    try:
        fd = os.open(os.path.join(full, "filler"), os.O_WRONLY | os.O_CREAT)
        try:
            while os.write(fd, b"\0" * 4096) > 0:
                pass
        except OSError:
            pass
        os.close(fd)
        check_all(full, False, "full 64 KiB tmpfs")
    finally:
        subprocess.run(["umount", full])
else:
    print("full 64 KiB tmpfs: skipped (cannot mount a tmpfs here)")

for failure in failures:
    print("FAIL:", failure)
sys.exit(1 if failures else 0)
