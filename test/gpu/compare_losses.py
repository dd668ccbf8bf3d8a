#!/usr/bin/env python3
"""Compares two runs' per-step losses (metrics JSONL): every step within
`rtol` relative. Prints the worst step."""

import json
import sys


def losses(path):
    return [json.loads(line)["loss"] for line in open(path) if line.strip()]


def main():
    a, b, rtol = losses(sys.argv[1]), losses(sys.argv[2]), float(sys.argv[3])
    if len(a) != len(b) or not a:
        print(f"step counts differ: {len(a)} vs {len(b)}")
        return 1
    worst = max(range(len(a)), key=lambda i: abs(a[i] - b[i]) / abs(a[i]))
    err = abs(a[worst] - b[worst]) / abs(a[worst])
    print(f"worst step {worst}: {a[worst]:.7f} vs {b[worst]:.7f} "
          f"(relative {err:.2e}, bound {rtol:g})")
    if err > rtol:
        return 1
    print(f"{len(a)} steps agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
