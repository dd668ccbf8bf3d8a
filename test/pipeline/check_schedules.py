"""Checks the simulated bubble of every built-in schedule against its
closed form over a grid of pipeline ranks p, micro-batches m and virtual
stages v (unit costs: a rank's forward, backward-input and backward-weight
work each cost 1): GPipe and 1F1B (p-1)/(m+p-1), interleaved 1F1B
(p-1)/(v*m+p-1), ZB-H1 below 1F1B (its closed form (p-1)/(3m+p-1) when the
three parts cost the same); and stage 0's peak of held activations: m for
GPipe, min(p, m) for 1F1B."""
import argparse
import re
import subprocess
import sys


def run(tool, schedule, p, m, v=1):
    out = subprocess.run([tool, f"--schedule={schedule}", f"--pp={p}",
                          f"--micro-batches={m}", f"--virtual-stages={v}"],
                         check=True, capture_output=True, text=True).stdout
    bubble = float(re.search(r"^bubble ([0-9.]+) \(worst rank\)", out, re.M).group(1))
    peak = int(re.search(r"stage 0 holds at most (\d+)", out).group(1))
    return bubble, peak


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--loom-schedule", required=True)
    a = ap.parse_args()
    failures, checked = [], 0

    def expect(what, got, want, tol=5e-5):
        nonlocal checked
        checked += 1
        if abs(got - want) > tol:
            failures.append(f"{what}: got {got}, want {want}")

    for p in (2, 3, 4, 8):
        for m in (p, 2 * p, 3 * p, 4 * p + 1):
            g, gpeak = run(a.loom_schedule, "gpipe", p, m)
            o, opeak = run(a.loom_schedule, "1f1b", p, m)
            z, _ = run(a.loom_schedule, "zb", p, m)
            expect(f"gpipe p={p} m={m} bubble", g, (p - 1) / (m + p - 1))
            expect(f"1f1b p={p} m={m} bubble", o, (p - 1) / (m + p - 1))
            expect(f"zb p={p} m={m} bubble", z, (p - 1) / (3 * m + p - 1))
            if not z < o:
                failures.append(f"zb p={p} m={m}: bubble {z} not below 1f1b's {o}")
            expect(f"gpipe p={p} m={m} stage-0 peak", gpeak, m, 0)
            expect(f"1f1b p={p} m={m} stage-0 peak", opeak, min(p, m), 0)
            if m % p == 0:
                for v in (2, 3):
                    i, _ = run(a.loom_schedule, "interleaved", p, m, v)
                    expect(f"interleaved p={p} m={m} v={v} bubble", i,
                           (p - 1) / (v * m + p - 1))
    for f in failures:
        print("FAIL:", f)
    print(f"{checked} checks, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
