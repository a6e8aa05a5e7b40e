#!/usr/bin/env python3
# Writes golden_llama.json: the golden check of make_golden.py for a tiny Llama-family decoder —
# RMSNorm (eps 1e-5, no bias), rotary position embeddings (rotate-half pairs, base 10000, the
# whole head dim), grouped-query attention (4 heads, 2 query groups; QKV packed as [Q; K; V] with
# K and V by group), SwiGLU (fc1 packed as [gate; up]), no linear biases, untied output layer —
# computed by PyTorch in float64 from mplan's counter-based initializer (make_golden.py's).
# Usage: python3 make_golden_llama.py [OUT.json]   (Debian's python3-torch is enough; CPU only)
import json
import math
import sys

import torch
import torch.nn.functional as F

from make_golden import INIT_STD, OPT, SEED, STEPS, init_normal

CONFIG = dict(layers=2, hidden=16, heads=4, groups=2, ffn=24, vocab=32, seq=8, micro_batch=2,
              rotary_base=10000.0, llama=True)


def param_list(c):
    """(name, shape, init) in Megatron's parameter order (src/model/tensor_layout)."""
    h, nh, ng = c["hidden"], c["heads"], c["groups"]
    d = h // nh
    q, kv, f = nh * d, ng * d, c["ffn"]
    out = [("embedding.word_embeddings.weight", (c["vocab"], h), "normal")]
    for l in range(c["layers"]):
        p = f"decoder.layers.{l}."
        out += [(p + "input_layernorm.weight", (h,), "one"),
                (p + "self_attention.linear_proj.weight", (h, q), "scaled"),
                (p + "self_attention.linear_qkv.weight", (q + 2 * kv, h), "normal"),
                (p + "pre_mlp_layernorm.weight", (h,), "one"),
                (p + "mlp.linear_fc1.weight", (2 * f, h), "normal"),
                (p + "mlp.linear_fc2.weight", (h, f), "scaled")]
    out += [("decoder.final_layernorm.weight", (h,), "one"),
            ("output_layer.weight", (c["vocab"], h), "normal")]
    return out


def init_params(c):
    params = {}
    for index, (name, shape, kind) in enumerate(param_list(c)):
        n = math.prod(shape)
        if kind == "one":
            v = [1.0] * n
        else:
            std = INIT_STD / math.sqrt(2.0 * c["layers"]) if kind == "scaled" else INIT_STD
            v = [std * init_normal(SEED, index, e) for e in range(n)]
        t = torch.tensor(v, dtype=torch.float32).to(torch.float64).reshape(shape)
        params[name] = t.requires_grad_(True)
    return params


def rms_norm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w


def rope(x, base):
    """x (s, b, heads, d): pairs (i, i + d/2) rotated by position · base^(-2i/d)."""
    s, d = x.shape[0], x.shape[-1]
    half = d // 2
    inv = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    ang = torch.arange(s, dtype=torch.float64)[:, None] * inv[None, :]  # (s, half)
    cos, sin = ang.cos()[:, None, None, :], ang.sin()[:, None, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def forward(P, c, tokens):
    """tokens (s, b) -> logits (s*b, V), the layout mplan uses."""
    s, b = tokens.shape
    h, nh, ng, f = c["hidden"], c["heads"], c["groups"], c["ffn"]
    d = h // nh
    x = P["embedding.word_embeddings.weight"][tokens]
    mask = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
    for l in range(c["layers"]):
        p = f"decoder.layers.{l}."
        y = rms_norm(x, P[p + "input_layernorm.weight"])
        qkv = y @ P[p + "self_attention.linear_qkv.weight"].T  # (s, b, (nh + 2 ng) d)
        q = rope(qkv[..., :nh * d].reshape(s, b, nh, d), c["rotary_base"])
        k = rope(qkv[..., nh * d:(nh + ng) * d].reshape(s, b, ng, d), c["rotary_base"])
        v = qkv[..., (nh + ng) * d:].reshape(s, b, ng, d)
        k = k.repeat_interleave(nh // ng, dim=2)  # head i uses group i // (nh / ng)
        v = v.repeat_interleave(nh // ng, dim=2)
        qh, kh, vh = (t.permute(1, 2, 0, 3) for t in (q, k, v))  # (b, heads, s, d)
        scores = (qh @ kh.transpose(-1, -2)) / math.sqrt(d)
        scores = scores.masked_fill(mask, float("-inf"))
        ctx = torch.softmax(scores, dim=-1) @ vh
        ctx = ctx.permute(2, 0, 1, 3).reshape(s, b, h)
        x = x + ctx @ P[p + "self_attention.linear_proj.weight"].T
        y = rms_norm(x, P[p + "pre_mlp_layernorm.weight"])
        a = y @ P[p + "mlp.linear_fc1.weight"].T
        act = F.silu(a[..., :f]) * a[..., f:]
        x = x + act @ P[p + "mlp.linear_fc2.weight"].T
    y = rms_norm(x, P["decoder.final_layernorm.weight"])
    return (y @ P["output_layer.weight"].T).reshape(s * b, -1)


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else "golden_llama.json"
    c = CONFIG
    torch.manual_seed(1)
    batches = [torch.randint(0, c["vocab"], (c["seq"] + 1, c["micro_batch"])) for _ in range(STEPS)]
    P = init_params(c)
    names = [n for n, _, _ in param_list(c)]
    decay = [P[n] for n in names if P[n].dim() == 2]
    no_decay = [P[n] for n in names if P[n].dim() == 1]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": OPT["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=OPT["lr"], betas=(OPT["beta1"], OPT["beta2"]), eps=OPT["eps"])
    golden = dict(config=c, seed=SEED, init_method_std=INIT_STD, optimizer=OPT, steps=[])
    for step, tok in enumerate(batches):
        inputs, targets = tok[:-1], tok[1:]
        opt.zero_grad(set_to_none=True)
        logits = forward(P, c, inputs)
        loss = F.cross_entropy(logits, targets.reshape(-1))
        loss.backward()
        grads = {n: P[n].grad.detach().clone() for n in names}  # before clipping
        norm = torch.nn.utils.clip_grad_norm_([P[n] for n in names], OPT["clip_grad"])
        entry = dict(inputs=inputs.reshape(-1).tolist(), targets=targets.reshape(-1).tolist(),
                     loss=loss.item(), grad_norm=norm.item())
        if step == 0:
            entry["logits"] = [float(f"{v:.9g}") for v in logits.detach().reshape(-1).tolist()]
            entry["grads"] = {n: [float(f"{v:.9g}") for v in grads[n].reshape(-1).tolist()]
                              for n in names}
        golden["steps"].append(entry)
        opt.step()
    with open(out_path, "w") as f:
        json.dump(golden, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
