"""Exercise `mha`: a multi-head self-attention module in PyTorch."""

import math

import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    """Multi-head self-attention with four ``d_model x d_model`` projections.

    Attributes ``wq``, ``wk``, ``wv`` and ``wo`` are ``nn.Linear(d_model, d_model, bias=bias)``:
    heads split the width, so the parameter count is ``4 * d_model**2`` (plus
    ``4 * d_model`` with bias) whatever ``n_head`` is.

    Raises:
        ValueError: in ``__init__`` if ``d_model`` is not divisible by ``n_head``.
    """

    def __init__(self, d_model, n_head, bias=False):
        super().__init__()
        if n_head <= 0 or d_model % n_head != 0:
            raise ValueError("d_model has to be a multiple of n_head")
        self.n_head = n_head
        self.head_size = d_model // n_head
        self.wq = nn.Linear(d_model, d_model, bias=bias)
        self.wk = nn.Linear(d_model, d_model, bias=bias)
        self.wv = nn.Linear(d_model, d_model, bias=bias)
        self.wo = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask=None):
        """Self-attention over ``x``.

        Args:
            x: tensor ``(B, T, d_model)``.
            mask: optional bool tensor broadcastable to ``(B, H, T, T)``; True blocks a key.

        Returns:
            ``(y, weights)``: y ``(B, T, d_model)`` and the per-head attention weights
            ``(B, H, T, T)``, each row summing to 1.

        Raises:
            ValueError: if the mask is not boolean or some query has no allowed key.
        """
        queries, keys, values = self.wq(x), self.wk(x), self.wv(x)
        heads_q, heads_k, heads_v = [], [], []
        for h in range(self.n_head):
            columns = slice(h * self.head_size, (h + 1) * self.head_size)
            heads_q.append(queries[:, :, columns])
            heads_k.append(keys[:, :, columns])
            heads_v.append(values[:, :, columns])
        q = torch.stack(heads_q, dim=1)  # (B, H, T, D)
        k = torch.stack(heads_k, dim=1)
        v = torch.stack(heads_v, dim=1)
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_size)
        if mask is not None:
            if not torch.is_tensor(mask):
                mask = torch.tensor(mask)
            if mask.dtype != torch.bool:
                raise ValueError("mask must be a bool tensor")
            scores = scores.masked_fill(mask, float("-inf"))
        if (scores == float("-inf")).all(dim=-1).any():
            raise ValueError("some query has every key blocked")
        weights = torch.softmax(scores, dim=-1)
        out = torch.matmul(weights, v)  # (B, H, T, D)
        joined = torch.cat([out[:, h] for h in range(self.n_head)], dim=-1)  # (B, T, C)
        return self.wo(joined), weights
