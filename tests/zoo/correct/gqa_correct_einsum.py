# zoo: gqa
"""Zoo (correct): query heads grouped as (H_kv, n_rep) and attended with einsum, no copies."""

import torch
from torch import nn


def repeat_kv(x, n_rep):
    if not isinstance(n_rep, int) or n_rep < 1:
        raise ValueError(f"n_rep must be a positive integer, got {n_rep!r}")
    if len(x.shape) != 4:
        raise ValueError(f"expected (B, H_kv, T, D), got {tuple(x.shape)}")
    index = [h // n_rep for h in range(x.shape[1] * n_rep)]
    return x[:, index]


class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_head, n_kv_head, bias=False):
        super().__init__()
        if n_head <= 0 or n_kv_head <= 0 or d_model % n_head or n_head % n_kv_head:
            raise ValueError(f"cannot split d_model={d_model} into {n_head}/{n_kv_head} heads")
        self.groups, self.n_rep = n_kv_head, n_head // n_kv_head
        self.d_head = d_model // n_head
        self.wq = nn.Linear(d_model, d_model, bias=bias)
        self.wk = nn.Linear(d_model, n_kv_head * self.d_head, bias=bias)
        self.wv = nn.Linear(d_model, n_kv_head * self.d_head, bias=bias)
        self.wo = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask=None):
        b, t, c = x.shape
        g, r, d = self.groups, self.n_rep, self.d_head
        q = self.wq(x).view(b, t, g, r, d)  # query head g*r + i lives in group g
        k = self.wk(x).view(b, t, g, d)
        v = self.wv(x).view(b, t, g, d)
        scores = torch.einsum("btgrd,bsgd->bgrts", q, k) / d**0.5  # (B, G, R, T, T)
        scores = scores.reshape(b, g * r, t, t)
        if mask is not None:
            mask = torch.as_tensor(mask, device=x.device)
            if mask.dtype != torch.bool:
                raise ValueError("mask must be boolean")
            scores = scores.masked_fill(mask, float("-inf"))
        if torch.isneginf(scores).all(-1).any():
            raise ValueError("a query has no allowed key")
        weights = scores.softmax(-1)
        y = torch.einsum("bgrts,bsgd->btgrd", weights.view(b, g, r, t, t), v)
        return self.wo(y.reshape(b, t, c)), weights
