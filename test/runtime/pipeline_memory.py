#!/usr/bin/env python3
"""What a pipeline rank holds: for a GPT of 8 layers, width 256, context 32
and vocabulary 256 (loom-gen), trained with AdamW on 4 micro-batches on
one rank, pp = 2 and pp = 4:

- the runtime's allocator holds, for each rank's tensor table, 12 bytes
  (the parameter and AdamW's two moments, fp32) per parameter of the
  rank's own stages, plus its inputs, step counter and loss: exactly;
- the process's resident bytes across the tensor table's allocation and
  initialization (/proc/self/statm, measured by the operating system, not
  the allocator) are within 5% of the same 12 bytes per own parameter,
  and with the gradients the rank's updates consume (in the arena, where
  residency cannot tell them from activations) within 5% of the report's
  model states;
- the report's model states for each pipeline rank are 16 bytes per own
  parameter (the gradient counted too): exactly;
- a stage's activations grow with its in-flight micro-batches by their
  layers' saved inputs (GPipe against 1F1B on rank 0, exactly), and no
  rank's reach twice the single rank's;
- the process's resident high-water mark (getrusage, independent of the
  allocator) of each pipeline rank lies below the single rank's by at
  least 95% of the 12 bytes per parameter it does not hold, less what its
  arena holds beyond the single rank's (a stage keeps its in-flight
  micro-batches' saved values, where the single rank runs each
  micro-batch's backward right after its forward).

A rank's own parameters come from the shapes (12 h^2 + 13 h per layer, the
position embedding on stage 0, the final norm on the last, and the token
embedding tied to the head on the first and the last stage only, as
Megatron-LM's embedding group keeps it: its gradient is exchanged between
those two ranks) and the layers each stage runs, read from its
parameters' names (w_qkv[a:b])."""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loomtest import MPIRUN, RUN_ENV, Checks  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--loomc", required=True)
parser.add_argument("--loom-gen", required=True)
args = parser.parse_args()

LAYERS, H, S, V, B, M = 8, 256, 32, 256, 8, 4
PER_LAYER = 12 * H * H + 13 * H
TOTAL = LAYERS * PER_LAYER + V * H + S * H + 2 * H
INPUTS = 2 * B * S * 4 + 4 + 4  # tokens, labels, the step counter, the loss
work = tempfile.mkdtemp(prefix="loom-pipeline-memory-")
# The sanitized suite (scripts/test-sanitized.sh) runs the executables with
# AddressSanitizer's allocator.
SANITIZED = "ASAN_OPTIONS" in os.environ
check = Checks()


model = os.path.join(work, "gpt8.mlir")
subprocess.run([sys.executable, args.loom_gen, "--layers", str(LAYERS), "--d-model", str(H),
                "--heads", "4", "--context", str(S), "--vocab", str(V), "--batch", str(B),
                "-o", model], check=True)
with open(model) as f:
    declared = int(re.search(r"([\d,]+) parameters", f.read()).group(1).replace(",", ""))
check("the model's parameters", declared == TOTAL, f"{declared} declared, {TOTAL} from the shapes")


def run(name, pp, schedule=None):
    exe = os.path.join(work, name)
    phases = os.path.join(work, name + "-phases")
    report = os.path.join(work, name + ".json")
    mesh = ["--mesh", f"pp={pp}"] if pp > 1 else []
    if schedule:
        mesh.append(f"--schedule={schedule}")
    r = subprocess.run([args.loomc, model, *mesh, f"--micro-batches={M}", "-o", exe,
                        "--dump-phases", phases, "--report-json", report],
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"loomc {name} failed:\n{r.stderr}")
    metrics = os.path.join(work, name + ".%r.jsonl")
    cmd = [exe, "--steps", "2", "--metrics", metrics, "--timeout", "120"]
    r = subprocess.run((MPIRUN + ["-n", str(pp)] if pp > 1 else []) + cmd,
                       capture_output=True, text=True, env=RUN_ENV)
    if r.returncode:
        sys.exit(f"{name} failed:\n{r.stdout}{r.stderr}")
    rows = []
    for rank in range(pp):
        with open(metrics.replace("%r", str(rank))) as f:
            rows.append(json.loads(f.read().splitlines()[-1]))
    with open(os.path.join(phases, "2-rank-program.mlir" if pp > 1 else "1-training-step.mlir")) as f:
        program = f.read()
    with open(report) as f:
        memory = json.load(f)["memory_per_rank_bytes"]
    return rows, program, memory


def report_of(name):
    with open(os.path.join(work, name + ".json")) as f:
        return json.load(f)


def own_parameters(program, pp):
    """Each pipeline rank's own parameters, from the shapes and its layers."""
    ranges = sorted(tuple(map(int, m)) for m in
                    re.findall(r'train.param "w_qkv\[(\d+):(\d+)\]"', program))
    assert len(ranges) == pp and sum(b - a for a, b in ranges) == LAYERS, ranges
    own = [(b - a) * PER_LAYER for a, b in ranges]
    own[0] += S * H + V * H
    own[-1] += 2 * H + V * H
    return own


single, _, _ = run("one", 1)
check("one rank: allocator tensor bytes", single[0]["tensor_bytes"] == 12 * TOTAL + INPUTS,
      f"{single[0]['tensor_bytes']} = 12 x {TOTAL} + {INPUTS}")
