#!/usr/bin/env python3
"""Every source compiles on its own, not only in its unity batch (issue 56).

    python3 scripts/compile-alone.py BUILD_DIR [SUBSTRING ...]

The build compiles unity batches (scripts/build.sh: eight sources a batch),
in which a file can lean on an include its batch neighbour made and still
build. This reads BUILD_DIR/compile_commands.json, and for each batch
compiles each of its sources alone with the batch's own command
(-fsyntax-only: parsed and checked, no code). A SUBSTRING keeps only the
sources whose path holds it. Exit 1 naming each source that fails, with the
compiler's first lines; a warning fails it too (the build has none)."""
import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys

INCLUDE = re.compile(r'^#include "([^"]+)"', re.M)


def commands(build):
    """(source, argv, directory) for each source, batches split."""
    with open(os.path.join(build, "compile_commands.json")) as f:
        entries = json.load(f)
    out = []
    for e in entries:
        argv = e["arguments"] if "arguments" in e else shlex.split(e["command"])
        # Drop the output: -o FILE.
        args, skip = [], False
        for a in argv:
            if skip:
                skip = False
                continue
            if a == "-o":
                skip = True
                continue
            args.append(a)
        src = e["file"]
        if "/Unity/unity_" in src:
            with open(src) as f:
                members = INCLUDE.findall(f.read())
        else:
            members = [src]
        for m in members:
            out.append((m, [m if a == src else a for a in args] + ["-fsyntax-only"], e["directory"]))
    return out


def check(job):
    src, argv, cwd = job
    r = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    bad = r.returncode != 0 or "warning:" in r.stderr
    return src, bad, r.stderr


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    jobs = [j for j in commands(argv[1]) if len(argv) < 3 or any(s in j[0] for s in argv[2:])]
    failed = []
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as ex:
        for src, bad, err in ex.map(check, jobs):
            if bad:
                failed.append(src)
                lines = [l for l in err.splitlines() if "error" in l or "warning" in l]
                print(f"compile-alone: {src} does not compile on its own:\n  " + "\n  ".join(lines[:5]))
    print(f"compile-alone: {len(jobs)} sources, {len(failed)} that do not compile on their own")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
