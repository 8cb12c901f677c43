#!/usr/bin/env python3
"""Real-browser check of `mambacheck show`: headless Chromium renders three reports (a tiny
kernel counterexample written by a fuzz campaign against a mutant, a production-size grid case
from `export --focus gpu-grid`, and an engine counterexample: a scenario of the library replayed
against a kernel mutant) to PNG, with no console message (errors included), and the page text
holds the expected labels. Exit 77 (ctest SKIP_RETURN_CODE) where no Chromium can start: a
skip, never a pass.

usage: browser_check.py MAMBACHECK SOURCE_DIR WORK_DIR [--docs DIR]  (--docs: copy the PNGs)
"""
import os
import shutil
import subprocess
import sys

SKIP = 77
# The launch kinds of the seed's runner: the pictures of docs/show.md were drawn among them.
SEED_KINDS = "postprocess,postprocess_align,precopy,preprocess_align,batch_copy"


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def browser(exe, *args):
    return subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--enable-logging=stderr", "--v=0", *args],
                          capture_output=True, text=True, timeout=120)


def run(cmd, expect_rc):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != expect_rc:
        sys.exit(f"{' '.join(cmd)}: exit {r.returncode}, expected {expect_rc}\n{r.stdout}{r.stderr}")
    return r.stdout


def check_page(exe, html, png, labels, work):
    url = "file://" + os.path.abspath(html)
    shot = browser(exe, f"--screenshot={png}", "--window-size=1300,1500", url)
    if shot.returncode != 0 or not os.path.exists(png) or os.path.getsize(png) < 10000:
        sys.exit(f"{html}: no screenshot (exit {shot.returncode}): {shot.stderr[-2000:]}")
    dom = browser(exe, "--dump-dom", url)
    if dom.returncode != 0:
        sys.exit(f"{html}: --dump-dom failed: {dom.stderr[-2000:]}")
    console = [line for line in (shot.stderr + dom.stderr).splitlines() if "CONSOLE" in line]
    if console:
        sys.exit(f"{html}: console messages:\n" + "\n".join(console))
    for label in labels:
        if label not in dom.stdout:
            sys.exit(f"{html}: the rendered page lacks '{label}'")
    size = os.path.getsize(html)
    print(f"ok {html} ({size // 1024} KiB) -> {png}")
    return size


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    mambacheck, source, work = sys.argv[1:4]
    docs = sys.argv[5] if len(sys.argv) > 5 and sys.argv[4] == "--docs" else None
    exe = chromium()
    if exe is None:
        print("skipped: no chromium on PATH (scripts/setup installs it)")
        return SKIP
    probe = browser(exe, "--dump-dom", "about:blank")
    if probe.returncode != 0 or "<html" not in probe.stdout:
        print(f"skipped: chromium does not start here: {probe.stderr[-500:]}")
        return SKIP
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)

    # 1. A tiny kernel counterexample, with the report.html its campaign wrote (first found at
    # case 8 among the seed's kinds).
    out = run([mambacheck, "fuzz", "--backend", "host", "--mutant", "ds_tail_ignores_bias",
               "--kinds", SEED_KINDS,
               "--cases", "200", "--seed", "1", "--out", f"{work}/kernel"], 1)
    kernel = f"{work}/kernel/kernel-seed8/report.html"
    if f"picture: {kernel}" not in out:
        sys.exit(f"the campaign's message does not name {kernel}:\n{out}")
    check_page(exe, kernel, f"{work}/show-kernel.png",
               ["kernel counterexample: postprocess_align", "block tables and decisions",
                "expected: col", "actual: col", "Differing state blocks", "Per-request arrays",
                "legend", "the null block (0)", "pad slot (-1)", "signature",
                "failed 5 of 5 runs (deterministic)",
                "mambacheck case " + f"{work}/kernel/kernel-seed8 --backend host --mutant "
                "ds_tail_ignores_bias --check"], work)

    # 2. A production-size grid case, drawn against a mutant that loses one token row (among
    # the seed's kinds: a precopy of 285 rows).
    run([mambacheck, "export", "--focus", "gpu-grid", "--cases", "1", "--seed", "3", "--kinds",
         SEED_KINDS, "--out", f"{work}/grid"], 0)
    grid = f"{work}/grid.html"
    run([mambacheck, "show", f"{work}/grid/case-000000", "--mutant", "conv_one_row_short", "--out",
         grid], 0)
    size = check_page(exe, grid, f"{work}/show-grid.png",
                      ["precopy: block tables and decisions", "285 batch rows", "rows like this",
                       "aliases a block in two columns", "token row", "channel",
                       "more layers like this"], work)
    if size > 4 * 1024 * 1024:
        sys.exit(f"{grid}: {size} bytes, over 4 MiB")

    # 3. An engine counterexample: a library scenario replayed against a kernel mutant.
    engine = f"{work}/engine.html"
    run([mambacheck, "show", f"{source}/scenarios/library/e-ds-with-bias.jsonl", "--mutant",
         "ds_tail_ignores_bias", "--out", engine], 0)
    check_page(exe, engine, f"{work}/show-engine.png",
               ["engine run e-ds-with-bias.jsonl", "Timeline", "first difference",
                "MISMATCH at step 2", "step 2 (the first difference)", "Byte view",
                "group 0 layer 0 state conv (tensor 0), block 2", "steppanel on",
                "--kernel-mutant ds_tail_ignores_bias"], work)

    if docs:
        for name in ("show-kernel.png", "show-grid.png", "show-engine.png"):
            shutil.copy(f"{work}/{name}", f"{docs}/{name}")
    print("3 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
