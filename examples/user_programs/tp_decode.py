"""A user's tensor-parallel decode loop (gloo, CPU, 2 processes): a small
Llama-style decoder (attention heads and MLP split across ranks, Megatron style), a
16-token prefill, then greedy decode with a KV cache. Per layer and token: one
``all_reduce`` after attention, one after the MLP; per token an ``all_gather`` of the
vocabulary-parallel logits. It imports nothing of TraceCanary; record it unmodified with
``tracecanary capture -o DIR -- python tp_decode.py [TOKENS]``."""

import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD, HIDDEN, HEADS, FFN, VOCAB, LAYERS = 2, 64, 4, 128, 256, 2


def shard(rank: int, world: int):
    gen = torch.Generator().manual_seed(0)  # the same full weights on every rank, sliced

    def w(rows, cols):
        return torch.randn(rows, cols, generator=gen) / rows**0.5

    def cols(t):
        return t.chunk(world, dim=1)[rank].contiguous()

    def rows(t):
        return t.chunk(world, dim=0)[rank].contiguous()

    layers = [
        {"qkv": [cols(w(HIDDEN, HIDDEN)) for _ in range(3)], "o": rows(w(HIDDEN, HIDDEN)),
         "up": cols(w(HIDDEN, FFN)), "down": rows(w(FFN, HIDDEN))}
        for _ in range(LAYERS)
    ]  # fmt: skip
    return {"layers": layers, "emb": w(VOCAB, HIDDEN), "head": cols(w(HIDDEN, VOCAB))}


def forward(model, tokens, cache, world: int):
    x = model["emb"][tokens]
    heads, dim = HEADS // world, HIDDEN // HEADS
    for i, layer in enumerate(model["layers"]):
        q, k, v = ((x @ m).view(-1, heads, dim).transpose(0, 1) for m in layer["qkv"])
        if len(cache) <= i:
            cache.append([k, v])
        else:
            cache[i] = [torch.cat([cache[i][0], k], 1), torch.cat([cache[i][1], v], 1)]
        keys, values = cache[i]
        attn = (q @ keys.transpose(1, 2) / dim**0.5).softmax(-1) @ values
        out = attn.transpose(0, 1).reshape(len(tokens), heads * dim) @ layer["o"]
        dist.all_reduce(out)
        x = x + out
        mlp = torch.relu(x @ layer["up"]) @ layer["down"]
        dist.all_reduce(mlp)
        x = x + mlp
    local = (x[-1:] @ model["head"]).reshape(-1).contiguous()
    logits = torch.empty(world * local.numel())
    dist.all_gather_into_tensor(logits, local)
    return logits


def decode(rank: int, world: int, port: int, tokens: int) -> None:
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    model = shard(rank, world)
    cache: list = []
    with torch.no_grad():
        logits = forward(model, torch.arange(16) % VOCAB, cache, world)
        for _ in range(tokens):
            logits = forward(model, logits.argmax().reshape(1), cache, world)
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free_port = s.getsockname()[1]
    tokens = int(sys.argv[1]) if len(sys.argv) > 1 else 32
    mp.spawn(decode, args=(WORLD, free_port, tokens), nprocs=WORLD)
