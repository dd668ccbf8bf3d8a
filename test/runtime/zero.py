#!/usr/bin/env python3
"""ZeRO stages 0 to 3 (loomc --zero=N) on the parity GPT.

Parity: trained for 6 steps, each layout matches the single-rank run of the
same global batch (losses within 1e-5 + 1e-4 |loss|, final parameters within
1e-4 relative), with AdamW and dropout (the parity model) and with SGD and a
clip norm small enough that clipping changes every step (a wrong norm from
the shards would show): stages 0-3 on dp=4, stage 3 on dp=2 x tp=2, stage 2
on dp=2 with 4 micro-batches, stage 3 on pp=2 x dp=2 with 4 micro-batches.

Layout (the rank programs): from stage 1 every optimizer state is stored as
this rank's block over dp, from stage 3 every parameter; the norm is summed
from the gradient blocks (no operand of the sum of squares is gathered) with
one scalar all-reduce over dp.

Bytes (a PMPI wrapper counts what each rank hands MPI, independently of
the runtime), against formulas from the parameter shapes: with one
micro-batch stages 1 and 2 send exactly plain data parallelism's bytes (a
reduce-scatter and an all-gather are an all-reduce) and the norm's one
scalar all-reduce; stage 3 the reduce-scatter and one all-gather of a
parameter for each op that reads it, in the forward and in the backward
(1.48x here, where biases are read in the forward only); stage 2 with M
micro-batches reduce-scatters the gradients once per micro-batch where
stage 1 does it once.

Memory: the report's per-rank parameters, gradients and optimizer state
equal the formulas P/Q (parameters whole, or their block), G (whole at
stages 0 and 1, the block from 2) and K/N, from the parameter shapes."""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loomtest import (Checks, MPIRUN, RUN_ENV, launch, build_rank_program, compare_training, definitions,  # noqa: E402
                      half, read_safetensors, ring_allreduce)

STEPS = 6
SEED = 5

parser = argparse.ArgumentParser()
parser.add_argument("--loomc", required=True)
parser.add_argument("--loom-gen", required=True)
parser.add_argument("--pmpi", required=True, help="the PMPI byte-counting library")
args = parser.parse_args()

work = tempfile.mkdtemp(prefix="loom-zero-")
check = Checks()


def generate(name, *extra):
    path = os.path.join(work, name + ".mlir")
    subprocess.run([sys.executable, args.loom_gen, "--preset", "parity", "--batch", "8",
                    "--heads", "4", *extra, "-o", path], check=True)
    return path


def build(name, model, loomc_args):
    return build_rank_program(args.loomc, work, name, model, loomc_args)


def run(name, exe, ranks, pmpi=False):
    metrics = os.path.join(work, name + ".%r.jsonl")
    exported = os.path.join(work, name + ".safetensors")
    cmd = [exe, "--steps", str(STEPS), "--seed", str(SEED), "--metrics", metrics,
           "--timeout", "120"] + ([] if pmpi else ["--export", exported])
    rows, sent = launch(name, cmd, ranks, args.pmpi if pmpi else None)
    losses = [row["loss"] for row in rows]
    return losses, (read_safetensors(exported) if not pmpi else {}), sent


def compare(label, got, ref):
    compare_training(check, label, STEPS, got[:2], ref[:2])


def stored(program, op):
    """The lines that define `op` (train.param or train.state), and those
    of them stored as this rank's block (dist.shard_groups)."""
    lines = [line for line in program.splitlines() if f"= {op} " in line]
    return lines, [line for line in lines if "dist.shard_groups" in line]


def check_layout(label, program, stage):
    """States (stage >= 1) and parameters (stage 3) stored as dp blocks; the
    norm from the gradient blocks and one scalar all-reduce over dp."""
    states, split_states = stored(program, "train.state")
    params, split_params = stored(program, "train.param")
    want_states = len(states) if stage >= 1 else 0
    want_params = len(params) if stage >= 3 else 0
    check(f"{label}: optimizer states stored as blocks", len(split_states) == want_states,
          f"{len(split_states)} of {len(states)}")
    check(f"{label}: parameters stored as blocks", len(split_params) == want_params,
          f"{len(split_params)} of {len(params)}")
    if stage == 0:
        return
    defs = definitions(program)
    sums = [d for d in defs.values() if d.startswith("train.sum_squares")]
    gathered = [v for d in sums
                for v in re.match(r"train.sum_squares ([^:]*?)(?: replicated over \d+)? :", d).group(1).split(", ")
                if defs.get(v.split("#")[0], "").startswith("dist.all_gather")]
    scalar = re.findall(r'dist.all_reduce(?:_start)? %\w+ over \["dp"\] : tensor<f32>', program)
    check(f"{label}: the norm from the gradient blocks", sums and not gathered and scalar,
          f"{len(sums)} sums of squares, {len(gathered)} gathered operands, "
          f"{len(scalar)} scalar all-reduces over dp")


