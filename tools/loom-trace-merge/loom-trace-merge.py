#!/usr/bin/env python3
"""Merges the per-rank Chrome traces of a Loom run into one file for
Perfetto (ui.perfetto.dev) or chrome://tracing: each rank stays its own
process track.

    loom-trace-merge.py trace.0.json trace.1.json ... -o trace.json
"""
import argparse
import json
import sys


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("traces", nargs="+")
    p.add_argument("-o", "--output", default="-")
    a = p.parse_args()
    events, ranks = [], set()
    for path in a.traces:
        try:
            with open(path) as f:
                trace = json.load(f)
        except (OSError, ValueError) as e:
            sys.exit(f"loom-trace-merge: error: {path}: {e}")
        for event in trace.get("traceEvents", []):
            if event.get("name") == "process_name":
                if event["pid"] in ranks:
                    sys.exit(f"loom-trace-merge: error: {path}: rank "
                             f"{event['pid']} appears in two traces")
                ranks.add(event["pid"])
            events.append(event)
    out = json.dumps({"traceEvents": events, "displayTimeUnit": "ms"})
    if a.output == "-":
        print(out)
    else:
        with open(a.output, "w") as f:
            f.write(out + "\n")


if __name__ == "__main__":
    main()
