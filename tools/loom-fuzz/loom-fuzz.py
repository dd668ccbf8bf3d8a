#!/usr/bin/env python3
"""loom-fuzz: a mutation fuzzer for Loom's compiler.

Seeds are the lit inputs (every .mlir file under test/ and examples/, split
at `// -----`), each compiled once unmutated to measure its own time. Each
fuzz input is a seed with a few mutations (numbers replaced by boundary
values, dimensions changed, lines deleted, duplicated or swapped, op names
and element types exchanged, text truncated; attribute values replaced by
dense arrays of every element type, extreme integers and floats, nested
dictionaries and arrays; any builtin type (index, none, complex, vector,
integers of odd widths, dynamic and huge shapes) in any type position;
extreme dimension sizes), run through one of four modes:

  pipeline   loom-opt --loom-pipeline
  train      loom-opt --train-verify --train-autodiff --train-optimizer
  dp-tp      loomc --emit=cpp --mesh dp=2,tp=2
  pp         loomc --emit=cpp --mesh pp=2 --micro-batches=2

and classified:

  crash      killed by a signal, a sanitizer report, an LLVM fatal error or
             assertion, or an exit code other than 0 and 1
  hang       slower than 50 times its seed's own time (at least --min-hang
             seconds, for process start-up), killed at that bound
  unlocated  an error exit whose errors name no line of the input
             (FILE:LINE:COL: error:)

Input i of a campaign is a pure function of (--seed, i): a finding is
rerun with `--seed S --only I`. Findings are written to --out (the input,
the command and its output). Exit status: 0 when nothing was found.

  loom-fuzz.py --bin build-san/bin --inputs 1000 --seed 1 --jobs 2
"""

import argparse
import concurrent.futures
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

MODES = {
    "pipeline": ("loom-opt", ["--loom-pipeline", "-o", "/dev/null"]),
    "train": ("loom-opt", ["--train-verify", "--train-autodiff",
                           "--train-optimizer", "-o", "/dev/null"]),
    "dp-tp": ("loomc", ["--emit=cpp", "--mesh", "dp=2,tp=2", "-o",
                        "/dev/null"]),
    "pp": ("loomc", ["--emit=cpp", "--mesh", "pp=2", "--micro-batches=2",
                     "-o", "/dev/null"]),
}

BOUNDARY = ["0", "1", "2", "3", "-1", "7", "64", "65536", "2147483647",
            "2147483648", "4294967296", "281474976710656",
            "9223372036854775807", "-9223372036854775808", "1048576",
            "1048577", "100000000000"]
ELEMENT_TYPES = ["f32", "bf16", "i32", "i64", "f16", "i1", "index"]
# Any type, for any type position (an element type, an operand's or a
# result's type, a type attribute): builtin types of every kind, integers
# of odd widths, dynamic and huge shapes.
ANY_TYPES = ["index", "none", "i1", "i3", "i17", "i128", "si8", "ui16", "f16",
             "bf16", "f64", "f8E4M3FN", "tf32", "complex<f32>", "complex<i8>",
             "vector<2xf32>", "vector<[4]xf32>", "tensor<2xf32>",
             "tensor<?x4xf32>", "tensor<*xf32>", "tensor<0xf32>",
             "tensor<4xindex>", "tensor<4xcomplex<f32>>", "memref<4xf32>",
             "tuple<f32, i32>", "tensor<9223372036854775807xf32>",
             "tensor<4294967296x4294967296xf32>", "tensor<1x1x1x1x1x1x1x1x1xf32>",
             "!llvm.ptr", "() -> ()", "tensor<4xf32, \"enc\">"]
# Attribute values: dense arrays of every element type (with values in and
# out of range), extreme and odd integers and floats, nested dictionaries
# and arrays, types and strings.
ARRAY_ELEMENTS = ["i1", "i8", "i16", "i32", "i64", "f32", "f64", "index",
                  "i3", "i128", "bf16", "f16", "si8", "ui8"]
