"""Helpers for the tests that build and run Loom programs: safetensors
files, building a model with loomc, running it and reading what it wrote."""

import json
import os
import re
import struct
import subprocess
import sys
import tempfile

import numpy as np

DTYPES = {np.dtype(np.float32): "F32", np.dtype(np.int32): "I32"}


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, array in tensors.items():
        array = np.asarray(array, order="C")
        data = array.tobytes()
        header[name] = {"dtype": DTYPES[array.dtype], "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + size])
    data = raw[8 + size:]
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        dtype = {"F32": np.float32, "I32": np.int32}[entry["dtype"]]
        out[name] = np.frombuffer(data[begin:end], dtype=dtype).reshape(entry["shape"])
    return out


class Program:
    """A model compiled by loomc into an executable in a temporary folder."""

    def __init__(self, loomc, mlir_text, name="model", loomc_args=()):
        self.dir = tempfile.mkdtemp(prefix="loom-test-")
        self.mlir = os.path.join(self.dir, name + ".mlir")
        with open(self.mlir, "w") as f:
            f.write(mlir_text)
        self.exe = os.path.join(self.dir, name)
        result = subprocess.run([loomc, self.mlir, "-o", self.exe, *loomc_args],
                                capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"loomc failed on {self.mlir}:\n{result.stderr}")

    def run(self, steps=1, params=None, inputs=None, extra=(), ranks=1):
        """Runs `steps` steps on `ranks` processes; returns (rank 0's
        per-step metrics, exported params)."""
        args = [self.exe, "--steps", str(steps), "--log-every", "1000000"]
        if ranks > 1:
            args = MPIRUN + ["-n", str(ranks)] + args + ["--timeout", "120"]
        metrics = os.path.join(self.dir, "metrics.jsonl")
        exported = os.path.join(self.dir, "export.safetensors")
        args += ["--metrics", metrics, "--export", exported]
        if params is not None:
            path = os.path.join(self.dir, "init.safetensors")
            write_safetensors(path, params)
            args += ["--init-from", path]
        if inputs is not None:
            path = os.path.join(self.dir, "inputs.safetensors")
            write_safetensors(path, inputs)
            args += ["--inputs", path]
        args += list(extra)
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
        result = subprocess.run(args, capture_output=True, text=True, env=env)
        if result.returncode != 0:
            raise RuntimeError(f"{self.exe} failed:\n{result.stdout}{result.stderr}")
        with open(metrics) as f:
            rows = [json.loads(line) for line in f]
        return rows, read_safetensors(exported)


def bf16_round(x):
    """float32 -> the float32 value of its bf16 rounding, by explicit
    arithmetic on the bits: add half of the dropped part's unit, less one
    unless the kept part is odd (ties to even), and truncate. Finite inputs."""
    x = np.asarray(x, np.float32)
    b = np.atleast_1d(x).view(np.uint32).astype(np.uint64)
    sixteen = np.uint64(16)
    b = (b + np.uint64(0x7FFF) + ((b >> sixteen) & np.uint64(1))) >> sixteen << sixteen
    return b.astype(np.uint32).view(np.float32).reshape(x.shape)


def mlir_type(shape, element="f32"):
    return "tensor<" + "".join(f"{d}x" for d in shape) + element + ">"


# How the tests start several ranks, and the environment of every run (one
# BLAS thread per rank, as the CI machine has few cores).
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]
RUN_ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1")


def launch(name, cmd, ranks, pmpi=None, mpirun=False):
    """Runs `cmd` on `ranks` processes (under mpirun when more than one or
    `mpirun`, with the PMPI byte counter `pmpi` preloaded when given);
    exits naming `name` when it fails. Returns rank 0's metrics rows (from
    the `%r` path after --metrics in `cmd`) and the bytes each rank sent as
    the PMPI wrapper counted them."""
    if ranks > 1 or mpirun or pmpi:
        cmd = MPIRUN + ["-n", str(ranks)] + (["-x", "LD_PRELOAD=" + pmpi] if pmpi else []) + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, env=RUN_ENV)
    if r.returncode:
        sys.exit(f"{name} failed:\n{r.stdout}{r.stderr}")
    metrics = cmd[cmd.index("--metrics") + 1]
    with open(metrics.replace("%r", "0")) as f:
        rows = [json.loads(line) for line in f]
    sent = {int(a): int(b) for a, b in re.findall(r"pmpi: rank (\d+) sent (\d+) bytes", r.stderr)}
    return rows, sent


