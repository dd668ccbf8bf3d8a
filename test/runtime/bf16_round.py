#!/usr/bin/env python3
"""The runtime's float -> bf16 narrowing against torch.bfloat16's.

Inputs: every kind of float whose rounding differs (zeros, subnormals and
the boundary to the normals, exact ties to even and odd, one ulp either
side of a tie, the largest finite bf16 and the values that round past it
to infinity, infinities, NaNs of either sign and several payloads) and
200,000 random bit patterns. The runtime's bits (loomrt-unit-test bf16)
must equal torch's for every non-NaN input; a NaN must become CUDA's
canonical NaN 0x7fff (what __float2bfloat16_rn returns; torch returns
0x7fc0). Widening must give the bf16 value exactly.
"""

import os
import subprocess
import sys
import tempfile

import numpy as np
import torch


def bits(*patterns):
    return np.array(patterns, np.uint32)


def inputs():
    special = [
        0x00000000, 0x80000000,             # +0, -0
        0x00000001, 0x80000001,             # smallest subnormal
        0x00007fff, 0x00008000, 0x00008001, # below, at and above a tie, even
        0x00018000, 0x00017fff, 0x00018001, # the same around an odd kept bit
        0x007f8000, 0x007fffff, 0x00800000, # subnormal to normal
        0x3f808000, 0x3f818000, 0x3f807fff, 0x3f808001,   # ties at 1.0
        0xbf808000, 0xbf818000,             # negative ties
        0x7f7f0000, 0x7f7f7fff,             # largest finite bf16, just below its tie
        0x7f7f8000, 0x7f7fffff,             # overflow to +inf
        0xff7f8000, 0xff7fffff,             # overflow to -inf
        0x7f800000, 0xff800000,             # infinities
        0x7fc00000, 0xffc00000, 0x7f800001, 0x7fbfffff, 0xff800001,  # NaNs
        0x7fff0000, 0x7f810000,             # NaNs whose top half alone looks like one
    ]
    rng = np.random.default_rng(16)
    random = rng.integers(0, 2 ** 32, 200000, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([bits(*special), random])


def main():
    unit = sys.argv[1]
    patterns = inputs()
    values = patterns.view(np.float32)
    work = tempfile.mkdtemp(prefix="loom-bf16-")
    src, dst = os.path.join(work, "in.bin"), os.path.join(work, "out.bin")
    values.tofile(src)
    subprocess.run([unit, "bf16", src, dst], check=True)
    raw = np.fromfile(dst, np.uint8)
    n = len(values)
    got = raw[:2 * n].view(np.uint16)
    wide = raw[2 * n:].view(np.float32)

    ref_bf16 = torch.from_numpy(values.copy()).to(torch.bfloat16)
    ref = ref_bf16.view(torch.int16).numpy().view(np.uint16)
    ref_wide = ref_bf16.to(torch.float32).numpy()
    nan = np.isnan(values)
    failures = 0

    def report(what, mask):
        nonlocal failures
        if mask.any():
            i = int(np.flatnonzero(mask)[0])
            print(f"FAIL {what}: {mask.sum()} inputs, first 0x{patterns[i]:08x}: "
                  f"got 0x{got[i]:04x}, torch 0x{ref[i]:04x}")
            failures += 1

    report("bits differ from torch", ~nan & (got != ref))
    report("NaN is not 0x7fff", nan & (got != 0x7fff))
    report("widening is not exact", ~nan & (wide.view(np.uint32) != ref_wide.view(np.uint32)))
    report("NaN widens to a number", nan & ~np.isnan(wide))
    subnormal = (patterns & 0x7f800000 == 0) & (patterns & 0x007fffff != 0)
    kept = subnormal & (ref & 0x7fff != 0)
    report("a subnormal flushed to zero", kept & (got & 0x7fff == 0))
    overflow = ~nan & ~np.isinf(values) & np.isinf(ref_wide)
    print(f"{n} floats: {subnormal.sum()} subnormal, {nan.sum()} NaN, "
          f"{overflow.sum()} finite that overflow to infinity, "
          f"{(np.isinf(values)).sum()} infinite")
    if not overflow.any() or not kept.any():
        print("FAIL the inputs miss a case")
        failures += 1
    print("bf16 rounding: ok" if not failures else f"{failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
