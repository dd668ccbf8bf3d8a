#!/usr/bin/env python3
"""The generated GPT against the same architecture in PyTorch (CPU).

1. Gradients at step 0: the model compiled with SGD at learning rate 1 (no
   momentum, decay or clipping) from weights written here, so p0 - p1 is
   Loom's gradient. Loss within 1e-5 relative; each gradient tensor within
   a relative norm error ||g - g_torch|| / ||g_torch|| of 1e-4 (both sides
   float32; the differences are reduction order).
2. Ten AdamW steps with warm-up, cosine decay and global-norm clipping from
   the same weights on a fixed batch: each loss within 1e-5 + 1e-4 |loss|
   (the AdamW tolerance of the parity tests).
3. Causality: with every label from position t on ignored, changing the
   tokens from t on leaves the loss unchanged, bit for bit.
"""

import argparse
import math
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

from loomtest import Program

L, D, H, FF, V, T, B = 2, 16, 2, 32, 32, 8, 3
STACKED = ["ln1_g", "ln1_b", "w_qkv", "b_qkv", "w_o", "b_o", "ln2_g", "ln2_b",
           "w_fc", "b_fc", "w_proj", "b_proj"]
NO_DECAY = {"ln1_g", "ln1_b", "b_qkv", "b_o", "ln2_g", "ln2_b", "b_fc", "b_proj",
            "lnf_g", "lnf_b"}


def generate(gen, extra):
    args = [sys.executable, gen, "--layers", str(L), "--d-model", str(D),
            "--heads", str(H), "--ffn", str(FF), "--vocab", str(V),
            "--context", str(T), "--batch", str(B)] + extra
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def initial_weights():
    rng = np.random.default_rng(7)
    n = lambda *s, std=0.2: (rng.standard_normal(s) * std).astype(np.float32)
    w = {"wte": n(V, D), "wpe": n(T, D),
         "ln1_g": 1 + n(L, D, std=0.1), "ln1_b": n(L, D, std=0.1),
         "w_qkv": n(L, D, 3 * D), "b_qkv": n(L, 3 * D, std=0.05),
         "w_o": n(L, D, D), "b_o": n(L, D, std=0.05),
         "ln2_g": 1 + n(L, D, std=0.1), "ln2_b": n(L, D, std=0.1),
         "w_fc": n(L, D, FF), "b_fc": n(L, FF, std=0.05),
         "w_proj": n(L, FF, D), "b_proj": n(L, D, std=0.05),
         "lnf_g": 1 + n(D, std=0.1), "lnf_b": n(D, std=0.1)}
    return w


def batch(seed=3):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, V, (B, T)).astype(np.int32)
    labels = rng.integers(0, V, (B, T)).astype(np.int32)
    labels[0, 2] = -100  # an ignored position
    return tokens, labels


def torch_loss(w, tokens, labels, heads=H):
    """The generated GPT's loss in PyTorch; sizes follow the weights."""
    layers, d = w["w_qkv"].shape[0], w["wte"].shape[1]
    b, t = tokens.shape
    v = w["wte"].shape[0]
    x = w["wte"][torch.as_tensor(tokens, dtype=torch.long)] + w["wpe"]
    for l in range(layers):
        a = F.layer_norm(x, (d,), w["ln1_g"][l], w["ln1_b"][l], eps=1e-5)
        qkv = a @ w["w_qkv"][l] + w["b_qkv"][l]
        q, k, val = (qkv[..., i * d:(i + 1) * d].reshape(b, t, heads, d // heads)
                     .transpose(1, 2) for i in range(3))
        s = q @ k.transpose(-1, -2) / math.sqrt(d // heads)
        s = s.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), float("-inf"))
        att = (torch.softmax(s, -1) @ val).transpose(1, 2).reshape(b, t, d)
        x = x + att @ w["w_o"][l] + w["b_o"][l]
        m = F.layer_norm(x, (d,), w["ln2_g"][l], w["ln2_b"][l], eps=1e-5)
        f = F.gelu(m @ w["w_fc"][l] + w["b_fc"][l], approximate="tanh")
        x = x + f @ w["w_proj"][l] + w["b_proj"][l]
    y = F.layer_norm(x, (d,), w["lnf_g"], w["lnf_b"], eps=1e-5)
    logits = y @ w["wte"].T
    return F.cross_entropy(logits.reshape(-1, v),
                           torch.as_tensor(labels, dtype=torch.long).reshape(-1),
                           ignore_index=-100)


