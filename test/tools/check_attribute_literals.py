#!/usr/bin/env python3
"""Fails when a C++ source outside a dialect's folder spells one of the
attribute names the dialect declares (`discardableAttrs` in its .td) in a
string literal: passes reach those attributes through the dialect's typed
helpers.

    check_attribute_literals.py --dialect TD... ROOT...
"""
import pathlib
import re
import sys

SOURCES = {".cpp", ".h", ".cu", ".cuh", ".inc"}


def declared(td):
    """The dialect's name and the attribute names it declares."""
    text = pathlib.Path(td).read_text()
    name = re.search(r'let name = "(\w+)";', text)
    if not name:
        sys.exit(f"{td}: no dialect name")
    block = re.search(r"discardableAttrs\s*=\s*\(ins(.*?)\);", text, re.S)
    if not block:
        sys.exit(f"{td}: no discardableAttrs")
    # Drop the comments, then take each `$name`.
    body = re.sub(r"//[^\n]*", "", block.group(1))
    names = re.findall(r"\$(\w+)", body)
    if not names:
        sys.exit(f"{td}: discardableAttrs lists nothing")
    return name.group(1), names


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
    args = sys.argv[1:]
    if not args or args[0] != "--dialect":
        sys.exit(__doc__)
    tds = []
    args = args[1:]
    while args and args[0].endswith(".td"):
        tds.append(args.pop(0))
    roots = args
    found = 0
    for td in tds:
        dialect, names = declared(td)
        home = pathlib.Path(td).resolve().parent
        pattern = re.compile(r"(?<![#\w])%s\.(%s)\b" % (dialect, "|".join(names)))
        spelled = 0
        for root in roots:
            for path in sorted(pathlib.Path(root).rglob("*")):
                if path.suffix not in SOURCES or home in path.resolve().parents:
                    continue
                for number, line in enumerate(
                        path.read_text(errors="replace").splitlines(), 1):
                    for literal in literals(line):
                        if pattern.search(literal):
                            print(f"{path}:{number}: {line.strip()}")
                            spelled += 1
        print(f"{len(names)} {dialect} attributes declared; {spelled} spelled "
              f"as string literals outside {home.parent.name}/{home.name}")
        found += spelled
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
