#!/usr/bin/env python3
"""Every op's forward and backward kernel, through the whole compiler.

For each case the model is loss = sum(y * r), y the op applied to parameters
(and fixed inputs), r a parameter of random weights. One SGD step with
learning rate 1 from known parameters p0 gives the gradients exactly as
p0 - p1, so:
  - the gradient with respect to r is y itself: checked against a NumPy
    reference of the op computed here in float64 (the forward kernel);
  - the gradients with respect to the op's parameters (the backward kernels
    reached through autodiff) are checked against central finite
    differences of that reference loss, in float64;
  - the step-0 loss is checked against the reference loss.
Tolerances: forward and loss within 1e-4 relative + 1e-5 absolute (float32
kernels, float64 reference); gradients within 1e-3 relative + 1e-4
absolute of the finite differences (float32 accumulation over at most a few
dozen terms; the differences themselves are exact to ~1e-9).
"""

import argparse
import math
import re
import sys

import numpy as np

from loomtest import Program, bf16_round, mlir_type

rng = np.random.default_rng(1234)


def normal(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def positive(*shape):
    return (np.abs(rng.standard_normal(shape)) + 0.5).astype(np.float32)


def gelu(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention(q, k, v, causal):
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if causal:
        n = s.shape[-1]
        s = np.where(np.triu(np.ones((n, n), bool), 1), -np.inf, s)
    return softmax(s) @ v


def cross_entropy(logits, labels, ignore=-100):
    p = softmax(logits.reshape(-1, logits.shape[-1]))
    labels = labels.reshape(-1)
    keep = labels != ignore
    if not keep.any():
        return np.float64(0.0)
    return -np.log(p[keep, labels[keep]]).sum() / keep.sum()


class Case:
    def __init__(self, name, params, body, ref, inputs=None, fd=True):
        self.name, self.params, self.body, self.ref = name, params, body, ref
        self.inputs = inputs or {}
        self.fd = fd


def cases():
    c = []
    ab = lambda sa, sb, f=normal, g=normal: {"a": f(*sa), "b": g(*sb)}
    def mm(name, sa, sb, attrs, ref):
        c.append(Case(name, ab(sa, sb),
                      f"%y = train.matmul %a, %b{attrs} : {mlir_type(sa)}, {mlir_type(sb)}",
                      lambda p: ref(p["a"], p["b"])))
    mm("matmul", (3, 4), (4, 5), "", lambda a, b: a @ b)
    mm("matmul_transposed", (4, 3), (5, 4), " transpose_lhs transpose_rhs",
       lambda a, b: a.T @ b.T)
    mm("matmul_shared_rhs", (2, 3, 4), (4, 5), "", lambda a, b: a @ b)
    mm("matmul_shared_rhs_transposed", (2, 4, 3), (5, 4), " transpose_lhs transpose_rhs",
       lambda a, b: np.swapaxes(a, -1, -2) @ b.T)
    mm("matmul_batched", (2, 3, 4), (2, 4, 5), "", lambda a, b: a @ b)
    mm("matmul_batched_transposed", (2, 3, 4), (2, 5, 4), " transpose_rhs",
       lambda a, b: a @ np.swapaxes(b, -1, -2))

    def binary(op, sa, sb, ref, g=normal):
        c.append(Case(f"{op}_{'x'.join(map(str, sa))}_{'x'.join(map(str, sb))}",
                      ab(sa, sb, normal, g),
                      f"%y = train.{op} %a, %b : {mlir_type(sa)}, {mlir_type(sb)}",
                      lambda p: ref(p["a"].astype(np.float64), p["b"].astype(np.float64))))
    binary("add", (2, 3, 4), (4,), lambda a, b: a + b)
    binary("sub", (2, 3, 4), (3, 1), lambda a, b: a - b)
    binary("mul", (2, 3, 4), (2, 1, 4), lambda a, b: a * b)
    binary("div", (3, 4), (4,), lambda a, b: a / b, g=positive)
    binary("mul", (3, 4), (3, 4), lambda a, b: a * b)

    unary = [("relu", normal, lambda x: np.maximum(x, 0)),
             ("gelu", normal, gelu),
             ("silu", normal, lambda x: x / (1 + np.exp(-x))),
             ("tanh", normal, np.tanh),
             ("exp", normal, np.exp),
             ("log", positive, np.log),
             ("sqrt", positive, np.sqrt),
             ("rsqrt", positive, lambda x: 1 / np.sqrt(x))]
    for op, gen, ref in unary:
        c.append(Case(op, {"a": gen(3, 5)},
                      f"%y = train.{op} %a : {mlir_type((3, 5))}",
                      lambda p, ref=ref: ref(p["a"].astype(np.float64))))
    c.append(Case("scale", {"a": normal(3, 5)},
                  f"%y = train.scale %a by -0.75 : {mlir_type((3, 5))}",
                  lambda p: -0.75 * p["a"].astype(np.float64)))

    s = (2, 3, 4)
    c.append(Case("reduce_sum", {"a": normal(*s)},
                  f"%y = train.reduce sum %a dims [1] : {mlir_type(s)}",
                  lambda p: p["a"].astype(np.float64).sum(axis=1)))
    c.append(Case("reduce_mean", {"a": normal(*s)},
                  f"%y = train.reduce mean %a dims [0, 2] : {mlir_type(s)}",
                  lambda p: p["a"].astype(np.float64).mean(axis=(0, 2))))
    c.append(Case("reduce_max", {"a": normal(*s)},
                  f"%y = train.reduce max %a dims [2] : {mlir_type(s)}",
                  lambda p: p["a"].astype(np.float64).max(axis=2)))
    c.append(Case("broadcast", {"a": normal(3)},
                  f"%y = train.broadcast %a dims [1] : {mlir_type((3,))} -> {mlir_type(s)}",
                  lambda p: np.broadcast_to(p["a"].astype(np.float64)[None, :, None], s)))
    c.append(Case("softmax", {"a": normal(3, 5)},
                  f"%y = train.softmax %a : {mlir_type((3, 5))}",
                  lambda p: softmax(p["a"].astype(np.float64))))

    def layer_norm(x, g, b, eps=1e-5):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / np.sqrt(v + eps) * g + b
    c.append(Case("layer_norm", {"x": normal(3, 6), "g": normal(6), "b": normal(6)},
                  f"%y = train.layer_norm %x, %g, %b : {mlir_type((3, 6))}, {mlir_type((6,))}",
                  lambda p: layer_norm(*(p[k].astype(np.float64) for k in "xgb"))))
    c.append(Case("rms_norm", {"x": normal(3, 6), "g": normal(6)},
                  f"%y = train.rms_norm %x, %g : {mlir_type((3, 6))}, {mlir_type((6,))}",
                  lambda p: p["x"] / np.sqrt((p["x"].astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-6) * p["g"]))
    q = (1, 2, 4, 3)
    for causal in (True, False):
        c.append(Case("attention" + ("_causal" if causal else ""),
                      {"q": normal(*q), "k": normal(*q), "v": normal(*q)},
                      f"%y = train.attention %q, %k, %v{' causal' if causal else ''} : {mlir_type(q)}",
                      lambda p, causal=causal: attention(*(p[k].astype(np.float64) for k in "qkv"), causal)))
    c.append(Case("causal_mask", {"a": normal(2, 4, 4)},
                  f"%y = train.causal_mask %a fill 0.5 : {mlir_type((2, 4, 4))}",
                  lambda p: np.where(np.triu(np.ones((4, 4), bool), 1), 0.5, p["a"].astype(np.float64))))
    ids = np.array([[0, 3, 6], [3, 3, 1]], np.int32)
    c.append(Case("embedding", {"t": normal(7, 3)},
                  f"%y = train.embedding %t, %ids : {mlir_type((7, 3))}, {mlir_type((2, 3), 'i32')}",
                  lambda p: p["t"].astype(np.float64)[ids], inputs={"ids": ids}))
    labels = np.array([4, 0, -100, 2, 2, 1], np.int32)
    c.append(Case("cross_entropy", {"a": normal(6, 5)},
                  f"%y = train.cross_entropy %a, %labels : {mlir_type((6, 5))}, {mlir_type((6,), 'i32')}",
                  lambda p: cross_entropy(p["a"].astype(np.float64), labels),
                  inputs={"labels": labels}))
    c.append(Case("transpose", {"a": normal(2, 3, 4)},
                  f"%y = train.transpose %a [2, 0, 1] : {mlir_type((2, 3, 4))}",
                  lambda p: np.transpose(p["a"].astype(np.float64), (2, 0, 1))))
    c.append(Case("slice", {"a": normal(3, 5)},
                  f"%y = train.slice %a offsets [1, 1] sizes [2, 3] : {mlir_type((3, 5))}",
                  lambda p: p["a"].astype(np.float64)[1:3, 1:4]))
    c.append(Case("reshape", {"a": normal(2, 6)},
                  f"%r0 = train.reshape %a : {mlir_type((2, 6))} -> {mlir_type((3, 4))}\n"
                  f"  %y = train.tanh %r0 : {mlir_type((3, 4))}",
                  lambda p: np.tanh(p["a"].astype(np.float64).reshape(3, 4))))
    c.append(Case("repeat", {"h": normal(2, 4), "w": normal(3, 4, 4) * 0.5, "b": normal(4)},
                  REPEAT, lambda p: repeat_ref(p)))
    return c


REPEAT = """%y = train.repeat 3 carry(%h : tensor<2x4xf32>) stacked(%w : tensor<3x4x4xf32>)
      invariant(%b : tensor<4xf32>) : (tensor<2x4xf32>) {
  ^bb0(%i: index, %c: tensor<2x4xf32>, %wi: tensor<4x4xf32>, %bi: tensor<4xf32>):
    %m = train.matmul %c, %wi : tensor<2x4xf32>, tensor<4x4xf32>
    %z = train.add %m, %bi : tensor<2x4xf32>, tensor<4xf32>
    %t = train.tanh %z : tensor<2x4xf32>
    train.yield carry(%t : tensor<2x4xf32>)
  }"""


def repeat_ref(p):
    h = p["h"].astype(np.float64)
    for layer in range(3):
        h = np.tanh(h @ p["w"][layer] + p["b"])
    return h


def model_text(case, y_shape, bf16=False):
    """The check's model; with `bf16`, the op runs on bf16 tensors: each
    parameter narrowed (train.convert) before it, every f32 type of the
    body bf16, the result widened after it (the loss stays f32)."""
    lines = ["train.model @check attributes {optimizer = #train.sgd<>, "
             "schedule = #train.schedule<lr = 1.0>} {"]
    for name, value in case.params.items():
        lines.append(f'  %{name} = train.param "{name}" init(#train.init<zeros>) : '
                     f"{mlir_type(value.shape)}")
    for name, value in case.inputs.items():
        lines.append(f'  %{name} = train.input "{name}" : {mlir_type(value.shape, "i32")}')
    yt = mlir_type(y_shape)
    lines.append(f'  %r = train.param "r" init(#train.init<zeros>) : {yt}')
    body = case.body
    if bf16:
        for name, value in case.params.items():
            lines.append(f"  %{name}_bf16 = train.convert %{name} to bf16 : "
                         f"{mlir_type(value.shape)}")
            body = re.sub(rf"%{name}\b(?!_bf16)", f"%{name}_bf16", body)
        body = body.replace("xf32>", "xbf16>")
        if y_shape:  # a scalar result (a loss) is f32 already
            body = body.replace("%y = ", "%y_bf16 = ")
            body += f"\n  %y = train.convert %y_bf16 to f32 : {mlir_type(y_shape, 'bf16')}"
    lines.append("  " + body)
    lines.append(f"  %p = train.mul %y, %r : {yt}, {yt}")
    dims = ", ".join(str(i) for i in range(len(y_shape)))
    lines.append(f"  %l = train.reduce sum %p dims [{dims}] : {yt}")
    lines.append("  train.output loss(%l : tensor<f32>)")
    lines.append("}")
    return "\n".join(lines) + "\n"


def finite_differences(f, params, name, h=1e-5):
    base = {k: v.astype(np.float64) for k, v in params.items()}
    grad = np.zeros_like(base[name])
    flat = base[name].reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + h
        up = f(base)
        flat[i] = old - h
        down = f(base)
        flat[i] = old
        grad.reshape(-1)[i] = (up - down) / (2 * h)
    return grad


TARGET = "host"


def bf16_ulp(x):
    """The spacing of bf16 numbers at |x| (that of the smallest normal
    below it)."""
    e = np.floor(np.log2(np.maximum(np.abs(x), 2.0 ** -126)))
    return 2.0 ** (e - 7)


# The ops whose backward reads their forward's output, which bf16 rounds:
# the gradient's reference is their rule in float64 on the rounded output
# (y) and cotangent (r), with the number of kernels it runs (each rounds).
BACKWARD_FROM_OUTPUT = {
    "tanh": (lambda y, r: (1 - y * y) * r, 1),
    "exp": (lambda y, r: y * r, 1),
    "sqrt": (lambda y, r: 0.5 * r / y, 2),
    "rsqrt": (lambda y, r: -0.5 * y ** 3 * r, 4),
    "softmax": (lambda y, r: y * (r - (r * y).sum(-1, keepdims=True)), 1),
    "reshape": (lambda y, r: ((1 - y * y) * r).reshape(2, 6), 1),  # of tanh
}


def check_bf16(loomc, case):
    """The op on bf16 tensors (its loomrt_<op>_bf16 kernels, forward and
    backward): bf16 storage, f32 compute, each result rounded once. The
    reference is the op in float64 on the bf16-rounded parameters (and, for
    the gradients, the bf16-rounded cotangent r), by the same finite
    differences: each forward and gradient element within one bf16 ulp of
    it plus 2^-9 of the largest (one rounding; up to four where a backward
    rule runs several kernels), and the forward rounded to the nearest bf16
    of the reference in at least 90% of the elements (a kernel that
    truncated, or rounded twice, would not be). repeat checks the loop
    carrying bf16 buffers, not a kernel: its forward (3 layers of 3
    kernels) within 3 ulps; its gradients go back through 9 roundings, and
    through cancellations (the carry's gradient is a sum of larger terms)
    that make an element bound meaningless, so each is checked as a whole:
    a relative norm error below 0.1 (a missing or misplaced gradient is
    near 1)."""
    rounded = {k: bf16_round(v) for k, v in case.params.items()}
    y_ref = np.asarray(case.ref(rounded), np.float64)
    r = normal(*y_ref.shape) if y_ref.shape else np.array(normal(1)[0])
    params = dict(case.params, r=r.astype(np.float32))
    program = Program(loomc, model_text(case, y_ref.shape, bf16=True),
                      case.name + "-bf16", [f"--target={TARGET}"])
    rows, exported = program.run(steps=1, params=params,
                                 inputs=case.inputs or None)
    problems = []
    ulps = 3 if case.name == "repeat" else 1

    def close(what, got, want, whole=False):
        got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
        if whole:
            error = np.linalg.norm(got - want) / np.linalg.norm(want)
            if error > 0.1:
                problems.append(f"{what}: relative norm error {error:.3f}")
            return
        bound = ulps * bf16_ulp(want) + 2.0 ** -9 * np.abs(want).max()
        err = np.abs(got - want) - bound
        if err.max() > 0:
            i = int(np.argmax(err))
            problems.append(f"{what}: element {i}: {got.reshape(-1)[i]:.7g} "
                            f"vs {want.reshape(-1)[i]:.7g}")

    loss_ref = float((y_ref * r).sum())
    got_loss = rows[0]["loss"]
    if abs(got_loss - loss_ref) > 1e-2 * abs(loss_ref) + 1e-3 * np.abs(y_ref * r).sum():
        problems.append(f"loss: {got_loss:.7g} vs {loss_ref:.7g}")
    grads = {k: params[k].astype(np.float64) - exported[k].astype(np.float64)
             for k in params}
    y = grads["r"]
    close("forward (gradient of r)", y, y_ref)
    if y_ref.ndim and case.name != "repeat":
        # y is the stored bf16 up to the f32 rounding of the SGD step that
        # recovers it (far below bf16's spacing): rounding recovers it.
        stored = bf16_round(y.astype(np.float32))
        nearest = np.mean(bf16_round(y_ref.astype(np.float32)) == stored)
        if nearest < 0.9:
            problems.append(f"forward: only {nearest:.0%} of the elements are "
                            "the reference rounded to the nearest bf16")
    r16 = bf16_round(r).astype(np.float64)
    if case.name in BACKWARD_FROM_OUTPUT:
        rule, ulps = BACKWARD_FROM_OUTPUT[case.name]
        y16 = bf16_round(y.astype(np.float32)).astype(np.float64)
        close("gradient of a", grads["a"], rule(y16, r16))
        return problems
    loss = lambda p: float((np.asarray(case.ref(p), np.float64) * r16).sum())
    for name in case.params:
        fd = finite_differences(loss, rounded, name)
        close(f"gradient of {name}", grads[name], fd,
              whole=case.name == "repeat")
    return problems


def check(loomc, case):
    y_ref = np.asarray(case.ref(case.params), np.float64)
    r = normal(*y_ref.shape) if y_ref.shape else np.array(normal(1)[0])
    params = dict(case.params, r=r.astype(np.float32))
    program = Program(loomc, model_text(case, y_ref.shape), case.name,
                      [f"--target={TARGET}"])
    rows, exported = program.run(steps=1, params=params,
                                 inputs=case.inputs or None)
    problems = []

    def close(what, got, want, rtol, atol):
        got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
        err = np.abs(got - want) - (atol + rtol * np.abs(want))
        if err.max() > 0:
            i = int(np.argmax(err))
            problems.append(f"{what}: element {i}: {got.reshape(-1)[i]:.7g} "
                            f"vs {want.reshape(-1)[i]:.7g}")

    loss_ref = float((y_ref * r).sum())
    close("loss", rows[0]["loss"], loss_ref, 1e-4, 1e-5)
    grads = {k: params[k].astype(np.float64) - exported[k].astype(np.float64)
             for k in params}
    close("forward (gradient of r)", grads["r"], y_ref, 1e-4, 1e-5)
    loss = lambda p: float((np.asarray(case.ref(p), np.float64) * r).sum())
    for name in case.params:
        fd = finite_differences(loss, case.params, name)
        close(f"gradient of {name}", grads[name], fd, 1e-3, 1e-4)
    return problems


def check_dropout(loomc):
    """Dropout has no reference mask to compare with: check its defining
    properties instead. Each element is either dropped or scaled by
    1/(1-rate); the gradient uses the same mask; about `rate` are dropped;
    a different seed gives a different mask."""
    shape, rate = (64, 64), 0.25
    case = Case("dropout", {"a": positive(*shape)},
                f"%y = train.dropout %a rate {rate} seed 5 : {mlir_type(shape)}",
                None)
    program = Program(loomc, model_text(case, shape), "dropout",
                      [f"--target={TARGET}"])
    r = normal(*shape)
    params = {"a": case.params["a"], "r": r}
    _, exported = program.run(steps=1, params=params)
    y = params["r"].astype(np.float64) - exported["r"]
    ga = params["a"].astype(np.float64) - exported["a"]
    a = params["a"].astype(np.float64)
    kept = np.abs(y) > 0
    problems = []
    if not np.allclose(y[kept], a[kept] / (1 - rate), rtol=1e-5, atol=1e-6):
        problems.append("kept elements are not scaled by 1/(1-rate)")
    if not np.allclose(ga, np.where(kept, r / (1 - rate), 0), rtol=1e-4, atol=1e-5):
        problems.append("the gradient does not use the forward mask")
    dropped = 1 - kept.mean()
    if abs(dropped - rate) > 0.03:
        problems.append(f"dropped fraction {dropped:.3f}, expected {rate}")
    _, other = program.run(steps=1, params=params, extra=["--seed", "9"])
    if np.array_equal(params["r"] - other["r"], y.astype(np.float32)):
        problems.append("--seed does not change the mask")
    if TARGET != "host":
        # Both backends draw the mask from the same counter-based generator.
        host = Program(loomc, model_text(case, shape), "dropout-host")
        _, on_host = host.run(steps=1, params=params)
        host_kept = np.abs(params["r"].astype(np.float64) - on_host["r"]) > 0
        if not np.array_equal(kept, host_kept):
            problems.append("the mask differs from the host backend's")
    return problems


def check_convert(loomc):
    """train.convert between f32 and bf16, both ways, through autodiff.
    loss = sum(f32(bf16(p)) * r) + sum(f32(bf16(u)) * v) with r = u = 0 and
    one SGD step at learning rate 1: r becomes -round(p) (the forward
    narrowing) and u becomes -round(v) (the backward's: the cotangent v
    narrowed on its way back), both exactly. p and v hold ties to even and
    to odd, values one ulp either side of a tie, subnormals and the largest
    finite bf16; bits must match the rounding computed here."""
    ties = np.array([0x3F808000, 0x3F818000, 0x3F807FFF, 0x3F808001,
                     0xBF808000, 0xBF818000, 0x00008000, 0x00018000,
                     0x00000001, 0x007FFFFF, 0x7F7F0000, 0x7F7F7FFF,
                     0x00000000, 0x80000000], np.uint32).view(np.float32)
    rng2 = np.random.default_rng(7)
    p = np.concatenate([ties, rng2.standard_normal(50).astype(np.float32)])
    v = np.concatenate([ties[::-1], rng2.standard_normal(50).astype(np.float32)])
    n = len(p)
    t = mlir_type((n,))
    b = mlir_type((n,), "bf16")
    text = f"""train.model @convert attributes {{optimizer = #train.sgd<>,
    schedule = #train.schedule<lr = 1.0>}} {{
  %p = train.param "p" init(#train.init<zeros>) : {t}
  %r = train.param "r" init(#train.init<zeros>) : {t}
  %u = train.param "u" init(#train.init<zeros>) : {t}
  %v = train.param "v" init(#train.init<zeros>) : {t}
  %p16 = train.convert %p to bf16 : {t}
  %y = train.convert %p16 to f32 : {b}
  %u16 = train.convert %u to bf16 : {t}
  %z = train.convert %u16 to f32 : {b}
  %a = train.mul %y, %r : {t}, {t}
  %c = train.mul %z, %v : {t}, {t}
  %s = train.add %a, %c : {t}, {t}
  %l = train.reduce sum %s dims [0] : {t}
  train.output loss(%l : tensor<f32>)
}}
"""
    program = Program(loomc, text, "convert", [f"--target={TARGET}"])
    zeros = np.zeros(n, np.float32)
    _, exported = program.run(steps=1, params={"p": p, "r": zeros, "u": zeros, "v": v})
    problems = []
    for name, got, want in (("forward (r)", -exported["r"], bf16_round(p)),
                            ("backward (u)", -exported["u"], bf16_round(v))):
        got = np.asarray(got, np.float32)
        wrong = got != want  # as values: -0 and 0 are one
        if wrong.any():
            i = int(np.flatnonzero(wrong)[0])
            problems.append(f"{name}: element {i}: 0x{got.view(np.uint32)[i]:08x} "
                            f"vs 0x{want.view(np.uint32)[i]:08x}")
    return problems


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--loomc", required=True)
    parser.add_argument("--only", help="run the cases whose name contains this")
    parser.add_argument("--target", default="host", choices=["host", "cuda"],
                        help="the backend the executables are built for")
    parser.add_argument("--bf16", action="store_true",
                        help="check every op's bf16 kernels instead (check_bf16)")
    args = parser.parse_args()
    global TARGET
    TARGET = args.target
    failures = 0

    def report(name, problems):
        nonlocal failures
        print(f"{'ok  ' if not problems else 'FAIL'} {name}")
        for p in problems:
            print("     " + p)
        failures += bool(problems)

    wanted = lambda name: not args.only or args.only in name
    if args.bf16:
        for case in cases():
            if wanted(case.name):
                report(case.name + " bf16", check_bf16(args.loomc, case))
        print(f"{failures} failed on the {TARGET} backend (bf16)")
        return 1 if failures else 0
    for case in cases():
        if wanted(case.name):
            report(case.name, check(args.loomc, case))
    if wanted("dropout"):
        report("dropout", check_dropout(args.loomc))
    if wanted("convert_bf16"):
        report("convert_bf16", check_convert(args.loomc))
    print(f"{failures} failed on the {TARGET} backend")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