EXTREME_NUMBERS = ["0", "-1", "1", "9223372036854775807",
                   "-9223372036854775808", "18446744073709551616",
                   "340282366920938463463374607431768211456", "1e308", "1e309",
                   "-0.0", "0x7FC00000", "0xFFFFFFFFFFFFFFFF", "true", "2.5"]


def random_attribute(rng, depth=0):
    """An attribute value of a random kind."""
    kind = rng.randrange(8 if depth < 2 else 5)
    if kind == 0:
        element = rng.choice(ARRAY_ELEMENTS)
        values = ", ".join(rng.choice(EXTREME_NUMBERS)
                           for _ in range(rng.randrange(0, 4)))
        return "array<%s%s>" % (element, ": " + values if values else "")
    if kind == 1:
        return rng.choice(EXTREME_NUMBERS) + (
            " : " + rng.choice(["i64", "i32", "i8", "index", "f32", "f64",
                                "i1", "i128"]) if rng.random() < 0.6 else "")
    if kind == 2:
        return rng.choice(ANY_TYPES)
    if kind == 3:
        return rng.choice(['"', '""', '"\\00"', '@sym', 'unit', '#dist.mesh<[]>'])
    if kind == 4:
        return "dense<%s> : %s" % (rng.choice(EXTREME_NUMBERS),
                                   rng.choice(["tensor<4xf32>", "tensor<2xi64>",
                                               "tensor<0xf32>", "vector<2xi1>"]))
    if kind == 5:
        return "{%s}" % ", ".join("k%d = %s" % (j, random_attribute(rng, depth + 1))
                                  for j in range(rng.randrange(0, 3)))
    return "[%s]" % ", ".join(random_attribute(rng, depth + 1)
                              for _ in range(rng.randrange(0, 3)))

LOCATED = re.compile(r"^[^\s:][^:]*:\d+:\d+: error:", re.M)
CRASH_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                 "runtime error:", "LLVM ERROR", "PLEASE submit a bug report",
                 "Assertion", "Stack dump", "terminate called",
                 "UndefinedBehaviorSanitizer")


def split_seeds(root):
    """(name, text) of every lit input, split at `// -----`."""
    seeds = []
    for top in ("test", "examples"):
        for dirpath, _, files in sorted(os.walk(os.path.join(root, top))):
            for f in sorted(files):
                if not f.endswith(".mlir"):
                    continue
                path = os.path.join(dirpath, f)
                with open(path, encoding="utf-8", errors="replace") as fh:
                    text = fh.read()
                for i, part in enumerate(re.split(r"^// -----\s*$", text,
                                                  flags=re.M)):
                    if "train.model" in part or "func.func" in part:
                        seeds.append(("%s#%d" % (os.path.relpath(path, root),
                                                 i), part))
    return seeds


