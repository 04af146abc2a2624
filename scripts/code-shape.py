#!/usr/bin/env python3
"""The engine core's shape, as issue 38 measured it: Job::Impl's data
members and methods, and the longest functions of libxfer, daemon and
xferctl (lines from a definition to its closing brace at column 0).

    python3 scripts/code-shape.py [REV]     # REV: a commit (default: the work tree)

A rough reader, not a compiler: a member declaring several names counts
each; a brace in a character literal can lengthen a function it is in."""
import re
import subprocess
import sys


def read(rev, path):
    if rev:
        return subprocess.run(["git", "show", f"{rev}:{path}"], capture_output=True, text=True).stdout
    with open(path) as f:
        return f.read()


def files(rev):
    args = ["git", "ls-tree", "-r", "--name-only", rev] if rev else ["git", "ls-files"]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout.split()
    return [p for p in out if p.endswith(".cpp") and p.startswith(("libxfer/", "daemon/", "tools/xferctl/"))]


def impl_members(text):
    a = text.index("struct Job::Impl")
    i = text.index("{", a)
    depth, j = 0, i
    while True:
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            break
        j += 1
    flat, d = [], 0
    for ch in text[i + 1:j]:  # nested bodies (inline functions, structs) out
        if ch == "{":
            d += 1
            if d == 1:
                flat.append(";")
            continue
        if ch == "}":
            d -= 1
            continue
        if d == 0:
            flat.append(ch)
    fields = methods = 0
    for st in "".join(flat).split(";"):
        st = " ".join(re.sub(r"//[^\n]*", "", st).split())
        if not st or st.startswith(("public", "struct", "using")):
            continue
        if "(" in st and not re.search(r"=\s*[^=]*\(", st) and not re.match(r"(EventSource|Discovery)\b", st):
            methods += 1
        else:
            fields += st.split(">")[-1].count(",") + 1
    return fields, methods


def functions(text):
    lines = text.split("\n")
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"^[A-Za-z][^;#]*?([\w:~]+)\(", line)
        if m and not line.rstrip().endswith(";"):
            j = i
            while j < len(lines) and "{" not in lines[j] and not lines[j].rstrip().endswith(";"):
                j += 1
            if j < len(lines) and "{" in lines[j]:
                k = j
                while k < len(lines) and not (k > j and lines[k].startswith("}")) and not (
                        k == j and lines[k].rstrip().endswith("}")):
                    k += 1
                out.append((k - i + 1, m.group(1)))
                i = k + 1
                continue
        i += 1
    return out


def main():
    rev = sys.argv[1] if len(sys.argv) > 1 else ""
    f, m = impl_members(read(rev, "libxfer/engine/job_impl.h"))
    print(f"Job::Impl: {f} fields, {m} methods")
    print(f"libxfer/engine/part_file.cpp: {read(rev, 'libxfer/engine/part_file.cpp').count(chr(10))} lines")
    longest = []
    for p in files(rev):
        longest += [(n, name, p) for n, name in functions(read(rev, p))]
    print("longest functions:")
    for n, name, p in sorted(longest, reverse=True)[:8]:
        print(f"  {n:4d}  {name}  ({p})")


if __name__ == "__main__":
    main()
