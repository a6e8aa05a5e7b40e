#!/usr/bin/env python3
"""Where an iteration's time goes: the spans of a run trace (`mplan run --trace T --trace-level
ops`, or `mplan simulate --trace`) summed by op name, largest first.

Usage: scripts/trace_top_ops.py [--by-layer] TRACE.json [N]   (N rows, default 30)
Prints: total ms, count and mean µs per name, with each name's share of the summed span time.
Spans of the layers ("L3 fc1") are summed over the layers ("fc1") unless --by-layer is given.
The "forward" and "backward" spans enclose the others and are left out."""
import collections
import json
import re
import sys

ENCLOSING = {"forward", "backward"}
LAYER = re.compile(r"^L\d+ ")


def main() -> int:
    args = sys.argv[1:]
    by_layer = "--by-layer" in args
    args = [a for a in args if a != "--by-layer"]
    if not args or not (len(args) == 1 or args[1].isdigit()):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    rows = int(args[1]) if len(args) > 1 else 30
    with open(args[0]) as f:
        events = json.load(f).get("traceEvents", [])
    total = collections.Counter()
    count = collections.Counter()
    for e in events:
        if e.get("ph") != "X" or e["name"] in ENCLOSING:
            continue
        name = e["name"] if by_layer else LAYER.sub("", e["name"])
        total[name] += e.get("dur", 0.0)
        count[name] += 1
    whole = sum(total.values()) or 1.0
    print(f"{'op':32s} {'ms':>9s} {'count':>6s} {'mean us':>8s} {'share':>6s}")
    for name, us in total.most_common(rows):
        print(f"{name:32s} {us / 1e3:9.2f} {count[name]:6d} {us / count[name]:8.1f} "
              f"{100 * us / whole:5.1f}%")
    print(f"{'(all spans)':32s} {whole / 1e3:9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
