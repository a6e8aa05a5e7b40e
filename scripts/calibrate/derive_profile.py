"""Derives the h200x4 profile's curves from the anchors (shared/anchors/README.md) and from a
calibration run (compute.json and nccl.txt of scripts/calibrate/h200_calibration.sh).
Usage: python3 derive_profile.py RUN_DIR   (prints the curve points the profile carries)

Collectives: the profile stores the bandwidth term of t = alpha + S*f(n)/B(S), so
B(S) = S*f(n) / (t(S) - alpha), t(S) = S*f(n)/busbw(S). Anchor points use the profile's alpha; points
from the run use the run's own small-message latency (its 8-byte all-reduce time for that group
size), since the run's machine showed a higher latency than the anchors' machine.
GEMM: the curve's level comes from the anchors (788 TFLOP/s at 8192^3 on random data, 204-242 at
1024^3), its shape between them from the run's medians (scaled to the anchors' plateau).
Attention: the run's medians, not scaled (they match published FlashAttention rates)."""
import collections
import json
import math
import re
import sys

MiB, GiB = 1 << 20, 1 << 30
PEAK = 989e12
ALPHA_US = 12.0  # profile latency: the run's 2-GPU 8-byte all-reduce time, below the anchors' 18 us 4-GPU 1 MiB time


def net(S, f, busbw_gbps, alpha_us):
    t_us = S * f / (busbw_gbps * 1e9) * 1e6
    return S * f / ((t_us - alpha_us) * 1e-6) / 1e9


def parse_nccl(path):
    runs, cur = {}, None
    for line in open(path):
        m = re.match(r"### (\w+) g=(\d+)", line)
        if m:
            cur = (m.group(1), int(m.group(2)))
            runs[cur] = {}
            continue
        p = line.split()
        if cur and len(p) > 8 and p[0].isdigit():
            runs[cur][int(p[0])] = (float(p[5]), float(p[7]))  # out-of-place time (us), busbw
    return runs


run = sys.argv[1]
nccl = parse_nccl(run + "/nccl.txt")
lat4 = nccl[("all_reduce", 4)][8][0]
lat2_sr = nccl[("sendrecv", 2)][8][0]
print("run latency: 4-GPU all-reduce %.1f us, 2-GPU sendrecv %.1f us" % (lat4, lat2_sr))
print("all-reduce (anchors, 4 GPUs):",
      [[S, round(net(S, 1.5, b, ALPHA_US), 1)] for S, b in ((MiB, 87), (16 * MiB, 267), (256 * MiB, 340), (GiB, 357))])
ag = [[MiB, round((net(MiB, .75, nccl[("all_gather", 4)][MiB][1], lat4) + net(MiB, .75, nccl[("reduce_scatter", 4)][MiB][1], lat4)) / 2, 1)],
      [16 * MiB, round(net(16 * MiB, .75, (195 + 217) / 2, ALPHA_US), 1)],
      [256 * MiB, round((net(256 * MiB, .75, nccl[("all_gather", 4)][256 * MiB][1], lat4) + net(256 * MiB, .75, nccl[("reduce_scatter", 4)][256 * MiB][1], lat4)) / 2, 1)],
      [GiB, round(net(GiB, .75, (327 + 323) / 2, ALPHA_US), 1)]]
print("all-gather / reduce-scatter (anchors at 16 MiB and 1 GiB, run elsewhere):", ag)
print("all-to-all (run, 4 GPUs):", [[S, round(net(S, .75, nccl[("alltoall", 4)][S][1], lat4), 1)] for S in (MiB, 16 * MiB, 256 * MiB, GiB)])
p2p = [[S, round(net(S, 1, nccl[("sendrecv", 2)][S][1], lat2_sr), 1)] for S in (MiB, 16 * MiB)]
p2p.append([256 * MiB, round(net(256 * MiB, 1, 359, ALPHA_US), 1)])
p2p.append([GiB, round(net(GiB, 1, nccl[("sendrecv", 2)][GiB][1], lat2_sr), 1)])
print("send/recv (run at 1 and 16 MiB and 1 GiB, anchors at 256 MiB):", p2p)

d = json.load(open(run + "/compute.json"))
bins = collections.defaultdict(list)
for r in d["gemm"]:
    bins[round(math.log2(2.0 * r["m"] * r["n"] * r["k"]))].append(r["tflops"])
plateau = sorted(r["tflops"] for r in d["gemm"] if r["kind"] == "square" and r["m"] == 8192)[0]
scale = 788.0 / plateau
print("GEMM: run plateau %.0f TFLOP/s at 8192^3, scaled by %.3f to the anchors' 788" % (plateau, scale))
for b in sorted(bins):
    v = sorted(bins[b])
    print("  F=2^%d (%.2e): median %.0f TFLOP/s -> efficiency %.3f (n=%d)" % (b, 2.0 ** b, v[len(v) // 2], v[len(v) // 2] * scale * 1e12 / PEAK, len(v)))
for be in ("flash", "cudnn"):
    fw, bw = collections.defaultdict(list), collections.defaultdict(list)
    for r in d["attention"]:
        if r["backend"] != be:
            continue
        f = r["flops_fwd"]
        fw[round(math.log2(f))].append(f / (r["fwd_ms"] * 1e-3) / PEAK)
        bw[round(math.log2(2.5 * f))].append(2.5 * f / (r["bwd_ms"] * 1e-3) / PEAK)
    med = lambda v: sorted(v)[len(v) // 2]
    print("attention %s forward:" % be, [["%.2e" % 2.0 ** b, round(med(v), 3)] for b, v in sorted(fw.items())])
    print("attention %s backward:" % be, [["%.2e" % 2.0 ** b, round(med(v), 3)] for b, v in sorted(bw.items())])
for r in d["memory_bound"]:
    print("memory-bound %-22s %5.0f GB/s = %.2f of 4800" % (r["op"], r["gbps"], r["gbps"] / 4800))
