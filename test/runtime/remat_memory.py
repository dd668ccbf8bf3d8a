#!/usr/bin/env python3
"""What each rematerialization policy saves, measured: a GPT of 4 layers,
width 256, context 128 and batch 8 (loom-gen), whose activations without
recomputation exceed 64 MiB, compiled with --remat=none, selective and
full and run for 2 steps on one rank:

- the report's activation peak falls from none to selective to full;
- the runtime allocator's high-water mark falls by the report's
  activations (each policy's drop from none within 5% of none's
  activations);
- the process's resident high-water mark (getrusage, measured by the
  operating system, not the allocator) falls by the same within 5% of
  none's activations (skipped under the sanitizers, whose allocator adds
  shadow memory to every allocation)."""

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loomtest import RUN_ENV, Checks  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--loomc", required=True)
parser.add_argument("--loom-gen", required=True)
args = parser.parse_args()

work = tempfile.mkdtemp(prefix="loom-remat-memory-")
model = os.path.join(work, "gpt.mlir")
subprocess.run([sys.executable, args.loom_gen, "--layers", "4", "--d-model", "256",
                "--heads", "4", "--context", "128", "--vocab", "256", "--batch", "8",
                "-o", model], check=True)
SANITIZED = "ASAN_OPTIONS" in os.environ
check = Checks()

reported, measured, resident = {}, {}, {}
for policy in ("none", "selective", "full"):
    exe = os.path.join(work, policy)
    subprocess.run([args.loomc, model, f"--remat={policy}", "--report-json", exe + ".json",
                    "-o", exe], check=True)
    reported[policy] = json.load(open(exe + ".json"))["memory_per_rank_bytes"]["activations_peak"]
    subprocess.run([exe, "--steps", "2", "--metrics", exe + ".jsonl"], check=True,
                   capture_output=True, env=RUN_ENV)
    row = json.loads(open(exe + ".jsonl").read().splitlines()[-1])
    measured[policy], resident[policy] = row["peak_bytes"], row["max_rss_bytes"]
    print(f"--remat={policy}: reported activations {reported[policy]}, allocator peak "
          f"{measured[policy]}, resident high-water {resident[policy]} bytes")

none = reported["none"]
check("none's activations exceed 64 MiB", none > 64 * 2**20, f"{none / 2**20:.1f} MiB")
check("the reported activations fall from none to selective to full",
      reported["none"] > reported["selective"] > reported["full"], f"{reported}")
for policy in ("selective", "full"):
    want = reported["none"] - reported[policy]
    got = measured["none"] - measured[policy]
    check(f"{policy}: the allocator's peak falls by the report's activations",
          abs(got - want) <= 0.05 * none, f"{got} vs {want} bytes")
    if not SANITIZED:
        got = resident["none"] - resident[policy]
        check(f"{policy}: the resident high-water falls by the report's activations",
              abs(got - want) <= 0.05 * none,
              f"{got} vs {want} bytes ({(got - want) / none:+.1%} of none's activations)")
check.finish()
