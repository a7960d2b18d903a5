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
        raise NotImplementedError("mha: not implemented yet")

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
        raise NotImplementedError("mha: not implemented yet")
