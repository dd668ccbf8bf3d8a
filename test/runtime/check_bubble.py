"""Runs a pipeline schedule with synthetic stages of fixed duration
(loomrt-pipeline-test) and compares each rank's bubble as its trace
measures it, (step span - busy time) / step span with the busy time the
sum of its action spans, with the bubble the compile-time simulation
predicts: they must agree within 10% (relative) for every rank. The peak
of micro-batches' activations each rank held, measured by the runtime's
memory high-water mark, must equal the simulation's; on the first stage
it is m for GPipe and at most p for the one-forward-one-backward
schedules."""
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
        simulated = {int(r): float(b) for r, b, _ in
                     re.findall(r"simulated rank (\d+) bubble ([0-9.]+) peak (\d+)", out.stdout)}
        simulated_peak = {int(r): int(p) for r, _, p in
                          re.findall(r"simulated rank (\d+) bubble ([0-9.]+) peak (\d+)", out.stdout)}
        measured_peak = {int(r): int(p) for r, p in
                         re.findall(r"measured rank (\d+) peak (\d+)", out.stdout)}
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
        for r in range(a.pp):
            print(f"{a.schedule} rank {r}: held at most {measured_peak[r]} "
                  f"micro-batches' activations (simulated {simulated_peak[r]})")
            if measured_peak[r] != simulated_peak[r]:
                print("FAIL: measured and simulated peaks differ")
                return 1
        first = measured_peak[0]
        if a.schedule == "gpipe" and first != a.micro_batches:
            print(f"FAIL: GPipe's first stage held {first}, not m = {a.micro_batches}")
            return 1
        if a.schedule in ("1f1b", "zb") and first > a.pp:
            print(f"FAIL: {a.schedule}'s first stage held {first} > p = {a.pp}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
