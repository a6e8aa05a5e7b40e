"""Measures one GPU's bf16 GEMM rate over transformer-shaped products (cuBLAS through PyTorch),
flash-attention rate (PyTorch SDPA), and memory-bound bandwidth, for the hardware profile's
gemm_efficiency / attention_efficiency curves and memory_bound_efficiency.
Prints one JSON document; every time is the median of CUDA-event-timed repetitions after warm-up."""
import json
import statistics
import sys

import torch

dev = torch.device("cuda")
torch.backends.cuda.matmul.allow_tf32 = False


def time_ms(fn, min_total_ms=25.0, max_reps=200):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); fn(); e.record(); torch.cuda.synchronize()
    first = max(s.elapsed_time(e), 1e-3)
    reps = int(min(max_reps, max(5, min_total_ms / first)))
    times = []
    for _ in range(reps):
        s.record(); fn(); e.record(); torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def gemm(m, n, k):
    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    b = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
    c = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
    ms = time_ms(lambda: torch.matmul(a, b, out=c))
    del a, b, c
    return ms


out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
       "cuda": torch.version.cuda, "gemm": [], "attention": [], "memory_bound": []}

shapes = set()
for n in (256, 512, 1024, 2048, 4096, 8192, 16384):
    shapes.add((n, n, n, "square"))
for h in (2048, 4096, 8192, 12288):
    for t in (1, 2, 4, 8):
        for tokens in (2048, 8192, 32768):
            shapes.add((tokens, 3 * h // t, h, "qkv_fwd"))
            shapes.add((tokens, h, h // t, "proj_fwd"))
            shapes.add((tokens, 4 * h // t, h, "fc1_fwd"))
            shapes.add((tokens, h, 4 * h // t, "fc2_fwd"))
            shapes.add((h, 4 * h // t, tokens, "fc1_wgrad"))
            shapes.add((tokens, h, 3 * h // t, "qkv_dgrad"))
for (m, n, k, kind) in sorted(shapes):
    ms = gemm(m, n, k)
    flops = 2.0 * m * n * k
    out["gemm"].append({"m": m, "n": n, "k": k, "kind": kind, "ms": ms,
                        "tflops": flops / (ms * 1e-3) / 1e12})
    torch.cuda.empty_cache()
print("gemm done", len(out["gemm"]), file=sys.stderr)

from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402
import torch.nn.functional as F  # noqa: E402

for backend_name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
    for b in (1, 4):
        for heads in (4, 8, 16, 32, 64):
            for s in (1024, 2048, 4096, 8192):
                for d in (64, 128):
                    if b * heads * s * d > 4 * 64 * 8192 * 128 // 2:
                        continue
                    q = torch.randn(b, heads, s, d, device=dev, dtype=torch.bfloat16, requires_grad=True)
                    k = torch.randn_like(q, requires_grad=True)
                    v = torch.randn_like(q, requires_grad=True)
                    g = torch.randn_like(q)
                    try:
                        with sdpa_kernel(backend):
                            fwd = time_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
                            def fb():
                                o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                                o.backward(g)
                            both = time_ms(fb)
                    except RuntimeError as err:  # backend unavailable for this shape
                        print(backend_name, b, heads, s, d, "failed:", str(err)[:80], file=sys.stderr)
                        continue
                    flops_fwd = 4.0 * b * heads * s * s * d / 2
                    out["attention"].append({"backend": backend_name, "b": b, "heads": heads, "s": s,
                                             "d": d, "causal": True, "fwd_ms": fwd,
                                             "bwd_ms": both - fwd, "flops_fwd": flops_fwd})
                    del q, k, v, g
print("attention done", len(out["attention"]), file=sys.stderr)

n = 1 << 28  # 512 MiB of bf16
x = torch.randn(n, device=dev, dtype=torch.bfloat16)
y = torch.randn(n, device=dev, dtype=torch.bfloat16)
z = torch.empty_like(x)
ms = time_ms(lambda: z.copy_(x)); out["memory_bound"].append({"op": "copy", "bytes": 4 * n, "ms": ms})
ms = time_ms(lambda: torch.add(x, y, out=z)); out["memory_bound"].append({"op": "add", "bytes": 6 * n, "ms": ms})
ms = time_ms(lambda: torch.nn.functional.gelu(x)); out["memory_bound"].append({"op": "gelu", "bytes": 4 * n, "ms": ms})
for tokens, h in ((8192, 4096), (32768, 8192)):
    a = torch.randn(tokens, h, device=dev, dtype=torch.bfloat16)
    w = torch.ones(h, device=dev, dtype=torch.bfloat16)
    bb = torch.zeros(h, device=dev, dtype=torch.bfloat16)
    ms = time_ms(lambda: torch.nn.functional.layer_norm(a, (h,), w, bb))
    out["memory_bound"].append({"op": f"layernorm_{tokens}x{h}", "bytes": 4 * tokens * h, "ms": ms})
for r in out["memory_bound"]:
    r["gbps"] = r["bytes"] / (r["ms"] * 1e-3) / 1e9
print(json.dumps(out, indent=1))