# -- Parity ---------------------------------------------------------------
adamw = generate("adamw", "--dropout", "0.1")
sgd = generate("sgd", "--optimizer", "sgd", "--momentum", "0", "--weight-decay", "0",
               "--lr", "0.5", "--warmup", "0", "--decay", "constant", "--clip", "0.05")
sgd_free = generate("sgd-noclip", "--optimizer", "sgd", "--momentum", "0", "--weight-decay", "0",
                    "--lr", "0.5", "--warmup", "0", "--decay", "constant", "--clip", "0")

refs = {}
for name, model in (("adamw", adamw), ("sgd", sgd)):
    refs[name] = run(f"ref-{name}", build(f"ref-{name}", model, [])[0], 1)
free = run("ref-sgd-noclip", build("ref-sgd-noclip", sgd_free, [])[0], 1)
check("clipping changes the losses", all(a != b for a, b in zip(refs["sgd"][0][1:], free[0][1:])),
      f"final loss {refs['sgd'][0][-1]:.5f} clipped, {free[0][-1]:.5f} not")

reports = {}
for name, model in (("adamw", adamw), ("sgd", sgd)):
    for stage in range(4):
        exe, program, report = build(f"{name}-z{stage}", model, ["--mesh", "dp=4", f"--zero={stage}"])
        if name == "adamw":
            check_layout(f"dp=4 ZeRO-{stage}", program, stage)
            reports[stage] = report
        compare(f"{name} dp=4 ZeRO-{stage}", run(f"{name}-z{stage}", exe, 4), refs[name])

exe, program, _ = build("z3-tp2", adamw, ["--mesh", "dp=2,tp=2", "--zero=3"])
over_tp = program.count('over ["tp"]')
check("dp=2 x tp=2 ZeRO-3: layers split over tp", over_tp > 0, f"{over_tp} collectives over tp")
check_layout("dp=2 x tp=2 ZeRO-3", program, 3)
compare("adamw dp=2 x tp=2 ZeRO-3", run("z3-tp2", exe, 4), refs["adamw"])
_, _, report = build("z3-tp2-sgd", sgd, ["--mesh", "dp=2,tp=2", "--zero=3"])
compare("sgd dp=2 x tp=2 ZeRO-3", run("z3-tp2-sgd", os.path.join(work, "z3-tp2-sgd"), 4),
        refs["sgd"])

# With rematerialization the backward recomputes each layer's forward, so it
# re-gathers every parameter of the layer (the forward's 12), not only the
# ones its own products read.
def backward_gathers(program):
    body = program[re.search(r"train.repeat \d+ reverse", program).end():]
    return body[:body.index("train.yield")].count("dist.all_gather_start")


_, plain3, _ = build("sgd-z3-plain", sgd, ["--mesh", "dp=4", "--zero=3"])
exe, full3, _ = build("sgd-z3-full", sgd, ["--mesh", "dp=4", "--zero=3", "--remat=full"])
gathers = (backward_gathers(plain3), backward_gathers(full3))
check("dp=4 ZeRO-3 --remat=full: the backward's recomputation re-gathers the whole layer",
      gathers == (6, 12), f"backward gathers per iteration {gathers[0]} without, "
      f"{gathers[1]} with recomputation")
compare("sgd dp=4 ZeRO-3 --remat=full", run("sgd-z3-full", exe, 4), refs["sgd"])

ref_m4 = {name: run(f"ref-{name}-m4", build(f"ref-{name}-m4", model, ["--micro-batches=4"])[0], 1)
          for name, model in (("adamw", adamw), ("sgd", sgd))}
for name, model in (("adamw", adamw), ("sgd", sgd)):
    exe, program, _ = build(f"{name}-z2-m4", model, ["--mesh", "dp=2", "--zero=2", "--micro-batches=4"])
    compare(f"{name} dp=2 ZeRO-2 M=4", run(f"{name}-z2-m4", exe, 2), ref_m4[name])

# Stage 3 over a pipeline: each stage's parameters split over dp, gathered
# per micro-batch in the forward and the backward of its layers.
for name, model in (("adamw", adamw), ("sgd", sgd)):
    exe, program, _ = build(f"{name}-z3-pp2", model,
                            ["--mesh", "pp=2,dp=2", "--zero=3", "--micro-batches=4"])
    if name == "adamw":
        params, split = stored(program, "train.param")
        check("pp=2 x dp=2 ZeRO-3: the stages' parameters stored as blocks",
              params and len(split) == len(params), f"{len(split)} of {len(params)}")
    compare(f"{name} pp=2 x dp=2 ZeRO-3 M=4", run(f"{name}-z3-pp2", exe, 4), ref_m4[name])