def mutate(text, rng):
    """One mutation of `text`."""
    lines = text.split("\n")
    kind = rng.randrange(12)
    if kind <= 2:
        # A number (a dimension, an offset, a count, a size) replaced.
        spans = [m.span() for m in re.finditer(r"(?<![\w.%#@])-?\d+(?![\w.])",
                                               text)]
        if spans:
            a, b = rng.choice(spans)
            value = rng.choice(BOUNDARY) if rng.random() < 0.7 else str(
                rng.randrange(0, 40))
            return text[:a] + value + text[b:]
    if kind == 3 and len(lines) > 2:
        del lines[rng.randrange(len(lines))]
        return "\n".join(lines)
    if kind == 4 and lines:
        i = rng.randrange(len(lines))
        lines.insert(i, lines[i])
        return "\n".join(lines)
    if kind == 5 and len(lines) > 2:
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
        return "\n".join(lines)
    if kind == 6:
        names = re.findall(r"\b(?:train|dist)\.\w+", text)
        if names:
            old, new = rng.choice(names), rng.choice(names)
            occurrences = [m.start() for m in re.finditer(re.escape(old), text)]
            at = rng.choice(occurrences)
            return text[:at] + new + text[at + len(old):]
    if kind == 7:
        spans = [m.span() for m in re.finditer(r"x(f32|bf16|i32|i64)>", text)]
        if spans:
            a, b = rng.choice(spans)
            return text[:a] + "x" + rng.choice(ELEMENT_TYPES) + ">" + text[b:]
    if kind == 8 and text:
        cut = rng.randrange(len(text))
        return text[:cut] if rng.random() < 0.5 else text[:cut] + rng.choice(
            ["}", "(", "<", "[", "%", "\"", "\x00", "0x", ":"]) + text[cut:]
    if kind == 9:
        # An attribute value replaced (after `name = ` in an attribute
        # dictionary or an attribute's parameters), or a new attribute in a
        # dictionary.
        spans = [m.span(1) for m in re.finditer(
            r"\b[a-z_]+ = ([^,{}()\[\]<>\n]+|\[[^\]\n]*\]|array<[^>\n]*>)",
            text)]
        if spans and rng.random() < 0.7:
            a, b = rng.choice(spans)
            return text[:a] + random_attribute(rng) + text[b:]
        opens = [m.end() for m in re.finditer(r"(?:attributes |\) |\" )\{", text)]
        if opens:
            at = rng.choice(opens)
            return text[:at] + "fuzz = %s, " % random_attribute(rng) + text[at:]
    if kind == 10:
        # Any type in a type position: an element type, or a whole type
        # after `:` or `->`, or in a function's signature.
        spans = [m.span(1) for m in re.finditer(
            r"(?:[:,(]\s*|->\s*)((?:tensor|vector)<[^<>\n]*>|[fi]\d+|bf16|index)",
            text)]
        spans += [m.span(1) for m in re.finditer(r"x(f32|bf16|i32|i64|i1)>", text)]
        if spans:
            a, b = rng.choice(spans)
            return text[:a] + rng.choice(ANY_TYPES) + text[b:]
    if kind == 11:
        # An extreme dimension size in a shaped type.
        spans = [m.span(1) for m in re.finditer(r"(?<=[<x])(\d+)(?=x)", text)]
        if spans:
            a, b = rng.choice(spans)
            return text[:a] + rng.choice(
                ["0", "?", "9223372036854775807", "9223372036854775808",
                 "4294967296", "281474976710656", "2147483648", "1"]) + text[b:]
    # Fall back to a number change anywhere.
    return re.sub(r"\d+", lambda m: rng.choice(BOUNDARY), text, count=1)


def run(binary, args, path, limit):
    """(code or None on timeout, seconds, output)."""
    start = time.monotonic()
    try:
        p = subprocess.run([binary, path] + args, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=limit,
                           env=dict(os.environ, LLVM_DISABLE_CRASH_REPORT="1"))
        return p.returncode, time.monotonic() - start, p.stdout.decode(
            "utf-8", "replace")
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode("utf-8", "replace")
        return None, time.monotonic() - start, out


