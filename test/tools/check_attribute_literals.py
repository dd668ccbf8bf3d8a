#!/usr/bin/env python3
"""Fails when a C++ source outside dialects/dist spells a dist attribute's
name in a string literal: the passes reach the attributes the dist dialect
declares (DistOps.td, `discardableAttrs`) through its typed helpers.

    check_attribute_literals.py DISTOPS_TD ROOT...
"""
import pathlib
import re
import sys

SOURCES = {".cpp", ".h", ".cu", ".cuh", ".inc"}


def declared(td):
    text = pathlib.Path(td).read_text()
    block = re.search(r"discardableAttrs\s*=\s*\(ins(.*?)\);", text, re.S)
    if not block:
        sys.exit(f"{td}: no discardableAttrs")
    # Drop the comments, then take each `$name`.
    body = re.sub(r"//[^\n]*", "", block.group(1))
    names = re.findall(r"\$(\w+)", body)
    if not names:
        sys.exit(f"{td}: discardableAttrs lists nothing")
    return names


def literals(line):
    """The string literals of a line of C++ (comments dropped)."""
    out, i, n = [], 0, len(line)
    while i < n:
        if line.startswith("//", i):
            break
        if line[i] == '"':
            j = i + 1
            while j < n and line[j] != '"':
                j += 2 if line[j] == "\\" else 1
            out.append(line[i + 1:j])
            i = j + 1
        elif line[i] == "'":
            j = i + 1
            while j < n and line[j] != "'":
                j += 2 if line[j] == "\\" else 1
            i = j + 1
        else:
            i += 1
    return out


def main():
    td, roots = sys.argv[1], sys.argv[2:]
    names = declared(td)
    pattern = re.compile(r"(?<![#\w])dist\.(%s)\b" % "|".join(names))
    found = 0
    for root in roots:
        for path in sorted(pathlib.Path(root).rglob("*")):
            if path.suffix not in SOURCES or "dialects/dist" in path.as_posix():
                continue
            for number, line in enumerate(
                    path.read_text(errors="replace").splitlines(), 1):
                for literal in literals(line):
                    if pattern.search(literal):
                        print(f"{path}:{number}: {line.strip()}")
                        found += 1
    print(f"{len(names)} dist attributes declared; {found} spelled as "
          "string literals outside dialects/dist")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
