"""Exercise `mha`: a multi-head self-attention module in PyTorch."""

import math

import torch
from torch import nn


class _Heads:
    """Moves the width of a (B, T, C) tensor into H heads and back."""

    def __init__(self, count):
        self.count = count

    def apart(self, x):
        batch, length, width = x.shape
        return x.reshape(batch, length, self.count, width // self.count).permute(0, 2, 1, 3)

    def together(self, x):
        batch, heads, length, size = x.shape
        return x.permute(0, 2, 1, 3).reshape(batch, length, heads * size)


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
        if n_head < 1 or d_model % n_head != 0:
            raise ValueError(f"cannot split d_model={d_model} into {n_head} equal heads")
        self.n_head = n_head
        self.wq = nn.Linear(d_model, d_model, bias=bias)
        self.wk = nn.Linear(d_model, d_model, bias=bias)
        self.wv = nn.Linear(d_model, d_model, bias=bias)
        self.wo = nn.Linear(d_model, d_model, bias=bias)
        self.split = _Heads(n_head)

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
        q, k, v = (self.split.apart(proj(x)) for proj in (self.wq, self.wk, self.wv))
        scale = 1.0 / math.sqrt(q.shape[-1])
        scores = torch.matmul(q, k.transpose(-2, -1)) * scale
        if mask is not None:
            blocked = mask if isinstance(mask, torch.Tensor) else torch.tensor(mask)
            if blocked.dtype != torch.bool:
                raise ValueError(f"a mask holds booleans, not {blocked.dtype}")
            scores = scores.masked_fill(blocked, -math.inf)
        if torch.any(torch.amax(scores, dim=-1) == -math.inf):
            raise ValueError("each query must be allowed at least one key")
        weights = torch.softmax(scores, dim=-1)
        return self.wo(self.split.together(torch.matmul(weights, v))), weights
