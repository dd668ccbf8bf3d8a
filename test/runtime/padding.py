#!/usr/bin/env python3
"""Uneven splits in padded blocks: a vocabulary that does not divide by tp
(Megatron-LM's vocab-parallel embedding, head and cross-entropy over a
padded vocabulary) and ZeRO shards of dimensions that do not divide by dp
(FSDP's padded shards).

Model: the parity GPT with a vocabulary of 255 rows (a multiple of neither
2, 3 nor 4), trained for 6 steps. Parity with the single rank of the same
global batch (losses within 1e-5 + 1e-4 |loss|, final parameters, exported
whole and unpadded, within 1e-4 relative): tp=2, tp=4 and dp=2 x tp=2 with
AdamW and dropout (the held-out losses too), tp=4 from --init-from of the
reference's final parameters, dp=2 x tp=2 with ZeRO-3, tp=2 with sequence
parallelism, pp=2 x tp=2 with 4 micro-batches, pp=2 x dp=2 x tp=2 with 2,
tp=4 with SGD and a clip norm small enough
that clipping changes the losses (a norm that counted padding would show);
ZeRO stages 1-3 on dp=3 (batch 6), where the width 16 and the MLP's 32 do
not divide, with SGD and that clip norm, and stage 3 with AdamW.

Layout, read in the rank programs and the report: at tp=4 the table is
stored as blocks of ceil(255 / 4) = 64 rows and the report states the
padding; the cross-entropy reads logits whose padding is filled with the
lowest float (no padded class enters the softmax); at dp=3 with ZeRO-3
every parameter is stored as a block, the report's parameter bytes per rank
equal the sum over the parameters of their padded blocks (a formula from
the shapes), and it lists each padded dimension."""

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loomtest import (Checks, MPIRUN, RUN_ENV, build_rank_program, compare_training,  # noqa: E402
                      read_safetensors)

STEPS = 6
SEED = 5
VOCAB = 255

parser = argparse.ArgumentParser()
parser.add_argument("--loomc", required=True)
parser.add_argument("--loom-gen", required=True)
args = parser.parse_args()

work = tempfile.mkdtemp(prefix="loom-padding-")
check = Checks()


def generate(name, *extra):
    path = os.path.join(work, name + ".mlir")
    subprocess.run([sys.executable, args.loom_gen, "--preset", "parity", "--heads", "4",
                    "--vocab", str(VOCAB), *extra, "-o", path], check=True)
    return path


def build(name, model, loomc_args):
    return build_rank_program(args.loomc, work, name, model, loomc_args)


def run(name, exe, ranks, extra=()):
    metrics = os.path.join(work, name + ".%r.jsonl")
    exported = os.path.join(work, name + ".safetensors")
    cmd = [exe, "--steps", str(STEPS), "--seed", str(SEED), "--metrics", metrics,
           "--timeout", "120", "--eval-every", "3", "--export", exported, *extra]
    if ranks > 1:
        cmd = MPIRUN + ["-n", str(ranks)] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, env=RUN_ENV)
    if r.returncode:
        sys.exit(f"{name} failed:\n{r.stdout}{r.stderr}")
    with open(metrics.replace("%r", "0")) as f:
        rows = [json.loads(line) for line in f]
    return ([row["loss"] for row in rows], read_safetensors(exported),
            [row["eval_loss"] for row in rows if "eval_loss" in row])


def compare(label, got, ref):
    compare_training(check, label, STEPS, got[:2], ref[:2])
    worst = max((abs(a - b) / (1e-5 + 1e-4 * abs(b)) for a, b in zip(got[2], ref[2])),
                default=math.inf)
    check(f"{label}: held-out losses", len(got[2]) == len(ref[2]) == 2 and worst <= 1.0,
          f"{len(got[2])} evaluations, worst / tolerance {worst:.3g}")
    check(f"{label}: wte exported unpadded", got[1]["wte"].shape == (VOCAB, 16),
          f"{got[1]['wte'].shape}")


def stored_shape(program, name):
    m = re.search(rf'train.param "{name}"[^\n]*: tensor<([\dx]+)xf32>', program)
    return [int(d) for d in m.group(1).split("x")]


def sgd_model(name, clip):
    return generate(name, "--optimizer", "sgd", "--momentum", "0", "--weight-decay", "0",
                    "--lr", "0.5", "--warmup", "0", "--decay", "constant",
                    "--clip", str(clip), "--batch", "6")


# -- A vocabulary of 255 over tp ------------------------------------------
adamw = generate("adamw", "--dropout", "0.1", "--batch", "8")
ref = run("ref", build("ref", adamw, [])[0], 1)

exe, program, report = build("tp4", adamw, ["--mesh", "tp=4"])
check("tp=4: the table stored as blocks of ceil(255 / 4) rows", stored_shape(program, "wte") == [64, 16],
      f"{stored_shape(program, 'wte')}")
padding = report["memory_per_rank_bytes"]["padding"]
check("tp=4: the report states the padding",
      padding == [{"tensor": "wte", "dim": 0, "size": VOCAB, "blocks": 4, "block": 64}],
      json.dumps(padding))
filled = re.findall(r"dist.fill_padding %\S+ over \[\"tp\"\] dim 2 size 255 value (-3.40\d*E\+38)", program)
check("tp=4: the cross-entropy reads logits whose padding is the lowest float", len(filled) == 1,
      f"{len(filled)} fills")
# Elsewhere the padding is zero by construction: the cross-entropy's and the
# lookup's gradients, the products of them, their sum for the norm, and the
# tied table the head's backward contracts, a stored parameter whose update
# reads a gradient with zero padding (so it stays as initialized, zero).
fills = re.findall(r"dist.fill_padding (%\S+) over", program)
check("tp=4: fills only where no fact proves the padding zero", len(fills) == 1,
      f"{len(fills)} fills (the logits')")
