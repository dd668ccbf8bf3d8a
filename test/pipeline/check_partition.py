"""Stage partitions of a model whose layers cost different amounts (five
repeats of different widths, then a head and the loss) are optimal: for
every stage count, the slowest stage dist-pipeline-partition chooses is as
fast as the best of all contiguous cuts, found by enumerating them; the
recorded stages are contiguous, in order, and cost what is recorded."""
import argparse
import itertools
import re
import subprocess
import sys

WIDTHS = [(2, 8), (1, 64), (3, 24), (1, 40), (2, 16)]  # (layers, hidden)


def model():
    d = 16
    lines = ["train.model @hetero attributes {optimizer = #train.sgd<>, "
             "schedule = #train.schedule<lr = 0.1>} {"]
    for k, (count, h) in enumerate(WIDTHS):
        lines.append(f'  %a{k} = train.param "a{k}" init(#train.init<normal, 0.1>) : tensor<{count}x{d}x{h}xf32>')
        lines.append(f'  %b{k} = train.param "b{k}" init(#train.init<normal, 0.1>) : tensor<{count}x{h}x{d}xf32>')
    lines.append(f'  %head = train.param "head" init(#train.init<normal, 0.1>) : tensor<{d}x8xf32>')
    lines.append(f'  %x = train.input "x" : tensor<4x{d}xf32>')
    lines.append('  %y = train.input "y" : tensor<4xi32>')
    carry = "%x"
    for k, (count, h) in enumerate(WIDTHS):
        lines += [
            f"  %h{k} = train.repeat {count} carry({carry} : tensor<4x{d}xf32>) "
            f"stacked(%a{k}, %b{k} : tensor<{count}x{d}x{h}xf32>, tensor<{count}x{h}x{d}xf32>) : (tensor<4x{d}xf32>) {{",
            f"  ^bb0(%i: index, %c: tensor<4x{d}xf32>, %wa: tensor<{d}x{h}xf32>, %wb: tensor<{h}x{d}xf32>):",
            f"    %u = train.matmul %c, %wa : tensor<4x{d}xf32>, tensor<{d}x{h}xf32>",
            f"    %g = train.gelu %u : tensor<4x{h}xf32>",
            f"    %v = train.matmul %g, %wb : tensor<4x{h}xf32>, tensor<{h}x{d}xf32>",
            f"    %r = train.add %c, %v : tensor<4x{d}xf32>, tensor<4x{d}xf32>",
            f"    train.yield carry(%r : tensor<4x{d}xf32>)",
            "  }"]
        carry = f"%h{k}"
    lines += [f"  %logits = train.matmul {carry}, %head : tensor<4x{d}xf32>, tensor<{d}x8xf32>",
              "  %loss = train.cross_entropy %logits, %y : tensor<4x8xf32>, tensor<4xi32>",
              "  train.output loss(%loss : tensor<f32>)", "}"]
    return "\n".join(lines) + "\n"


def ints(text, name):
    m = re.search(name + r" = \[([0-9, ]+)\]", text)
    return [int(v) for v in m.group(1).split(",")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--loom-opt", required=True)
    a = ap.parse_args()
    src = model()
    failures = []
    for stages in range(2, 8):
        out = subprocess.run(
            [a.loom_opt, "-", f"--dist-mesh=mesh=pp={stages}", "--dist-pipeline-partition"],
            input=src, capture_output=True, text=True, check=True).stdout
        costs = ints(out, "unit_costs")
        chosen = int(re.search(r"bottleneck = (\d+)", out).group(1))
        stage_costs = ints(out, "stage_costs")
        n = len(costs)
        best = min(
            max(sum(costs[i:j]) for i, j in zip((0,) + cuts, cuts + (n,)))
            for cuts in itertools.combinations(range(1, n), stages - 1))
        # The stage of every unit, in chain order: the repeats' layers, then
        # the head's run.
        layer_stages = []
        for m in re.finditer(r"train.repeat \d+ .*dist.stages = array<i64: ([0-9, ]+)>", out):
            layer_stages += [int(v) for v in m.group(1).split(",")]
        head_stage = int(re.search(r"train.cross_entropy .*dist.stage = (\d+)", out).group(1))
        unit_stages = layer_stages + [head_stage]
        ok = (chosen == best and max(stage_costs) == chosen
              and unit_stages == sorted(unit_stages)
              and set(unit_stages) == set(range(stages))
              and all(sum(c for c, s in zip(costs, unit_stages) if s == k) == stage_costs[k]
                      for k in range(stages)))
        print(f"pp={stages}: unit costs {costs}; chosen bottleneck {chosen}, "
              f"brute-force optimum {best}; stages {unit_stages}")
        if not ok:
            failures.append(stages)
    if failures:
        print("FAIL: not optimal or inconsistent for pp =", failures)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
