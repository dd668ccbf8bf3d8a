"""Checks that a safetensors file is whole: its header parses, every tensor's
data_offsets lie in the data section, and the file ends where the last
tensor does. Exit 1, saying why, otherwise. Used by files.test."""
import json
import struct
import sys

path = sys.argv[1]
with open(path, "rb") as f:
    data = f.read()
if len(data) < 8:
    sys.exit("%s: %d bytes, shorter than a header size" % (path, len(data)))
(n,) = struct.unpack("<Q", data[:8])
if 8 + n > len(data):
    sys.exit("%s: header of %d bytes past the end (%d)" % (path, n, len(data)))
header = json.loads(data[8:8 + n])
end = 0
for name, entry in header.items():
    if name == "__metadata__":
        continue
    begin, stop = entry["data_offsets"]
    end = max(end, stop)
if 8 + n + end != len(data):
    sys.exit("%s: %d bytes, but its tensors end at %d" % (path, len(data),
                                                          8 + n + end))
print("%s: whole, %d tensors, %d bytes" % (path, len(header), len(data)))
