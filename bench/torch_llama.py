# PyTorch baseline of a Llama-family decoder for the executor's benchmark: the same shape as
# configs/models/llama3.2-1b.json (RMSNorm, RoPE with base 500000, grouped-query attention through
# scaled_dot_product_attention, SwiGLU, no biases, tied embeddings), bf16 autocast, fused AdamW,
# optional torch.compile, DDP over the GPUs torchrun starts. Run it in the same command as
# `mplan run configs/plans/llama3.2-1b-1gpu.json` so the two are compared on one machine:
#   torchrun --standalone --nproc_per_node 1 bench/torch_llama.py      # COMPILE=0 for eager
# Environment: L H NH NG F V S MBS GBS ITERS COMPILE ROPE_BASE. Prints one line with ms/iteration,
# tokens/s/GPU, TFLOP/s/GPU (Megatron's count) and the peak memory allocated.
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

def env(name, default):
    return type(default)(os.environ.get(name, default))

L, H, NH, NG = env("L", 16), env("H", 2048), env("NH", 32), env("NG", 8)
FFN, V, S = env("F", 8192), env("V", 128256), env("S", 4096)
MBS, GBS, ITERS = env("MBS", 2), env("GBS", 16), env("ITERS", 10)
BASE = env("ROPE_BASE", 500000.0)
D = H // NH


class RMSNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(H))

    def forward(self, x):
        return F.rms_norm(x, (H,), self.weight, 1e-5)


def rotate(x, cos, sin):  # x (B, heads, T, D): pairs (i, i + D/2)
    x1, x2 = x[..., : D // 2], x[..., D // 2 :]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.norm2 = RMSNorm(), RMSNorm()
        self.qkv = nn.Linear(H, (NH + 2 * NG) * D, bias=False)
        self.proj = nn.Linear(NH * D, H, bias=False)
        self.fc1 = nn.Linear(H, 2 * FFN, bias=False)  # [gate | up]
        self.fc2 = nn.Linear(FFN, H, bias=False)

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        qkv = self.qkv(self.norm1(x))
        q = qkv[..., : NH * D].view(B, T, NH, D).transpose(1, 2)
        k = qkv[..., NH * D : (NH + NG) * D].view(B, T, NG, D).transpose(1, 2)
        v = qkv[..., (NH + NG) * D :].view(B, T, NG, D).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, NH * D))
        gate, up = self.fc1(self.norm2(x)).chunk(2, dim=-1)
        return x + self.fc2(F.silu(gate) * up)


class Llama(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(V, H)
        self.blocks = nn.ModuleList(Block() for _ in range(L))
        self.norm = RMSNorm()
        self.head = nn.Linear(H, V, bias=False)
        self.head.weight = self.wte.weight  # tied, as Llama 3.2 1B
        inv = 1.0 / (BASE ** (torch.arange(0, D, 2, dtype=torch.float32) / D))
        ang = torch.arange(S, dtype=torch.float32)[:, None] * inv[None, :]
        self.register_buffer("cos", ang.cos(), persistent=False)
        self.register_buffer("sin", ang.sin(), persistent=False)

    def forward(self, idx, tgt):
        x = self.wte(idx)
        cos, sin = self.cos.to(x.dtype), self.sin.to(x.dtype)
        for b in self.blocks:
            x = b(x, cos, sin)
        return F.cross_entropy(self.head(self.norm(x)).float().view(-1, V), tgt.view(-1))


dist.init_process_group("nccl")
rank, world = dist.get_rank(), dist.get_world_size()
torch.cuda.set_device(rank % torch.cuda.device_count())
torch.manual_seed(0)
model = Llama().cuda()
n_params = sum(p.numel() for p in model.parameters())
compiled = os.environ.get("COMPILE", "1") == "1"
ddp = torch.nn.parallel.DistributedDataParallel(torch.compile(model) if compiled else model)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
accum = GBS // (MBS * world)
x = torch.randint(0, V, (MBS, S), device="cuda")
y = torch.randint(0, V, (MBS, S), device="cuda")


def step():
    for i in range(accum):
        sync = ddp.no_sync() if i < accum - 1 else torch.enable_grad()
        with sync, torch.autocast("cuda", dtype=torch.bfloat16):
            (ddp(x, y) / accum).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


for _ in range(3):
    step()
torch.cuda.synchronize()
t0 = time.time()
for _ in range(ITERS):
    step()
torch.cuda.synchronize()
dt = (time.time() - t0) / ITERS
# Megatron's num_floating_point_operations for a GQA SwiGLU decoder (src/model/model_stats.cpp).
q, kv = NH * D, NG * D
flops = GBS * S * (6 * H * (3 * FFN) * L + 6 * (H * (q + 2 * kv) + q * H) * L + 6 * H * V) \
    + GBS * S * S * 6 * q / 2 * 2 * L
if rank == 0:
    print(f"torch_llama world={world} params={n_params/1e9:.3f}B compile={compiled} "
          f"ms_per_iter={dt*1e3:.1f} tokens_per_s_per_gpu={GBS*S/dt/world:.0f} "
          f"tflops_per_gpu={flops/dt/world/1e12:.1f} "
          f"peak_alloc_GiB={torch.cuda.max_memory_allocated()/2**30:.1f}")
dist.destroy_process_group()
