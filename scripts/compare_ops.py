#!/usr/bin/env python3
"""Kernel-by-kernel comparison of a measured and a simulated ops-level trace of one plan.

Usage: scripts/compare_ops.py RUN_TRACE.json SIM_TRACE.json [--top N] [--by-kind]
RUN_TRACE (or .json.gz): `mplan run PLAN --trace RUN_TRACE --trace-level ops`; SIM_TRACE: `mplan simulate
PLAN --stack mplan --trace SIM_TRACE --trace-level ops` (with the profile of the machine that ran).
Prints, per kernel name with the layer index dropped ("L3 qkv" -> "qkv"), the total measured and
predicted time of the first rank's compute stream, their error, and the time between kernels
inside passes (launch gaps), then the pass and iteration totals. --by-kind sums the kernels into
GEMMs (qkv, proj, fc1, fc2, logits and their gradients), attention (forward and backward), the
optimizer step (with the gradient norm) and the rest."""
import collections
import gzip
import json
import re
import sys

GEMM = re.compile(r"^(re )?(qkv|proj|fc1|fc2|logits)(_dgrad|_wgrad)?$")


def kind_of(name):
    if GEMM.match(name):
        return "GEMMs"
    if re.match(r"^(re )?attention", name):
        return "attention"
    if name in ("optimizer", "grad_norm_ar"):
        return "optimizer"
    return "other"


def by_kind(total, count):
    t, c = collections.Counter(), collections.Counter()
    for name, v in total.items():
        t[kind_of(name)] += v
        c[kind_of(name)] += count[name]
    return t, c


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    events = [e for e in doc["traceEvents"]
              if e.get("ph") == "X" and e.get("pid", 0) == 0 and e.get("tid", 0) == 0]
    events.sort(key=lambda e: (e["ts"], -e["dur"]))
    total = collections.Counter()
    count = collections.Counter()
    passes = collections.Counter()
    inside = 0.0
    for e in events:
        name = re.sub(r"^L\d+ ", "", e["name"])
        if name in ("forward", "backward", "weight"):
            passes[name] += e["dur"]
            continue
        total[name] += e["dur"]
        count[name] += 1
        if e.get("cat") == "compute" and name != "optimizer":
            inside += e["dur"]
    span = max(e["ts"] + e["dur"] for e in events) - min(e["ts"] for e in events)
    return total, count, passes, inside, span


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    top = int(sys.argv[sys.argv.index("--top") + 1]) if "--top" in sys.argv else 40
    mt, mc, mp, minside, mspan = load(sys.argv[1])
    st, sc, sp, sinside, sspan = load(sys.argv[2])
    if "--by-kind" in sys.argv:
        mt, mc = by_kind(mt, mc)
        st, sc = by_kind(st, sc)
    print(f"{'kernel':26s} {'n':>6s} {'measured ms':>12s} {'predicted ms':>12s} {'error':>7s}"
          f" {'meas us/call':>12s}")
    for name, v in sorted(mt.items(), key=lambda kv: -kv[1])[:top]:
        p = st.get(name, 0.0)
        err = f"{100 * (p / v - 1):+6.1f}%" if v > 0 else "    -"
        flag = "" if mc[name] == sc.get(name, 0) else f"  (simulated {sc.get(name, 0)} calls)"
        print(f"{name:26s} {mc[name]:6d} {v / 1e3:12.2f} {p / 1e3:12.2f} {err} "
              f"{v / mc[name]:12.1f}{flag}")
    for name in sorted(set(st) - set(mt)):
        print(f"{name:26s} {'-':>6s} {'-':>12s} {st[name] / 1e3:12.2f}   (not measured)")
    mpass = sum(mp.values())
    spass = sum(sp.values())
    print(f"passes: measured {mpass / 1e3:.2f} ms, predicted {spass / 1e3:.2f} ms "
          f"({100 * (spass / mpass - 1):+.1f} %)")
    print(f"kernels inside passes: measured {minside / 1e3:.2f} ms "
          f"(gaps between them {(mpass - minside) / 1e3:.2f} ms), predicted {sinside / 1e3:.2f} ms")
    print(f"iteration span: measured {mspan / 1e3:.2f} ms, predicted {sspan / 1e3:.2f} ms")


if __name__ == "__main__":
    main()
