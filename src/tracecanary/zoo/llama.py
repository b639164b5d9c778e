"""A small Llama-architecture decoder in plain torch, tensor parallel over a process group
(Megatron style): RMSNorm, rotary attention with a KV cache (heads split across ranks,
q/k/v column-parallel, output row-parallel + all_reduce), SwiGLU MLP (gate/up column-
parallel, down row-parallel + all_reduce), vocab-parallel LM head (all_gather of logits).

Written here because ``transformers`` was not added to the environment (see
docs/kineto.md): the collectives are those of a tensor-parallel Llama forward.
Random weights from a fixed seed; nothing is downloaded.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LlamaConfig:
    vocab: int = 256
    hidden: int = 64
    heads: int = 4
    ffn: int = 128
    layers: int = 2
    max_tokens: int = 512


def build(config: LlamaConfig, tp_rank: int, tp_size: int, seed: int = 0):
    """Per-rank weight shards (identical full weights on every rank, then sliced)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    h, f, v = config.hidden, config.ffn, config.vocab
    head_dim = h // config.heads
    local_heads = config.heads // tp_size

    def shard_cols(w, parts):
        return w.chunk(parts, dim=1)[tp_rank].contiguous()

    def shard_rows(w, parts):
        return w.chunk(parts, dim=0)[tp_rank].contiguous()

    layers = []
    for _ in range(config.layers):
        wq, wk, wv, wo = (torch.randn(h, h, generator=gen) / h**0.5 for _ in range(4))
        gate, up = (torch.randn(h, f, generator=gen) / h**0.5 for _ in range(2))
        down = torch.randn(f, h, generator=gen) / f**0.5
        layers.append(
            {
                "q": shard_cols(wq, tp_size),
                "k": shard_cols(wk, tp_size),
                "v": shard_cols(wv, tp_size),
                "o": shard_rows(wo, tp_size),
                "gate": shard_cols(gate, tp_size),
                "up": shard_cols(up, tp_size),
                "down": shard_rows(down, tp_size),
            }
        )
    emb = torch.randn(v, h, generator=gen) / h**0.5
    head = shard_cols(torch.randn(h, v, generator=gen) / h**0.5, tp_size)
    return {
        "layers": layers,
        "emb": emb,
        "head": head,
        "head_dim": head_dim,
        "local_heads": local_heads,
    }


def _rms(x):
    return x * (x.pow(2).mean(-1, keepdim=True) + 1e-6).rsqrt()


def _rope(x, positions):
    import torch

    half = x.shape[-1] // 2
    freq = 1.0 / (10000 ** (torch.arange(half, dtype=torch.float32) / half))
    angle = positions[:, None].float() * freq[None, :]
    cos, sin = angle.cos()[None], angle.sin()[None]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def forward(model, tokens, positions, cache, group, dist):
    """Logits (full vocab) of ``tokens`` at ``positions``; appends to the KV ``cache``."""
    import torch

    x = model["emb"][tokens]
    hd, nh = model["head_dim"], model["local_heads"]
    for k, layer in enumerate(model["layers"]):
        a = _rms(x)
        q = (a @ layer["q"]).view(-1, nh, hd).transpose(0, 1)
        kk = (a @ layer["k"]).view(-1, nh, hd).transpose(0, 1)
        vv = (a @ layer["v"]).view(-1, nh, hd).transpose(0, 1)
        q, kk = _rope(q, positions), _rope(kk, positions)
        if len(cache) <= k:
            cache.append([kk, vv])
        else:
            cache[k][0] = torch.cat([cache[k][0], kk], dim=1)
            cache[k][1] = torch.cat([cache[k][1], vv], dim=1)
        keys, values = cache[k]
        scores = q @ keys.transpose(1, 2) / hd**0.5
        total = keys.shape[1]
        causal = positions[:, None] >= torch.arange(total)[None, :]
        scores = scores.masked_fill(~causal[None], float("-inf"))
        attn = (scores.softmax(-1) @ values).transpose(0, 1).reshape(len(tokens), nh * hd)
        out = attn @ layer["o"]
        dist.all_reduce(out, group=group)
        x = x + out
        m = _rms(x)
        mlp = (torch.nn.functional.silu(m @ layer["gate"]) * (m @ layer["up"])) @ layer["down"]
        dist.all_reduce(mlp, group=group)
        x = x + mlp
    local = _rms(x[-1:]) @ model["head"]
    gathered = torch.empty(dist.get_world_size(group) * local.numel())
    dist.all_gather_into_tensor(gathered, local.reshape(-1).contiguous(), group=group)
    return gathered
