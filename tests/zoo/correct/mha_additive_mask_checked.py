# zoo: mha
"""Correct, another style: q scaled first, a -1e9 additive mask after a check for empty rows."""

import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_head, bias=False):
        super().__init__()
        if n_head < 1 or d_model % n_head:
            raise ValueError(f"n_head={n_head} must divide d_model={d_model}")
        self.h, self.d = n_head, d_model // n_head
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(d_model, d_model, bias=bias)
                                              for _ in range(4))

    def forward(self, x, mask=None):
        b, t, c = x.shape
        q, k, v = (w(x).reshape(b, t, self.h, self.d).permute(0, 2, 1, 3)
                   for w in (self.wq, self.wk, self.wv))
        scores = (q * self.d ** -0.5) @ k.transpose(-1, -2)
        if mask is not None:
            mask = torch.as_tensor(mask, device=x.device)
            if mask.dtype != torch.bool:
                raise ValueError("mask must be boolean")
            if mask.expand_as(scores).all(dim=-1).any():
                raise ValueError("a query has no allowed key")
            scores = scores + mask.to(scores.dtype) * -1e9
        weights = scores.softmax(dim=-1)
        y = (weights @ v).permute(0, 2, 1, 3).reshape(b, t, c)
        return self.wo(y), weights
