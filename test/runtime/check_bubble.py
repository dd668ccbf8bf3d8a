"""Runs a pipeline schedule with synthetic stages of fixed duration
(loomrt-pipeline-test) and compares each rank's bubble as its trace
measures it, (step span - busy time) / step span with the busy time the
sum of its action spans, with the bubble the compile-time simulation
predicts: they must agree within 10% (relative) for every rank."""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ACTION = re.compile(r"^\d+[FBIW]\d+$")


def measure(trace_path):
    with open(trace_path) as f:
        events = json.load(f)["traceEvents"]
    step = [e for e in events if e.get("name") == "step" and e.get("ph") == "X"]
    busy = sum(e["dur"] for e in events
               if e.get("ph") == "X" and ACTION.match(e.get("name", "")))
    span = step[0]["dur"]
    return (span - busy) / span


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--program", required=True)
    ap.add_argument("--mpirun", required=True)
    ap.add_argument("--schedule", required=True)
    ap.add_argument("--pp", type=int, required=True)
    ap.add_argument("--micro-batches", type=int, required=True)
    ap.add_argument("--virtual-stages", type=int, default=1)
    ap.add_argument("--unit-ms", type=float, default=20.0)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1",
                   LOOMRT_TRACE=os.path.join(tmp, "trace.%r.json"))
        out = subprocess.run(
            a.mpirun.split() + ["-n", str(a.pp), a.program, a.schedule,
                                str(a.pp), str(a.micro_batches),
                                str(a.virtual_stages), str(a.unit_ms)],
            env=env, capture_output=True, text=True, timeout=300)
        if out.returncode:
            print(out.stdout, out.stderr)
            return 1
        simulated = {int(r): float(b) for r, b in
                     re.findall(r"simulated rank (\d+) bubble ([0-9.]+)", out.stdout)}
        worst = 0.0
        for r in range(a.pp):
            measured = measure(os.path.join(tmp, f"trace.{r}.json"))
            error = abs(measured - simulated[r]) / simulated[r]
            worst = max(worst, error)
            print(f"{a.schedule} pp={a.pp} m={a.micro_batches} v={a.virtual_stages} "
                  f"rank {r}: simulated bubble {simulated[r]:.4f}, "
                  f"measured {measured:.4f} ({100 * error:.1f}% apart)")
        if worst > 0.10:
            print(f"FAIL: measured and simulated bubbles {100 * worst:.1f}% apart")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
