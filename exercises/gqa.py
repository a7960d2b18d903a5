"""Bonus exercise `gqa`: grouped-query attention, where query heads share key/value heads."""

import math
import numbers

import numpy as np
import torch
from torch import nn


def repeat_kv(x, n_rep):
    """Repeat each key/value head ``n_rep`` times, once for every query head of its group.

    Query heads are grouped contiguously: with 4 query heads and 2 key/value heads, query
    heads 0 and 1 use key/value head 0, query heads 2 and 3 use head 1. Output head ``h`` is
    input head ``h // n_rep`` (the order ``[0, 0, 1, 1]``, not ``[0, 1, 0, 1]``).

    Args:
        x: np.ndarray or torch.Tensor ``(B, H_kv, T, D)``.
        n_rep: how many query heads share each key/value head, a positive integer.

    Returns:
        the same kind of array as ``x``, shape ``(B, H_kv * n_rep, T, D)`` and ``x``'s dtype;
        ``n_rep == 1`` returns ``x`` unchanged.

    Raises:
        ValueError: if ``x`` is not 4-D or ``n_rep`` is not a positive integer.
    """
    raise NotImplementedError("gqa: not implemented yet")


class GroupedQueryAttention(nn.Module):
    """Self-attention with ``n_head`` query heads sharing ``n_kv_head`` key/value heads.

    With ``d_head = d_model // n_head``: ``wq`` and ``wo`` are
    ``nn.Linear(d_model, d_model, bias=bias)``; ``wk`` and ``wv`` are
    ``nn.Linear(d_model, n_kv_head * d_head, bias=bias)``. The parameter count is
    ``2 * d_model**2 + 2 * d_model * n_kv_head * d_head`` without bias, and a KV cache stores
    ``2 * n_kv_head * d_head`` numbers per token: ``n_head / n_kv_head`` times fewer than
    multi-head attention. ``n_kv_head == n_head`` is multi-head attention and
    ``n_kv_head == 1`` is multi-query attention.

    Raises:
        ValueError: in ``__init__`` if ``d_model`` is not divisible by ``n_head`` or
            ``n_head`` is not divisible by ``n_kv_head``.
    """

    def __init__(self, d_model, n_head, n_kv_head, bias=False):
        super().__init__()
        raise NotImplementedError("gqa: not implemented yet")

    def forward(self, x, mask=None):
        """Grouped-query self-attention over ``x``.

        Args:
            x: tensor ``(B, T, d_model)``.
            mask: optional bool tensor broadcastable to ``(B, n_head, T, T)``; True blocks a
                key.

        Returns:
            ``(y, weights)``: y ``(B, T, d_model)`` and the attention weights of every query
            head, ``(B, n_head, T, T)``, each row summing to 1.

        Raises:
            ValueError: if the mask is not boolean or some query has no allowed key.
        """
        raise NotImplementedError("gqa: not implemented yet")