for pp in (2, 4):
    rows, program, memory = run(f"pp{pp}", pp)
    own = own_parameters(program, pp)
    for rank, row in enumerate(rows):
        want = 12 * own[rank] + INPUTS
        check(f"pp={pp} rank {rank}: allocator tensor bytes", row["tensor_bytes"] == want,
              f"{row['tensor_bytes']} = 12 x {own[rank]} + {INPUTS}")
        # The same tensors measured by the operating system: the process's
        # resident bytes across the tensor table's allocation and
        # initialization (/proc/self/statm), not the allocator's count.
        # (Under the sanitizers, whose allocator adds shadow memory and
        # redzones to every allocation, residency measures those too: the
        # release suite checks it.)
        resident = row["resident_tensor_bytes"]
        if not SANITIZED:
            check(f"pp={pp} rank {rank}: resident tensor table within 5% of 12 x own",
                  abs(resident - want) <= 0.05 * want,
                  f"{resident} resident, {resident / want - 1:+.1%}")
        reported = memory["per_pipeline_rank"][rank]
        check(f"pp={pp} rank {rank}: report's model states", reported["model_states"] == 16 * own[rank],
              f"{reported['model_states']} = 16 x {own[rank]}")
        # Model states measured: parameters and AdamW's moments resident,
        # and the gradients the rank's updates consume (4 bytes per own
        # parameter, in the arena, where residency cannot tell them from
        # activations: the report's gradient row), against the report.
        measured = resident - INPUTS + reported["gradients"]
        if not SANITIZED:
            check(f"pp={pp} rank {rank}: model states measured within 5% of the report's",
                  abs(measured - reported["model_states"]) <= 0.05 * reported["model_states"],
                  f"{measured} = {resident - INPUTS} resident + {reported['gradients']} gradients, "
                  f"{measured / reported['model_states'] - 1:+.1%}")
        saved = single[0]["max_rss_bytes"] - row["max_rss_bytes"]
        grown = max(0, row["arena_bytes"] - single[0]["arena_bytes"])
        floor = 0.95 * 12 * (TOTAL - own[rank]) - grown
        check(f"pp={pp} rank {rank}: resident high-water below one rank's", saved >= floor,
              f"{saved / 1e6:.1f} MB less, at least {floor / 1e6:.1f} MB "
              f"(the arena {grown / 1e6:.1f} MB larger)")

# Activations: with full recomputation a stage keeps each in-flight
# micro-batch's layer inputs, b x s x h floats per layer; GPipe holds all M on stage
# 0 and 1F1B P, so on rank 0 of pp = 2 they differ by exactly (M - 2)
# micro-batches of its layers' inputs. No rank's activations reach twice
# the single rank's (a rank once held the other stages' per-micro-batch
# gradients and saved layer inputs for zeros: 15 MB here, eight times the
# single rank's).
single_activations = report_of("one")["memory_per_rank_bytes"]["activations_peak"]
run("pp2-gpipe", 2, "gpipe")
# With dp too (the report's plan only): the all-reduce of a stage's
# gradients over dp runs in place, so no rank holds them twice (12.9 MB
# here, which the bound below would see).
subprocess.run([args.loomc, model, "--mesh", "pp=2,dp=2", f"--micro-batches={M}",
                "--emit=cpp", "-o", os.path.join(work, "pp2dp2.cpp"), "--report-json",
                os.path.join(work, "pp2dp2.json")], check=True, capture_output=True)
saved = {}
for name in ("pp2", "pp2-gpipe", "pp4", "pp2dp2"):
    r = report_of(name)
    rows = r["memory_per_rank_bytes"]["per_pipeline_rank"]
    in_flight = r["pipeline"]["peak_activations_per_rank"]
    saved[name] = rows[0]["activations_peak"], in_flight[0]
    for rank, row in enumerate(rows):
        check(f"{name} rank {rank}: activations below twice the single rank's",
              row["activations_peak"] < 2 * single_activations,
              f"{row['activations_peak']} bytes, one rank {single_activations}, "
              f"{in_flight[rank]} micro-batches in flight")
# With full recomputation a stage saves its layers' inputs per micro-batch.
for name, schedule in (("full-1f1b", "1f1b"), ("full-gpipe", "gpipe")):
    subprocess.run([args.loomc, model, "--mesh", "pp=2", f"--schedule={schedule}",
                    "--remat=full", f"--micro-batches={M}", "--emit=cpp",
                    "-o", os.path.join(work, name + ".cpp"), "--report-json",
                    os.path.join(work, name + ".json")], check=True, capture_output=True)
    r = report_of(name)
    saved[name] = (r["memory_per_rank_bytes"]["per_pipeline_rank"][0]["activations_peak"],
                   r["pipeline"]["peak_activations_per_rank"][0])
layer_input = (B // M) * S * H * 4
(gpipe, gpipe_flight), (ofb, ofb_flight) = saved["full-gpipe"], saved["full-1f1b"]
want = (gpipe_flight - ofb_flight) * (LAYERS // 2) * layer_input
check("pp=2 rank 0, --remat=full: GPipe's activations above 1F1B's by the extra in-flight "
      "micro-batches' layer inputs", gpipe - ofb == want,
      f"{gpipe} - {ofb} = {gpipe - ofb}; ({gpipe_flight} - {ofb_flight}) x {LAYERS // 2} "
      f"layers x {layer_input} = {want}")

check.finish()