class Checks:
    """Prints one line per check, "label: detail ok|FAIL", and counts the
    failures; `finish` prints the count and exits with it."""

    def __init__(self, prefix=""):
        self.prefix = prefix
        self.failed = 0

    def __call__(self, label, ok, detail):
        print(f"{self.prefix}{label}: {detail} {'ok' if ok else 'FAIL'}")
        self.failed += not ok

    def finish(self):
        print(f"{self.failed} failed")
        raise SystemExit(1 if self.failed else 0)


def build_rank_program(loomc, work, name, model, loomc_args):
    """Compiles `model` with loomc into work/name; returns the executable,
    the rank program's text (the dumped phase) and the --report-json
    report. Exits with loomc's errors when it fails."""
    exe = os.path.join(work, name)
    phases = os.path.join(work, name + "-phases")
    report = os.path.join(work, name + ".json")
    r = subprocess.run([loomc, model, "-o", exe, "--dump-phases", phases,
                        "--report-json", report, *loomc_args],
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"loomc {' '.join(loomc_args)} failed:\n{r.stderr}")
    with open(os.path.join(phases, "2-rank-program.mlir")) as f:
        program = f.read()
    with open(report) as f:
        return exe, program, json.load(f)


def compare_training(check, label, steps, got, ref):
    """Parity of a run with its reference: `got` and `ref` are (losses,
    final parameters by name); the losses within 1e-5 + 1e-4 |loss| of the
    reference's on every one of `steps` steps, every final parameter within
    1e-4 relative error (the norm of the difference over the reference's)."""
    (losses, weights), (ref_losses, ref_weights) = got, ref
    worst = max(abs(a - b) / (1e-5 + 1e-4 * abs(b)) for a, b in zip(losses, ref_losses))
    check(f"{label}: losses", len(losses) == steps and worst <= 1.0,
          f"{steps} steps, worst |loss - ref| / tolerance {worst:.3g}")
    errs = {n: float(np.linalg.norm(weights[n] - w) / max(np.linalg.norm(w), 1e-30))
            for n, w in ref_weights.items()}
    name = max(errs, key=errs.get)
    check(f"{label}: worst final-parameter relative error",
          errs[name] <= 1e-4 and set(weights) == set(ref_weights), f"{errs[name]:.3g} ({name})")


def definitions(program):
    """Each SSA value of an MLIR text and the rest of its defining line
    (the results of a multi-result op under the first one's name)."""
    defs = {}
    for line in program.splitlines():
        m = re.match(r"\s*(%[\w.]+)(?::\d+)? = (.*)", line)
        if m:
            defs[m.group(1)] = m.group(2)
    return defs


def ring_allreduce(elements, n, rank=0):
    """Bytes rank `rank` sends in the host runtime's ring all-reduce of
    `elements` f32 values over n ranks: in each of n-1 reduce-scatter and
    n-1 all-gather steps one chunk (n near-equal chunks; a scalar is one
    rank's chunk)."""
    if n == 1:
        return 0

    def chunk(i):
        base, extra = divmod(elements, n)
        return base + (i < extra)
    rs = sum(chunk((rank - s) % n) for s in range(n - 1))
    ag = sum(chunk((rank + 1 - s) % n) for s in range(n - 1))
    return 4 * (rs + ag)


def half(elements, n):
    """A reduce-scatter's or an all-gather's bytes per rank: (n-1)/n."""
    assert elements % n == 0
    return 4 * elements * (n - 1) // n


def token_counts(program, axis, stage, M):
    """The cross-entropy's labelled-token counts reduced over `axis` in one
    step by the ranks of pipeline stage `stage`: the scalar all-reduces
    inside the micro-batch loops (the indented ones), once per micro-batch,
    of no stage or of `stage` (the loss gradient's runs on the last stage
    only)."""
    def runs_here(line):
        m = re.search(r"dist\.stage = (\d+)", line)
        return m is None or int(m.group(1)) == stage
    return M * sum(1 for line in program.splitlines()
                   if line.startswith("      ") and runs_here(line) and
                   re.search(r'dist\.all_reduce_start .* over \["%s"\] .*: tensor<f32>$' % axis, line))