compare("tp=4", run("tp4", exe, 4), ref)
compare("tp=2", run("tp2", build("tp2", adamw, ["--mesh", "tp=2"])[0], 2), ref)
compare("dp=2 x tp=2", run("dp2tp2", build("dp2tp2", adamw, ["--mesh", "dp=2,tp=2"])[0], 4), ref)

exe, program, _ = build("dp2tp2-z3", adamw, ["--mesh", "dp=2,tp=2", "--zero=3"])
check("dp=2 x tp=2 ZeRO-3: the table's padded tp blocks split over dp as well",
      stored_shape(program, "wte") == [128, 8], f"{stored_shape(program, 'wte')}")
compare("dp=2 x tp=2 ZeRO-3", run("dp2tp2-z3", exe, 4), ref)
compare("tp=2 sequence-parallel",
        run("tp2sp", build("tp2sp", adamw, ["--mesh", "tp=2", "--sequence-parallel"])[0], 2), ref)
ref_m4 = run("ref-m4", build("ref-m4", adamw, ["--micro-batches=4"])[0], 1)
compare("pp=2 x tp=2 M=4",
        run("pp2tp2", build("pp2tp2", adamw, ["--mesh", "pp=2,tp=2", "--micro-batches=4"])[0], 4),
        ref_m4)
ref_m2 = run("ref-m2", build("ref-m2", adamw, ["--micro-batches=2"])[0], 1)
compare("pp=2 x dp=2 x tp=2 M=2 (8 ranks)",
        run("pp2dp2tp2", build("pp2dp2tp2", adamw, ["--mesh", "pp=2,dp=2,tp=2",
                                                    "--micro-batches=2"])[0], 8),
        ref_m2)

# From the reference's final parameters (255 rows, loaded into padded blocks),
# tp=4 trains on as the single rank does.
init = os.path.join(work, "ref.safetensors")
ref_on = run("ref-on", os.path.join(work, "ref"), 1, ["--init-from", init])
compare("tp=4 from --init-from", run("tp4-on", exe, 4, ["--init-from", init]), ref_on)

# -- SGD with clipping, and ZeRO's padded shards over dp=3 -------------------
sgd = sgd_model("sgd", 0.05)
sgd_ref = run("sgd-ref", build("sgd-ref", sgd, [])[0], 1)
free = run("sgd-free", build("sgd-free", sgd_model("sgd-free", 0), [])[0], 1)
check("clipping changes the losses", all(a != b for a, b in zip(sgd_ref[0][1:], free[0][1:])),
      f"final loss {sgd_ref[0][-1]:.5f} clipped, {free[0][-1]:.5f} not")
compare("sgd tp=4", run("sgd-tp4", build("sgd-tp4", sgd, ["--mesh", "tp=4"])[0], 4), sgd_ref)

shapes = {}
with open(sgd) as f:
    for name, dims in re.findall(r'train.param "(\w+)" [^\n]*: tensor<([\dx]+)xf32>', f.read()):
        shapes[name] = [int(d) for d in dims.split("x")]
stacked = {name for name, s in shapes.items() if len(s) >= 2 and s[0] == 8 and name != "wpe"}


def zero_block(name, n=3):
    """ZeRO's block of a parameter over n ranks: the first dimension of a
    layer's slice that divides, else the largest, in blocks of ceil(size / n)."""
    s = shapes[name]
    dims = range(1 if name in stacked else 0, len(s))
    d = next((d for d in dims if s[d] % n == 0), None)
    if d is None:
        d = max(dims, key=lambda d: (s[d], -d))
    block = list(s)
    block[d] = -(-s[d] // n)
    return d, block


padded_dims = sorted((name, zero_block(name)[0]) for name, s in shapes.items()
                     if s[zero_block(name)[0]] % 3)
for stage in (1, 2, 3):
    exe, program, report = build(f"sgd-z{stage}", sgd, ["--mesh", "dp=3", f"--zero={stage}"])
    if stage == 3:
        blocks = {name: stored_shape(program, name) for name in shapes}
        wrong = [n for n in shapes if blocks[n] != zero_block(n)[1]]
        check("dp=3 ZeRO-3: every parameter stored as its padded block", not wrong,
              f"{len(shapes) - len(wrong)} of {len(shapes)}" + (f", not {wrong}" if wrong else ""))
        formula = 4 * sum(math.prod(zero_block(n)[1]) for n in shapes)
        check("dp=3 ZeRO-3: the report's parameter bytes per rank", report["memory_per_rank_bytes"]["parameters"] == formula,
              f"{report['memory_per_rank_bytes']['parameters']} vs {formula}")
        fills = program.count("dist.fill_padding")
        check("dp=3 ZeRO-3: no fill before the norm (reduce-scattered blocks pad with zeros)",
              fills == 0, f"{fills} fills")
        listed = sorted((p["tensor"], p["dim"]) for p in report["memory_per_rank_bytes"]["padding"])
        check("dp=3 ZeRO-3: the report lists each padded dimension", listed == padded_dims,
              f"{len(listed)} of {len(padded_dims)}")
    compare(f"sgd dp=3 ZeRO-{stage}", run(f"sgd-z{stage}", exe, 3), sgd_ref)

adamw6 = generate("adamw6", "--dropout", "0.1", "--batch", "6")
compare("adamw dp=3 ZeRO-3",
        run("adamw-z3", build("adamw-z3", adamw6, ["--mesh", "dp=3", "--zero=3"])[0], 3),
        run("adamw6-ref", build("adamw6-ref", adamw6, [])[0], 1))

check.finish()
