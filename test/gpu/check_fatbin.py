#!/usr/bin/env python3
"""Lists the GPU architectures whose code a static library's CUDA objects
embed (the fatbinary names each one, e.g. sm_90), and fails unless every
architecture asked for is there."""

import re
import sys


def members(path):
    """(name, bytes) of each member of a System V ar archive."""
    data = open(path, "rb").read()
    if not data.startswith(b"!<arch>\n"):
        raise SystemExit(f"{path} is not an ar archive")
    pos, names = 8, b""
    while pos + 60 <= len(data):
        header = data[pos:pos + 60]
        name = header[:16].decode().strip()
        size = int(header[48:58].decode().strip())
        body = data[pos + 60:pos + 60 + size]
        pos += 60 + size + (size % 2)
        if name == "//":
            names = body
            continue
        if name.startswith("/") and name[1:].isdigit():
            start = int(name[1:])
            name = names[start:names.index(b"/\n", start)].decode()
        yield name.rstrip("/"), body


def main():
    path, wanted = sys.argv[1], sys.argv[2:]
    missing = 0
    for name, body in members(path):
        if not name.endswith(".cu.o"):
            continue
        found = sorted(set(m.decode() for m in re.findall(rb"sm_[0-9]+", body)))
        print(f"{name}: {' '.join(found)}")
        missing += sum(a not in found for a in wanted)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
