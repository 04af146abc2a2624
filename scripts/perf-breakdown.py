#!/usr/bin/env python3
"""Where a client's CPU went, from perf.data files (xfer-bench --profile).

Each sample is counted once: under the system call it was in (any
__x64_sys_* frame of its call chain), else as a page fault, an interrupt or
a scheduler exit when its top frame is in the kernel, else under the library
of its top frame. Prints a markdown table, one column per file, with sample
counts and shares.

  scripts/perf-breakdown.py OUT/logs/html-x0.2-s1-seed1-2-r1.perf.data OUT/logs/...-3-r1.perf.data [--top 25]
"""
import argparse
import collections
import os
import re
import subprocess
import sys


def classify(frames):
    for f in frames:
        m = re.search(r"__(?:x64|ia32)_sys_(\w+)", f)
        if m:
            return "sys " + m.group(1)
    top = frames[0]
    if "kernel.kallsyms" in top:
        chain = " ".join(frames)
        if "exc_page_fault" in chain:
            return "kernel: page fault"
        if "irq" in chain:
            return "kernel: interrupt / softirq"
        if "exit_to_user_mode" in chain or "schedule" in chain:
            return "kernel: scheduler, return to user"
        return "kernel: " + (top.split()[1] if len(top.split()) > 1 else "?")
    m = re.search(r"\(([^)]*)\)\s*$", top)
    return "user " + (os.path.basename(m.group(1)) if m else "?")


def breakdown(path):
    out = subprocess.run(["perf", "script", "-i", path, "-F", "ip,sym,dso", "--no-inline"],
                         capture_output=True, text=True, check=True).stdout
    counts, total = collections.Counter(), 0
    for block in out.split("\n\n"):
        frames = [l.strip() for l in block.strip().split("\n") if l.strip()]
        if frames:
            total += 1
            counts[classify(frames)] += 1
    return counts, total


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    res = [breakdown(p) for p in a.files]
    keys = collections.Counter()
    for c, _ in res:
        keys.update(c)
    print("| where | " + " | ".join(f"{os.path.basename(p)} ({t} samples)" for p, (_, t) in zip(a.files, res)) + " |")
    print("|---|" + "---|" * len(res))
    for k, _ in keys.most_common(a.top):
        print(f"| {k} | " + " | ".join(f"{c[k]} ({100 * c[k] / max(t, 1):.1f}%)" for c, t in res) + " |")


if __name__ == "__main__":
    sys.exit(main())
