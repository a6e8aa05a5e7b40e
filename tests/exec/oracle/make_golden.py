#!/usr/bin/env python3
# Writes golden.json: logits, loss, every gradient and a short AdamW training run of a tiny GPT,
# computed by PyTorch in float64 -- an oracle independent of mplan's C++ (only the weight
# initializer below is shared by design: a counter-based normal that mplan documents in
# exec/model/init_rng.hpp, so both sides start from the same weights).
# Model: learned positions, LayerNorm (eps 1e-5), GeLU (tanh), causal multi-head attention with
# QKV packed as [Q; K; V], tied input/output embeddings, biases; Megatron's init (normal(0, std),
# output projections std / sqrt(2 L), zero biases, unit norms); AdamW without decay on biases and
# norm weights, gradient clipping by global norm.
# Usage: python3 make_golden.py [OUT.json]   (Debian's python3-torch is enough; CPU only)
import json
import math
import sys

import torch
import torch.nn.functional as F

CONFIG = dict(layers=2, hidden=16, heads=2, ffn=32, vocab=32, max_positions=10, seq=8,
              micro_batch=2)
SEED = 4321
INIT_STD = 0.02
OPT = dict(lr=1e-2, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1, clip_grad=1.0)
STEPS = 3
MASK64 = (1 << 64) - 1


def splitmix64(z):
    z = (z + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def init_normal(seed, param, element):
    k = splitmix64(splitmix64(splitmix64(seed) ^ param) ^ element)
    k2 = splitmix64(k)
    u1 = ((k >> 11) + 1.0) * 2.0**-53
    u2 = (k2 >> 11) * 2.0**-53
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(6.283185307179586 * u2)


def param_list(c):
    """(name, shape, init) in Megatron's parameter order."""
    h, q = c["hidden"], c["hidden"]  # kv_channels * heads == hidden here
    out = [("embedding.word_embeddings.weight", (c["vocab"], h), "normal"),
           ("embedding.position_embeddings.weight", (c["max_positions"], h), "normal")]
    for l in range(c["layers"]):
        p = f"decoder.layers.{l}."
        out += [(p + "input_layernorm.weight", (h,), "one"),
                (p + "input_layernorm.bias", (h,), "zero"),
                (p + "self_attention.linear_proj.weight", (h, q), "scaled"),
                (p + "self_attention.linear_proj.bias", (h,), "zero"),
                (p + "self_attention.linear_qkv.weight", (3 * q, h), "normal"),
                (p + "self_attention.linear_qkv.bias", (3 * q,), "zero"),
                (p + "pre_mlp_layernorm.weight", (h,), "one"),
                (p + "pre_mlp_layernorm.bias", (h,), "zero"),
                (p + "mlp.linear_fc1.weight", (c["ffn"], h), "normal"),
                (p + "mlp.linear_fc1.bias", (c["ffn"],), "zero"),
                (p + "mlp.linear_fc2.weight", (h, c["ffn"]), "scaled"),
                (p + "mlp.linear_fc2.bias", (h,), "zero")]
    out += [("decoder.final_layernorm.weight", (h,), "one"),
            ("decoder.final_layernorm.bias", (h,), "zero")]
    return out


def init_params(c):
    params = {}
    for index, (name, shape, kind) in enumerate(param_list(c)):
        n = math.prod(shape)
        if kind == "one":
            v = [1.0] * n
        elif kind == "zero":
            v = [0.0] * n
        else:
            std = INIT_STD / math.sqrt(2.0 * c["layers"]) if kind == "scaled" else INIT_STD
            v = [std * init_normal(SEED, index, e) for e in range(n)]
        # mplan keeps f32 master weights: start from the same f32 values.
        t = torch.tensor(v, dtype=torch.float32).to(torch.float64).reshape(shape)
        params[name] = t.requires_grad_(True)
    return params


def forward(P, c, tokens):
    """tokens (s, b) -> logits (s*b, V), the layout mplan uses."""
    s, b = tokens.shape
    h, nh = c["hidden"], c["heads"]
    d = h // nh
    x = P["embedding.word_embeddings.weight"][tokens] + \
        P["embedding.position_embeddings.weight"][:s].unsqueeze(1)
    mask = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
    for l in range(c["layers"]):
        p = f"decoder.layers.{l}."
        y = F.layer_norm(x, (h,), P[p + "input_layernorm.weight"], P[p + "input_layernorm.bias"],
                         1e-5)
        qkv = y @ P[p + "self_attention.linear_qkv.weight"].T + \
            P[p + "self_attention.linear_qkv.bias"]
        qkv = qkv.view(s, b, 3, nh, d).permute(2, 1, 3, 0, 4)  # (3, b, heads, s, d)
        qh, kh, vh = qkv[0], qkv[1], qkv[2]
        scores = (qh @ kh.transpose(-1, -2)) / math.sqrt(d)
        scores = scores.masked_fill(mask, float("-inf"))
        ctx = torch.softmax(scores, dim=-1) @ vh  # (b, heads, s, d)
        ctx = ctx.permute(2, 0, 1, 3).reshape(s, b, h)
        x = x + ctx @ P[p + "self_attention.linear_proj.weight"].T + \
            P[p + "self_attention.linear_proj.bias"]
        y = F.layer_norm(x, (h,), P[p + "pre_mlp_layernorm.weight"],
                         P[p + "pre_mlp_layernorm.bias"], 1e-5)
        a = F.gelu(y @ P[p + "mlp.linear_fc1.weight"].T + P[p + "mlp.linear_fc1.bias"],
                   approximate="tanh")
        x = x + a @ P[p + "mlp.linear_fc2.weight"].T + P[p + "mlp.linear_fc2.bias"]
    y = F.layer_norm(x, (h,), P["decoder.final_layernorm.weight"],
                     P["decoder.final_layernorm.bias"], 1e-5)
    return (y @ P["embedding.word_embeddings.weight"].T).reshape(s * b, -1)


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else "golden.json"
    c = CONFIG
    torch.manual_seed(0)
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
