#!/usr/bin/env python3
"""Fails unless every Loom pass that loom-opt lists is run alone on a
FileCheck input by some test: a RUN line whose loom-opt command names that
pass and no other Loom pass (beside the tests that run it in a pipeline).

    check_passes_alone.py LOOM_OPT TEST_DIR [--also PASS]...
"""
import argparse
import pathlib
import re
import subprocess
import sys

PASS = r"(?:train|dist|loom)-[a-z-]+"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("loom_opt")
    ap.add_argument("tests")
    ap.add_argument("--also", action="append", default=[],
                    help="a pass to require beside loom-opt's (a self-test)")
    a = ap.parse_args()
    help_text = subprocess.run([a.loom_opt, "--help"], capture_output=True,
                               text=True, check=True).stdout
    passes = sorted(set(re.findall(r"^\s+--(%s)\s" % PASS, help_text, re.M))
                    | set(a.also))
    alone = {}
    for path in sorted(pathlib.Path(a.tests).rglob("*")):
        if path.suffix not in (".mlir", ".test") or "Output" in path.parts:
            continue
        for line in path.read_text(errors="replace").splitlines():
            m = re.search(r"RUN:\s*(?:not\s+)?loom-opt\s+(.*)", line)
            if not m:
                continue
            named = [p for p in re.findall(r"(?<![\w-])--?(%s)" % PASS,
                                           m.group(1)) if p in passes]
            if len(set(named)) == 1:
                alone.setdefault(named[0], path.name)
    missing = [p for p in passes if p not in alone]
    for p in passes:
        print(f"{p}: {alone.get(p, 'NOT RUN ALONE')}")
    print(f"{len(passes) - len(missing)} of {len(passes)} passes run alone")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
