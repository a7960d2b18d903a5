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
        if n_head < 1 or d_model % n_head:
            raise ValueError(f"{d_model=} is not a multiple of {n_head=}")
        self.n_head, self.d_head = n_head, d_model // n_head
        self.wq, self.wk, self.wv, self.wo = (
            nn.Linear(d_model, d_model, bias=bias) for _ in range(4))

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
        B, T, _ = x.shape

        def heads(t):
            return t.reshape(B, T, self.n_head, self.d_head)

        q, k, v = heads(self.wq(x)), heads(self.wk(x)), heads(self.wv(x))
        att = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(self.d_head)
        if mask is not None:
            mask = torch.as_tensor(mask)
            if mask.dtype is not torch.bool:
                raise ValueError(f"mask must be torch.bool, got {mask.dtype}")
            att = att.masked_fill(mask, -math.inf)
        if torch.isneginf(att).all(-1).any():
            raise ValueError("a query row is fully masked")
        w = att.softmax(-1)
        y = torch.einsum("bhqk,bkhd->bqhd", w, v).reshape(B, T, -1)
        return self.wo(y), w
