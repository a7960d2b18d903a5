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
        if d_model % n_head != 0:
            raise ValueError("d_model is not divisible by n_head")
        self.n_head = n_head
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
        B, T, d_model = x.shape
        H = self.n_head
        D = d_model // H
        q = self.wq(x).reshape(B, T, H, D).transpose(1, 2)
        k = self.wk(x).reshape(B, T, H, D).transpose(1, 2)
        v = self.wv(x).reshape(B, T, H, D).transpose(1, 2)
        scores = q @ k.transpose(-1, -2) / math.sqrt(D)
        if mask is not None:
            mask = torch.as_tensor(mask)
            if mask.dtype != torch.bool:
                raise ValueError("the mask is not boolean")
            scores = scores.masked_fill(mask, float("-inf"))
        if torch.isneginf(scores).all(dim=-1).any():
            raise ValueError("some query has no allowed key")
        weights = torch.softmax(scores, dim=-1)
        y = (weights @ v).transpose(1, 2).reshape(B, T, d_model)
        return self.wo(y), weights
