"""Exercise `mha`: a multi-head self-attention module in PyTorch."""

import torch
from torch import nn


class MultiHeadAttention(nn.Module):

    def __init__(self, d_model, n_head, bias=False):
        super().__init__()
        if n_head < 1 or d_model % n_head:
            raise ValueError("d_model % n_head != 0")
        self.h = n_head
        self.wq, self.wk, self.wv, self.wo = [nn.Linear(d_model, d_model, bias) for _ in "qkvo"]

    def forward(self, x, mask=None):
        B, T, C = x.shape
        q, k, v = (w(x).view(B, T, self.h, -1).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        s = q @ k.transpose(-1, -2) / (C // self.h) ** 0.5
        if mask is not None:
            mask = torch.as_tensor(mask)
            if mask.dtype != torch.bool:
                raise ValueError("mask must be bool")
            s = s.masked_fill(mask, -torch.inf)
        if s.isneginf().all(-1).any():
            raise ValueError("fully masked row")
        w = s.softmax(-1)
        return self.wo((w @ v).transpose(1, 2).reshape(B, T, C)), w
