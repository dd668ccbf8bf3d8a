#!/usr/bin/env python3
"""The fused attention's rows (runtime/common/FlashAttention.h, which the
cuda backend's attention kernels run one thread per row) against
softmax(q k^T / sqrt(d)) v and its backward written here in float64 with
the s x s matrix, on random heads with and without the causal mask, in f32
and in bf16 storage (inputs rounded to bf16 first, the reference on the
rounded values). Bounds relative to each result's largest magnitude: 1e-5
in f32 (f32 sums over s and d), 2^-8 in bf16 (one rounding of each result
to bf16's 8 bits)."""

import os
import subprocess
import sys
import tempfile

import numpy as np
import torch


def reference(q, k, v, g, causal):
    d = q.shape[-1]
    s = q @ k.transpose(0, 2, 1) / np.sqrt(d)
    if causal:
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    out = p @ v
    dv = p.transpose(0, 2, 1) @ g
    dp = g @ v.transpose(0, 2, 1)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    dq = ds @ k / np.sqrt(d)
    dk = ds.transpose(0, 2, 1) @ q / np.sqrt(d)
    return out, dq, dk, dv


def main():
    unit = sys.argv[1]
    work = tempfile.mkdtemp(prefix="loom-flash-")
    rng = np.random.default_rng(7)
    failed = 0
    for heads, s, d in ((3, 17, 8), (2, 64, 32), (1, 5, 128)):
        for causal in (False, True):
            for storage in ("f32", "bf16"):
                x = rng.standard_normal((4, heads, s, d)).astype(np.float32)
                path, out = os.path.join(work, "in"), os.path.join(work, "out")
                with open(path, "wb") as f:
                    f.write(np.array([heads, s, d, int(causal)], np.int64).tobytes())
                    f.write(x.tobytes())
                subprocess.run([unit, "attention", storage, path, out], check=True)
                got = np.fromfile(out, np.float32).reshape(4, heads, s, d)
                if storage == "bf16":
                    x = torch.from_numpy(x).to(torch.bfloat16).to(torch.float32).numpy()
                want = reference(*(x[i].astype(np.float64) for i in range(4)), causal)
                bound = 1e-5 if storage == "f32" else 2.0 ** -8
                for name, g, w in zip(("out", "dq", "dk", "dv"), got, want):
                    err = np.abs(g - w).max() / np.abs(w).max()
                    ok = err <= bound
                    failed += not ok
                    print(f"{'ok  ' if ok else 'FAIL'} {storage} heads={heads} s={s} d={d} "
                          f"causal={int(causal)} {name}: relative error {err:.2e} "
                          f"(bound {bound:.1e})")
    print(f"fused attention: {'ok' if not failed else f'{failed} failed'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