def schedule(step, lr, warmup, total, min_lr):
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = min(max((step - warmup) / (total - warmup), 0.0), 1.0)
    return min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(math.pi * progress))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--loomc", required=True)
    p.add_argument("--loom-gen", required=True)
    a = p.parse_args()
    torch.manual_seed(0)
    w0 = initial_weights()
    tokens, labels = batch()
    inputs = {"tokens": tokens, "labels": labels}
    failures = []

    # 1. Loss and every gradient at step 0.
    sgd = Program(a.loomc, generate(a.loom_gen, [
        "--optimizer", "sgd", "--momentum", "0", "--weight-decay", "0", "--clip", "0",
        "--decay", "constant", "--warmup", "0", "--lr", "1.0"]), "gpt_sgd")
    rows, w1 = sgd.run(steps=1, params=w0, inputs=inputs)
    tw = {k: torch.tensor(v, requires_grad=True) for k, v in w0.items()}
    loss = torch_loss(tw, tokens, labels)
    loss.backward()
    if abs(rows[0]["loss"] - loss.item()) > 1e-5 * abs(loss.item()):
        failures.append(f"step-0 loss {rows[0]['loss']:.8f} vs torch {loss.item():.8f}")
    worst = 0.0
    for name, value in w0.items():
        g = value.astype(np.float64) - w1[name].astype(np.float64)
        ref = tw[name].grad.double().numpy()
        err = np.linalg.norm(g - ref) / max(np.linalg.norm(ref), 1e-30)
        worst = max(worst, err)
        if err > 1e-4:
            failures.append(f"gradient of {name}: relative norm error {err:.2e}")
    print(f"step-0 loss loom {rows[0]['loss']:.7f} torch {loss.item():.7f}; "
          f"worst gradient relative error {worst:.2e}")

    # 2. Ten AdamW steps with the schedule and clipping.
    lr, warmup, total = 3e-3, 3, 10
    adamw = Program(a.loomc, generate(a.loom_gen, [
        "--lr", str(lr), "--warmup", str(warmup), "--total", str(total),
        "--weight-decay", "0.1", "--clip", "1.0"]), "gpt_adamw")
    rows, _ = adamw.run(steps=10, params=w0, inputs=inputs)
    tw = {k: torch.tensor(v, requires_grad=True) for k, v in w0.items()}
    groups = [{"params": [tw[k] for k in tw if k not in NO_DECAY], "weight_decay": 0.1},
              {"params": [tw[k] for k in tw if k in NO_DECAY], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8)
    for step in range(10):
        for g in opt.param_groups:
            g["lr"] = schedule(step, lr, warmup, total, lr / 10)
        opt.zero_grad()
        loss = torch_loss(tw, tokens, labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(tw.values()), 1.0)
        opt.step()
        got, want = rows[step]["loss"], loss.item()
        print(f"adamw step {step}: loom {got:.7f} torch {want:.7f} lr {rows[step]['lr']:.3e}")
        if abs(got - want) > 1e-5 + 1e-4 * abs(want):
            failures.append(f"AdamW step {step}: loss {got:.7f} vs torch {want:.7f}")

    # 3. Causality.
    cut = 5
    masked = labels.copy()
    masked[:, cut:] = -100
    first, _ = sgd.run(steps=1, params=w0, inputs={"tokens": tokens, "labels": masked})
    changed = tokens.copy()
    changed[:, cut:] = (changed[:, cut:] + 11) % V
    second, _ = sgd.run(steps=1, params=w0, inputs={"tokens": changed, "labels": masked})
    if first[0]["loss"] != second[0]["loss"]:
        failures.append(f"future tokens changed the loss of earlier positions: "
                        f"{first[0]['loss']!r} vs {second[0]['loss']!r}")
    changed_past = tokens.copy()
    changed_past[:, 0] = (changed_past[:, 0] + 11) % V
    third, _ = sgd.run(steps=1, params=w0, inputs={"tokens": changed_past, "labels": masked})
    if third[0]["loss"] == first[0]["loss"]:
        failures.append("changing a past token did not change the loss (the check is blind)")
    print(f"causality: loss with future tokens changed {second[0]['loss']!r} "
          f"== {first[0]['loss']!r}")

    for f in failures:
        print("FAIL " + f)
    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
