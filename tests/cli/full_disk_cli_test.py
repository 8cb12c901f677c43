"""A full disk, injected into every subcommand that writes: one error line naming what could
not be written, exit 3 (the machine's, not the user's), and no half-written report, trace or
step file left where the user looks for one.

Two injections: a file size limit of 0 (RLIMIT_FSIZE, with SIGXFSZ ignored, so a write fails
with EFBIG), always; and a real full file system, a 64 KiB tmpfs filled to its last byte (a
write fails with ENOSPC), where this process may mount one (root, a kernel that allows it);
otherwise that half says skipped.

usage: full_disk_cli_test.py MAMBACHECK WORK_DIR SOURCE_DIR
"""
import glob
import os
import resource
import shutil
import signal
import subprocess
import sys

MC, WORK, SOURCE = sys.argv[1], sys.argv[2], sys.argv[3]
TRACE = os.path.join(SOURCE, "scenarios/library/a-decode-crossing-each-acceptance.jsonl")
failures = []


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


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
subprocess.run([MC, "export", "--cases", "1", "--max-size", "5", "--out",
                os.path.join(WORK, "case")], check=True, capture_output=True)

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
