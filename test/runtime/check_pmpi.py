#!/usr/bin/env python3
"""Reads the output of loomrt-collectives-test under the PMPI wrapper: every
rank reports no failures, and the bytes the wrapper counted below the
runtime equal the bytes of the algorithms' formulas (which the program has
checked against the runtime's own counters)."""
import re
import sys

ranks = int(sys.argv[1])
text = sys.stdin.read()
pmpi = {int(r): int(b) for r, b in re.findall(r"pmpi: rank (\d+) sent (\d+) bytes", text)}
runtime = {int(r): (int(b), int(f)) for r, b, f in
           re.findall(r"^rank (\d+) sent (\d+) bytes \((\d+) failures\)", text, re.M)}
ok = len(pmpi) == ranks and len(runtime) == ranks
for r in range(ranks):
    want, failures = runtime.get(r, (-1, 1))
    got = pmpi.get(r, -2)
    print(f"rank {r}: pmpi {got} formula {want} failures {failures}")
    ok &= got == want and failures == 0
print("ok" if ok else "FAIL")
sys.exit(0 if ok else 1)
