# zoo: mha
"""Correct, another style: nanoGPT-like, one fused q/k/v projection built from wq, wk, wv."""

import math

import torch
import torch.nn.functional as F
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_head, bias=False):
        super().__init__()
        if n_head < 1 or d_model % n_head != 0:
            raise ValueError(f"{d_model} is not a multiple of {n_head}")
        self.n_head = n_head
        self.d_model = d_model
        self.wq = nn.Linear(d_model, d_model, bias=bias)
        self.wk = nn.Linear(d_model, d_model, bias=bias)
        self.wv = nn.Linear(d_model, d_model, bias=bias)
        self.wo = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask=None):
        B, T, C = x.size()
        weight = torch.cat([self.wq.weight, self.wk.weight, self.wv.weight], dim=0)
        bias = None
        if self.wq.bias is not None:
            bias = torch.cat([self.wq.bias, self.wk.bias, self.wv.bias])
        q, k, v = F.linear(x, weight, bias).split(self.d_model, dim=2)
        hs = C // self.n_head
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        att = torch.einsum("bhqd,bhkd->bhqk", q, k) * (1.0 / math.sqrt(hs))
        if mask is not None:
            if mask.dtype is not torch.bool:
                raise ValueError("mask must be a bool tensor")
            att = att.masked_fill(mask.to(att.device), float("-inf"))
            if (att == float("-inf")).all(dim=-1).any():
                raise ValueError("a query can see no key")
        att = F.softmax(att, dim=-1)
        y = att @ v  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.wo(y), att
