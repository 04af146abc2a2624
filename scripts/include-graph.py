#!/usr/bin/env python3
"""The folders' include graph, held against the order they are meant to
layer in (issue 56): a folder may include its own files and those of the
folders below it, never one above it or beside it.

    python3 scripts/include-graph.py                 # the graph, the edges against the order, the cycles
    python3 scripts/include-graph.py --check DEBT    # exit 1 on an edge against the order DEBT does not list

DEBT (tests/layering-debt.txt) lists the edges against the order that the
tree has today, one `from -> to` a line: the walls still to build. The
check fails on any other such edge (a new one) and on a listed edge the
tree no longer has (take it off the list, so it cannot come back).

A header's folder is where its .cpp is (libxfer/include/xfer/engine.h is
engine's: libxfer/engine/engine.cpp); a header with no .cpp has its folder
in HOME below. A rough reader, not a compiler: it reads #include "..."
lines, conditional or not."""
import os
import re
import subprocess
import sys

# The order, lowest first; folders on one rung may not include each other.
# `model` is the rung the issue names for what every layer shares (the
# parameters, what a tuner observes, the options table); its headers live
# in include/xfer/ with no folder of their own yet.
ORDER = [
    ["util"],
    ["model"],
    ["dataset", "energy", "net", "cpu"],
    ["engine"],
    ["hla"],
    ["tune"],
    ["control"],
    ["protocol"],
    ["daemon", "tools"],
]
# Headers of include/xfer/ with no .cpp of the same name.
HOME = {
    "clock": "util",
    "faults": "util",
    "sqlite_stmt": "util",
    "stats": "util",
    "params": "model",
    "measures": "model",
    "tuner": "model",
    "energy": "energy",
    "hla": "hla",
    "interval_record": "engine",
    "part_names": "util",
    "kernel": "cpu",
}
RANK = {f: i for i, rung in enumerate(ORDER) for f in rung}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def tracked():
    """The sources of the four trees: git's list, or (no git checkout) the files there."""
    roots = ("libxfer/", "protocol/", "daemon/", "tools/")
    r = subprocess.run(["git", "ls-files"], capture_output=True, text=True)
    if r.returncode == 0:
        out = r.stdout.split()
    else:
        out = [os.path.relpath(os.path.join(d, f)) for root in roots for d, _, fs in os.walk(root) for f in fs]
    return sorted(p for p in out if p.endswith((".cpp", ".h")) and p.startswith(roots))


def homes(paths):
    """Header basename (include/xfer/X.h) -> folder."""
    cpp = {}
    for p in paths:
        parts = p.split("/")
        if parts[0] == "libxfer" and len(parts) == 3 and p.endswith(".cpp"):
            cpp.setdefault(os.path.splitext(parts[2])[0], parts[1])
    out = {}
    for p in paths:
        if p.startswith("libxfer/include/xfer/"):
            name = os.path.splitext(os.path.basename(p))[0]
            out[name] = HOME.get(name) or cpp.get(name)
            if out[name] is None:
                sys.exit(f"include-graph: {p} has no .cpp of its name and no entry in HOME: say which folder it is of")
    return out


def folder_of(path, home):
    parts = path.split("/")
    if parts[0] in ("protocol", "daemon", "tools"):
        return parts[0]
    if path.startswith("libxfer/include/xfer/"):
        return home[os.path.splitext(parts[-1])[0]]
    return parts[1]


# The include directories the CMake files give (target_include_directories),
# after the including file's own folder.
SEARCH = {
    "libxfer/": ["libxfer/include", "libxfer/engine", "libxfer/tune"],
    "protocol/": ["protocol"],
    "daemon/": ["daemon", "protocol"],
    "tools/xferctl/": ["protocol"],
    "tools/": ["tools/linkemu", "tools/bench", "tools/hla", "daemon", "protocol"],
}


def resolve(src, inc, paths):
    """The tracked file an include names, or None (a system or generated header)."""
    dirs = [os.path.dirname(src)]
    for prefix, extra in SEARCH.items():
        if src.startswith(prefix):
            dirs += extra
    dirs.append("libxfer/include")
    for d in dirs:
        p = os.path.normpath(os.path.join(d, inc))
        if p in paths:
            return p
    return None


def edges():
    paths = tracked()
    pset = set(paths)
    home = homes(paths)
    out = {}  # (from, to) -> [file:line, ...]
    for src in paths:
        a = folder_of(src, home)
        with open(src, errors="replace") as f:
            for n, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                dst = resolve(src, m.group(1), pset)
                if dst is None:
                    continue
                b = folder_of(dst, home)
                if a != b:
                    out.setdefault((a, b), []).append(f"{src}:{n}")
    return out


def against_order(a, b):
    return RANK[b] >= RANK[a]


def cycles(graph):
    """Strongly connected components of more than one folder (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    nodes = sorted({x for e in graph for x in e})
    succ = {n: sorted(b for (a, b) in graph if a == n) for n in nodes}

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in succ[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp, key=lambda f: RANK[f]))

    for v in nodes:
        if v not in index:
            visit(v)
    return out


def read_debt(path):
    debt = set()
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            a, _, b = line.partition("->")
            debt.add((a.strip(), b.strip()))
    return debt


def main(argv):
    graph = edges()
    bad = {e: v for e, v in graph.items() if against_order(*e)}
    if len(argv) == 3 and argv[1] == "--check":
        debt = read_debt(argv[2])
        new = sorted(set(bad) - debt)
        gone = sorted(debt - set(bad))
        for a, b in new:
            print(f"include-graph: {a} includes {b}, against the order ({', '.join(bad[(a, b)][:3])}); "
                  f"include a folder below, or move the code to where it belongs")
        for a, b in gone:
            print(f"include-graph: {a} -> {b} is listed in {argv[2]} but the tree no longer has it: take it off the list")
        if new or gone:
            return 1
        print(f"include-graph: {len(graph)} edges between folders, {len(bad)} against the order, all listed in {argv[2]}")
        return 0
    if len(argv) > 1:
        print(__doc__)
        return 2
    print("order (lowest first): " + " < ".join("{" + ", ".join(r) + "}" if len(r) > 1 else r[0] for r in ORDER))
    print(f"\n{len(graph)} edges between folders (includes):")
    for (a, b), where in sorted(graph.items(), key=lambda kv: (RANK[kv[0][0]], kv[0])):
        mark = "  AGAINST THE ORDER" if (a, b) in bad else ""
        print(f"  {a:8} -> {b:8} {len(where):3}{mark}   e.g. {where[0]}")
    cyc = cycles(graph)
    print(f"\n{len(bad)} edges against the order; {len(cyc)} cycles between folders" + (":" if cyc else ""))
    for c in cyc:
        print("  " + " <-> ".join(c))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
