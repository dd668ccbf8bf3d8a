"""Stale temporaries of an atomic export: a writer killed mid-write leaves
FILE.tmp.*, which the next run removes; a live writer's (stopped mid-write,
holding its lock) is never touched, and it completes when continued.

Usage: stale_temporaries.py EXE DIR (EXE exports 100 MB: Inputs/wide.mlir).
"""
import glob
import os
import signal
import subprocess
import sys
import time

exe, out = sys.argv[1], sys.argv[2]
target = os.path.join(out, "w.safetensors")
env = dict(os.environ, OPENBLAS_NUM_THREADS="1")


def temporaries():
    return sorted(glob.glob(target + ".tmp.*"))


def run(*extra, **more):
    return subprocess.run([exe, "--steps", "1", "--export", target, *extra],
                          env=dict(env, **more), stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        sys.exit(1)


for t in temporaries():
    os.unlink(t)
# 1. Killed mid-write (SIGKILL after 50 MB): the temporary stays behind.
killed = run(LOOMRT_FAULT_WRITE_LIMIT="50000000")
check(killed.returncode == -signal.SIGKILL, "the first writer was killed mid-write")
stale = temporaries()
check(len(stale) == 1, "it left one temporary: %s" % [os.path.basename(t) for t in stale])
# 2. The next run removes it before it trains (its own export then
#    replaces the file whole and leaves nothing either).
clean = run()
check(clean.returncode == 0, "the next run succeeded: " + clean.stderr.strip())
check(temporaries() == [], "the killed writer's temporary is gone")

# 3. A live writer: stopped (SIGSTOP) after 50 MB, its lock held.
live = subprocess.Popen([exe, "--steps", "1", "--export", target],
                        env=dict(env, LOOMRT_FAULT_WRITE_STOP="50000000"),
                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                        text=True)
deadline = time.time() + 60
state = ""
while time.time() < deadline:
    with open("/proc/%d/stat" % live.pid) as f:
        state = f.read().rsplit(")", 1)[1].split()[0]
    if state == "T":
        break
    time.sleep(0.05)
check(state == "T", "the live writer stopped mid-write")
held = temporaries()
check(len(held) == 1, "the live writer's temporary exists")
# Another run exporting the same file meanwhile leaves it alone.
other = run()
check(other.returncode == 0, "a second run succeeded beside it: " + other.stderr.strip())
check(temporaries() == held, "the live writer's temporary was not touched")
os.kill(live.pid, signal.SIGCONT)
_, err = live.communicate(timeout=120)
check(live.returncode == 0, "the live writer completed when continued: " + err.strip())
check(temporaries() == [], "nothing is left")
size = os.path.getsize(target)
check(size == 104857680, "the export is whole (%d bytes)" % size)
