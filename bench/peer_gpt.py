"""trainctl's built-in `gpt` in plain PyTorch, for the DDP peers
(gpu_ddp_peer.py, data_scale_peer.py): token and learned position
embeddings, pre-norm blocks (one qkv Linear, causal scaled-dot-product
attention, output projection, Linear-GELU-Linear MLP), a final LayerNorm
and an untied Linear head; no dropout (worker/train/models/networks.cc).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


def causal_attention(q, k, v):
    if hasattr(F, "scaled_dot_product_attention"):  # torch >= 2.0
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    t = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)) / (q.shape[-1] ** 0.5)
    mask = torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1)
    return scores.masked_fill(mask, float("-inf")).softmax(-1) @ v


class Block(nn.Module):
    def __init__(self, d_model, heads, d_ff):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)

    def forward(self, x):
        b, t, c = x.shape
        qkv = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, c // self.heads)
        q, k, v = (qkv.select(2, i).transpose(1, 2) for i in range(3))
        y = causal_attention(q, k, v)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Gpt(nn.Module):
    def __init__(self, vocab, d_model, layers, heads, d_ff, max_seq):
        super().__init__()
        self.token = nn.Embedding(vocab, d_model)
        self.position = nn.Embedding(max_seq, d_model)
        self.blocks = nn.ModuleList(Block(d_model, heads, d_ff) for _ in range(layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, tokens):
        t = tokens.shape[1]
        x = self.token(tokens) + self.position(torch.arange(t, device=tokens.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))
