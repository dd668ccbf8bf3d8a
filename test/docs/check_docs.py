"""Runs the commands of a document's ```console blocks and checks the
output it quotes. In a block, a line starting with "$ " is a command (run
with bash in a scratch directory that sees the source tree's examples/ and
clusters/ (and the build tree as build/), with the build's tools first on
PATH, and mpirun allowed to run
as root with more ranks than cores); the lines after it, up to the next
command, must each appear in the command's output as part of a line, in
order. A figure a document quotes is so always what the command prints."""
import argparse
import os
import re
import subprocess
import sys
import tempfile

BLOCK = re.compile(r"```console\n(.*?)```", re.S)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--build", help="the build tree, seen as build/")
    ap.add_argument("documents", nargs="+")
    a = ap.parse_args()
    failures = 0
    with tempfile.TemporaryDirectory() as scratch:
        for name in ("examples", "clusters"):
            os.symlink(os.path.join(a.src, name), os.path.join(scratch, name))
        if a.build:
            os.symlink(a.build, os.path.join(scratch, "build"))
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1",
                   PATH=a.bin + os.pathsep + os.environ["PATH"])
        prelude = ("mpirun() { command mpirun --allow-run-as-root "
                   "--oversubscribe --bind-to none \"$@\"; }\n")
        for doc in a.documents:
            with open(doc) as f:
                text = f.read()
            commands = 0
            for block in BLOCK.findall(text):
                steps = []
                for line in block.splitlines():
                    if line.startswith("$ "):
                        steps.append((line[2:], []))
                    elif line.strip() and steps:
                        steps[-1][1].append(line.strip())
                for command, expected in steps:
                    commands += 1
                    r = subprocess.run(["bash", "-c", prelude + command],
                                       cwd=scratch, env=env, text=True,
                                       capture_output=True, timeout=600)
                    lines = (r.stdout + r.stderr).splitlines()
                    if r.returncode:
                        failures += 1
                        print(f"FAIL {doc}: `{command}` exited {r.returncode}:\n"
                              + r.stdout + r.stderr)
                        continue
                    at = 0
                    for want in expected:
                        while at < len(lines) and want not in lines[at]:
                            at += 1
                        if at == len(lines):
                            failures += 1
                            print(f"FAIL {doc}: `{command}` does not print, "
                                  f"in order:\n  {want}\nIt printed:\n"
                                  + "\n".join(lines))
                            break
                        at += 1
            print(f"{doc}: {commands} commands run")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