# -- Report: model states per rank from the shapes --------------------------
shapes = {}
with open(adamw) as f:
    for name, dims in re.findall(r'train.param "(\w+)" [^\n]*: tensor<([\dx]+)xf32>', f.read()):
        shapes[name] = [int(d) for d in dims.split("x")]
psi = sum(int(np.prod(s)) for s in shapes.values())
n = 4
for stage in range(4):
    memory = reports[stage]["memory_per_rank_bytes"]
    want = {"parameters": 4 * psi // (n if stage >= 3 else 1),
            "gradients": 4 * psi // (n if stage >= 2 else 1),
            "optimizer_state": 8 * psi // (n if stage >= 1 else 1)}
    got = {k: memory.get(k) for k in want}
    check(f"dp=4 ZeRO-{stage}: report's model states per rank", got == want and
          reports[stage]["zero_stage"] == stage, f"{got} vs {want}")

# Stage 3 holds two gathered layers at once in its layer loops (the one it
# computes with and the next, prefetched): 2 x the whole per-layer
# parameters, 4 bytes each; the other stages gather none.
depth = shapes["w_qkv"][0]
layer_bytes = 4 * sum(int(np.prod(s[1:])) for name, s in shapes.items()
                      if len(s) >= 2 and s[0] == depth and name not in ("wte", "wpe"))
got = [reports[stage]["gathered_in_flight_bytes"] for stage in range(4)]
check("dp=4: the report's gathered layers in flight", got == [0, 0, 0, 2 * layer_bytes],
      f"{got} vs {[0, 0, 0, 2 * layer_bytes]}")

# -- Bytes ------------------------------------------------------------------
sent = {}
for stage in range(4):
    exe = os.path.join(work, f"adamw-z{stage}")
    sent[stage] = run(f"bytes-z{stage}", exe, 4, pmpi=True)[2][0] / STEPS
scalar = ring_allreduce(1, n)
# Plain data parallelism: one all-reduce of every gradient and two
# scalars (the loss, and its labelled-token count, reduced once for the
# loss and its gradient).
want0 = ring_allreduce(psi, n) + 2 * scalar
check("dp=4: plain data parallelism sends the gradients' all-reduce",
      sent[0] == want0, f"{sent[0]:.0f} vs {want0} bytes per step and rank")
# Stages 1 and 2: a reduce-scatter of every gradient and an all-gather of
# every updated parameter (the bytes of the all-reduce), and the norm,
# summed from the blocks, one scalar all-reduce more.
want12 = half(psi, n) + half(psi, n) + 3 * scalar
for stage in (1, 2):
    check(f"dp=4: ZeRO-{stage} sends what plain data parallelism sends, and the norm's scalar",
          sent[stage] == want12 and want12 - want0 == scalar,
          f"{sent[stage]:.0f} vs {want12} bytes per step and rank")

# Stage 3: the reduce-scatter of the gradients and one all-gather of a
# parameter for each op that reads it: every parameter once in the
# forward and the tied embedding twice (the lookup and the head); in the
# backward the weights of the four linear layers (dx = dy w^T), the
# norms' gains (their input gradients), the final norm's gain and the
# tied embedding (the head's input gradient).
layers = shapes["w_qkv"][0]
size = lambda name: int(np.prod(shapes[name]))  # noqa: E731
forward = psi + size("wte")
backward = sum(size(w) for w in ("w_qkv", "w_o", "w_fc", "w_proj", "ln1_g", "ln2_g"))
backward += size("lnf_g") + size("wte")
want3 = half(psi, n) + half(forward + backward, n) + 3 * scalar
check("dp=4: ZeRO-3 sends one gather per read parameter",
      sent[3] == want3, f"{sent[3]:.0f} vs {want3} bytes per step "
      f"({sent[3] / sent[0]:.3f}x plain data parallelism)")

# Stage 2 with 4 micro-batches reduce-scatters the gradients of each
# micro-batch; stage 1 accumulates them whole and reduce-scatters once.
for stage in (1, 2):
    exe, _, _ = build(f"bytes-z{stage}-m4", adamw, ["--mesh", "dp=2", f"--zero={stage}", "--micro-batches=4"])
    sent[f"m4-{stage}"] = run(f"bytes-z{stage}-m4", exe, 2, pmpi=True)[2][0] / STEPS
# Stage 1: one reduce-scatter and one all-gather of every gradient and
# parameter, and the loss's and the norm's scalars (a few, whole); stage 2
# three reduce-scatters more (one per micro-batch).
scalars = sent["m4-1"] - 2 * half(psi, 2)
check("dp=2 M=4: ZeRO-1 reduce-scatters the gradients once",
      0 < scalars < 1024 and scalars % ring_allreduce(1, 2) == 0,
      f"{sent['m4-1']:.0f} bytes per step: {2 * half(psi, 2)} and {scalars:.0f} of scalars")
extra = sent["m4-2"] - sent["m4-1"]
check("dp=2 M=4: ZeRO-2 reduce-scatters the gradients per micro-batch",
      extra == 3 * half(psi, 2),
      f"{extra:.0f} bytes per step more than ZeRO-1; three reduce-scatters of {psi} "
      f"gradients: {3 * half(psi, 2)}")

# -- Trace: stage 3's gathers and reduce-scatters, layer by layer ----------
# In step 1 of a dp=4 stage-3 run, each iteration of the forward layer loop
# but the last gathers the next layer's parameters (dist-prefetch; the first
# layer's are gathered before the loop), and each of the backward one but
# the last gathers the next (lower) layer's parameters that the backward
# reads; each backward iteration reduce-scatters its layer's weight
# gradients. The gathers run on the communication thread (tid 1) and each
# begins before the iteration's compute ends, which is where the iteration's
# first wait (on the compute thread) begins.
trace = os.path.join(work, "trace.%r.json")
subprocess.run(MPIRUN + ["-n", "4", os.path.join(work, "adamw-z3"), "--steps", "2",
                         "--trace", trace, "--timeout", "120"],
               check=True, capture_output=True, env=RUN_ENV)
events = [e for e in json.load(open(trace.replace("%r", "0")))["traceEvents"] if e.get("ph") == "X"]
step = next(e for e in events if e["name"] == "step 1")
inside = [e for e in events if step["ts"] <= e["ts"] <= step["ts"] + step["dur"]]
loops = {}
for e in inside:
    m = re.match(r"repeat (\d+) iteration (\d+)$", e["name"])
    if m:
        loops.setdefault(int(m.group(1)), []).append((e["ts"], e["ts"] + e["dur"]))


def within(kind, lo, hi, tid=None):
    return [e for e in inside if e["name"].startswith(kind) and lo <= e["ts"] <= hi
            and (tid is None or e["tid"] == tid)]


layer_loops = {r: its for r, its in loops.items() if len(its) == layers}
per_loop = {r: [(len(within("all_gather", lo, hi, tid=1)), len(within("reduce_scatter", lo, hi)))
                for lo, hi in its]
            for r, its in layer_loops.items()}
# Forward: the 12 per-layer parameters; backward: the 4 linear weights and
# the 2 norm gains it reads, and the 12 gradients.
stacked = [name for name, shape in shapes.items() if len(shape) >= 2 and shape[0] == layers
           and name not in ("wte", "wpe")]
forward = [r for r, c in per_loop.items()
           if c == [(len(stacked), 0)] * (layers - 1) + [(0, 0)]]
backward = [r for r, c in per_loop.items()
            if c == [(6, len(stacked))] * (layers - 1) + [(0, len(stacked))]]
check("dp=4 ZeRO-3 trace: every forward and backward layer iteration but the last gathers the "
      "next layer, every backward one reduce-scatters its gradients",
      len(forward) == 1 and len(backward) == 1,
      "; ".join(f"repeat {r}: (gathers, reduce-scatters) per iteration {c}"
                for r, c in sorted(per_loop.items())))
# Prefetch: each gather of the next layer is issued (its "start" span on the
# compute thread) before the iteration's compute ends (its first wait); the
# share of the gathers' time that ran during the compute is printed, not
# asserted (two cores carry four ranks and their communication threads
# here).
issued, early, overlapped, total = 0, 0, 0.0, 0.0
for r in forward + backward:
    for lo, hi in layer_loops[r][:-1]:
        waits = within("wait", lo, hi, tid=0)
        compute_end = min(w["ts"] for w in waits) if waits else hi
        for g in within("start all_gather", lo, hi, tid=0):
            issued += 1
            early += g["ts"] < compute_end
        for g in within("all_gather", lo, hi, tid=1):
            total += g["dur"]
            overlapped += max(0.0, min(g["ts"] + g["dur"], compute_end) - g["ts"])
expected = (layers - 1) * (len(stacked) + 6)
check("dp=4 ZeRO-3 trace: every next layer's gather is issued before the current layer's "
      "compute ends",
      issued == expected and early == issued,
      f"{early} of {issued} gathers (expected {expected}); "
      f"{100 * overlapped / max(total, 1e-9):.0f}% of their time during the compute")

check.finish()
