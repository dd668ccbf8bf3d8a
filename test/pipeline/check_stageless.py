"""Lists the ops of no pipeline stage (no `dist.stage`) that stand directly in
the bodies of a rank program's micro-batch loops (the repeats of no stage at
the model's top level): the ops every action of a schedule runs. Index
arithmetic, constants, views and terminators are left out: they are not
kernels."""
import re
import sys

SKIP = {"train.yield", "arith.constant", "train.reshape"}

inside = False
count = 0
for line in open(sys.argv[1]):
    line = line.rstrip("\n")
    if re.match(r"^    (%\S+.*= )?train\.repeat \d+", line) and "dist.stage" not in line:
        inside = True
        continue
    if inside and line.startswith("    }"):
        inside = False
        continue
    if not inside or not re.match(r"^      \S", line) or "dist.stage" in line:
        continue
    m = re.search(r"= ([a-z_]+\.[a-z_]+)|^\s+([a-z_]+\.[a-z_]+)", line)
    if not m:
        continue
    name = m.group(1) or m.group(2)
    if name in SKIP or name.startswith("arith."):
        continue
    types = line.rsplit(" : ", 1)[-1]
    print(f"{name} : {types}")
    count += 1
print(f"{count} ops of no stage")
