#!/usr/bin/env python3
"""The bf16 report read from the rank program, against formulas written
here from the model's parameter shapes.

--zero-reports R0 R1 R2 R3 (one data axis of N ranks, --mesh dp=N): model
states per rank of P = 2 (bf16 copies), G = 4 (fp32 gradients), K = 12
(fp32 masters and AdamW's two moments) bytes per parameter, split by ZeRO
as the ZeRO paper splits them: stage 1 K / N, stage 2 (G + K) / N, stage 3
(P + G + K) / N, to the byte (the preset's dimensions divide by N).
"""
import argparse
import json
import math
import re
import sys

p = argparse.ArgumentParser()
p.add_argument("--model", required=True)
p.add_argument("--zero-reports", nargs=4)
p.add_argument("--dp", type=int)
a = p.parse_args()

shapes = {name: [int(d) for d in dims.split("x")] for name, dims in
          re.findall(r'train.param "(\w+)" [^\n]*: tensor<([\dx]+)xf32>', open(a.model).read())}
n = sum(math.prod(s) for s in shapes.values())
fails = 0


def check(label, ok, detail):
    global fails
    print(f"{label}: {detail} {'ok' if ok else 'FAIL'}")
    fails += not ok


if a.zero_reports:
    N = a.dp
    for stage, path in enumerate(a.zero_reports):
        m = json.load(open(path))["memory_per_rank_bytes"]
        want = {"parameters": 2 * n // (N if stage >= 3 else 1),
                "gradients": 4 * n // (N if stage >= 2 else 1),
                "master_parameters": 4 * n // (N if stage >= 1 else 1),
                "optimizer_state": 8 * n // (N if stage >= 1 else 1)}
        got = {k: m[k] for k in want}
        total = sum(want.values())
        check(f"ZeRO-{stage} over dp={N}: model states", got == want and m["model_states"] == total,
              f"{m['model_states'] / 1e9:.2f} GB, formula {total / 1e9:.2f} GB "
              f"({total / n:.4g} bytes per parameter)")

print(f"{fails} failed")
sys.exit(1 if fails else 0)