def classify(code, output):
    if code is None:
        return "hang"
    if code < 0 or code not in (0, 1) or any(m in output
                                             for m in CRASH_MARKERS):
        return "crash"
    if code == 1 and not LOCATED.search(output):
        return "unlocated"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"),
                    help="directory with loom-opt and loomc")
    ap.add_argument("--inputs", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", type=int, default=None,
                    help="run input ONLY of the campaign alone")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--mutations", type=int, default=3,
                    help="most mutations per input (1 to this)")
    ap.add_argument("--min-hang", type=float, default=2.0,
                    help="the hang bound's floor in seconds")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--out", default="fuzz-findings")
    args = ap.parse_args()

    modes = args.modes.split(",")
    for m in modes:
        if m not in MODES:
            sys.exit("loom-fuzz: unknown mode '%s' (%s)" % (m, ", ".join(MODES)))
    seeds = split_seeds(ROOT)
    if not seeds:
        sys.exit("loom-fuzz: no seeds under %s" % ROOT)
    work = tempfile.mkdtemp(prefix="loom-fuzz-")

    # Each seed's own time per mode, measured once (the slowest of the two
    # loom-opt or loomc runs is not needed: one run, as the inputs run).
    seed_time = {}

    def measure(key):
        (si, mode) = key
        tool, extra = MODES[mode]
        path = os.path.join(work, "seed-%d-%s.mlir" % (si, mode))
        with open(path, "w") as f:
            f.write(seeds[si][1])
        code, secs, out = run(os.path.join(args.bin, tool), extra, path, 600)
        return key, secs, classify(code, out), out

    def plan(i):
        rng = random.Random(args.seed * 1000003 + i)
        si = rng.randrange(len(seeds))
        mode = rng.choice(modes)
        text = seeds[si][1]
        for _ in range(rng.randint(1, args.mutations)):
            text = mutate(text, rng)
        return si, mode, text

    indices = [args.only] if args.only is not None else range(args.inputs)
    plans = {i: plan(i) for i in indices}
    needed = sorted({(si, mode) for si, mode, _ in plans.values()})
    counts = {"crash": 0, "hang": 0, "unlocated": 0}
    findings = []
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for key, secs, verdict, out in pool.map(measure, needed):
            seed_time[key] = secs
            if verdict:
                # A seed that fails by itself is a finding of its own.
                findings.append((verdict, "seed", key, seeds[key[0]][1], out))

        def fuzz(i):
            si, mode, text = plans[i]
            tool, extra = MODES[mode]
            path = os.path.join(work, "input-%d.mlir" % i)
            with open(path, "w") as f:
                f.write(text)
            limit = max(50 * seed_time[(si, mode)], args.min_hang)
            code, secs, out = run(os.path.join(args.bin, tool), extra, path,
                                  limit)
            os.unlink(path)
            return i, classify(code, out), out, limit

        for i, verdict, out, limit in pool.map(fuzz, indices):
            if verdict:
                si, mode, text = plans[i]
                findings.append((verdict, i, (si, mode), text,
                                 out + ("\n(killed after %.1f s)" % limit
                                        if verdict == "hang" else "")))
    shutil.rmtree(work, ignore_errors=True)

    for verdict, i, (si, mode), text, out in findings:
        counts[verdict] += 1
        os.makedirs(args.out, exist_ok=True)
        base = os.path.join(args.out, "%s-%s-%s" % (verdict, i, mode))
        tool, extra = MODES[mode]
        with open(base + ".mlir", "w") as f:
            f.write(text)
        with open(base + ".txt", "w") as f:
            f.write("seed input: %s\nmode: %s\ncommand: %s %s.mlir %s\n"
                    "rerun: %s --seed %d --only %s\n\n%s" % (
                        seeds[si][0], mode, tool, base, " ".join(extra),
                        sys.argv[0], args.seed, i, out))
        first = next((l for l in out.splitlines()
                      if "error" in l.lower() or "ERROR" in l), "")
        print("loom-fuzz: %s: input %s (%s, from %s): %s" % (
            verdict, i, mode, seeds[si][0], first[:200]))
    per_mode = {m: 0 for m in modes}
    for _, mode, _ in plans.values():
        per_mode[mode] += 1
    print("loom-fuzz: %d inputs from %d seeds (seed %d, modes %s) in %.0f s: "
          "%d crashes, %d hangs, %d unlocated errors" % (
              len(indices), len(seeds), args.seed,
              ",".join("%s %d" % (m, per_mode[m]) for m in modes),
              time.monotonic() - started, counts["crash"], counts["hang"],
              counts["unlocated"]))
    if findings:
        print("loom-fuzz: findings in %s/" % args.out)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
