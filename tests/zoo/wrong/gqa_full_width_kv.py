# zoo: gqa
"""Zoo: keys and values keep the full width (n_head heads), so nothing is saved; no checks."""

import math

import numpy as np
import torch
from torch import nn


def repeat_kv(x, n_rep):
    if isinstance(x, torch.Tensor):
        return x.repeat_interleave(n_rep, dim=1)
    return np.repeat(np.asarray(x), n_rep, axis=1)


class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_head, n_kv_head, bias=False):
        super().__init__()
        self.n_head, self.d_head = n_head, d_model // n_head
        self.wq = nn.Linear(d_model, d_model, bias=bias)
        self.wk = nn.Linear(d_model, d_model, bias=bias)
        self.wv = nn.Linear(d_model, d_model, bias=bias)
        self.wo = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask=None):
        b, t, c = x.shape

        def split(p):
            return p.view(b, t, self.n_head, self.d_head).transpose(1, 2)

        q, k, v = split(self.wq(x)), split(self.wk(x)), split(self.wv(x))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)
        if mask is not None:
            scores = scores.masked_fill(torch.as_tensor(mask, device=x.device), float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        return self.wo((weights @ v).transpose(1, 2).reshape(b, t, c)), weights
