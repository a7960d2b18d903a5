"""Bonus exercise `decode`: a KV cache that really decodes, one step at a time."""

import math

import torch

from .kv_cache import kv_cache_mask
from .mha import MultiHeadAttention  # noqa: F401  (the module decode_step runs)


class KVCache:
    """The keys and values one attention layer has computed so far.

    Keys and values are kept per head, ``(B, H, T, D)``; ``len(cache)`` is T, the number of
    positions cached. An empty cache takes its batch size, head count, width, dtype and
    device from the first ``append``.
    """

    def __init__(self):
        ### BEGIN SOLUTION
        self.k = None
        self.v = None
        ### END SOLUTION

    def __len__(self):
        """The number of cached positions (0 for an empty cache)."""
        ### BEGIN SOLUTION
        return 0 if self.k is None else self.k.shape[-2]
        ### END SOLUTION

    def append(self, k, v):
        """Add the keys and values of new positions; return everything cached.

        Args:
            k: tensor ``(B, H, T_new, D)``, the new positions' keys.
            v: tensor ``(B, H, T_new, D)``, their values.

        Returns:
            ``(k_all, v_all)``: tensors ``(B, H, len(self), D)`` after the append, the old
            positions first.

        Raises:
            ValueError: if ``k`` and ``v`` differ in shape (a different number of positions,
                say), if they are not 4-D, if B, H or D differ from what is cached, or if they
                are on another device than the cache.
        """
        ### BEGIN SOLUTION
        if k.ndim != 4 or tuple(k.shape) != tuple(v.shape):
            raise ValueError(f"k {tuple(k.shape)} and v {tuple(v.shape)} must both be "
                             "(B, H, T_new, D)")
        if k.device != v.device:
            raise ValueError(f"k is on {k.device} but v is on {v.device}")
        if self.k is not None:
            if k.device != self.k.device:
                raise ValueError(f"the cache is on {self.k.device}, the new keys on {k.device}")
            cached = (self.k.shape[0], self.k.shape[1], self.k.shape[3])
            new = (k.shape[0], k.shape[1], k.shape[3])
            if new != cached:
                raise ValueError(f"new keys have (B, H, D) = {new}, the cache holds {cached}")
            k = torch.cat([self.k, k], dim=-2)  # (B, H, T_old + T_new, D)
            v = torch.cat([self.v, v], dim=-2)
        self.k, self.v = k, v
        return k, v
        ### END SOLUTION


def decode_step(mha, x_new, cache):
    """Run ``mha`` over new tokens only, attending to the cached ones and to each other.

    ``decode_step`` relies only on the public parts of the core ``MultiHeadAttention``:
    ``mha.n_head`` and the projections ``mha.wq``, ``mha.wk``, ``mha.wv``, ``mha.wo``
    (``nn.Linear(d_model, d_model)``); not on ``mha.forward`` or other attributes. Feeding a
    sequence through it token by token, or in chunks, gives the outputs of one causal forward
    ``mha(x, causal_mask(T))`` over the whole sequence.

    Args:
        mha: a ``MultiHeadAttention``.
        x_new: tensor ``(B, T_new, d_model)``, the next ``T_new >= 1`` tokens.
        cache: the layer's ``KVCache``; the new tokens' keys and values are appended to it.

    Returns:
        tensor ``(B, T_new, d_model)``: the outputs at the new positions.

    Raises:
        ValueError: (from ``cache.append``) if ``x_new``'s batch size or device does not match
            what the cache holds.
    """
    ### BEGIN SOLUTION
    b, t_new, c = x_new.shape
    n_head = mha.n_head
    d_head = c // n_head

    def split(p):  # (B, T_new, C) -> (B, H, T_new, D)
        return p.view(b, t_new, n_head, d_head).transpose(1, 2)

    n_cached = len(cache)
    q = split(mha.wq(x_new))
    k, v = cache.append(split(mha.wk(x_new)), split(mha.wv(x_new)))  # (B, H, n_cached + T_new, D)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)  # (B, H, T_new, n_cached + T_new)
    # New query i is position n_cached + i: the mask aligns at the bottom right.
    mask = torch.as_tensor(kv_cache_mask(n_cached, t_new), device=x_new.device)
    weights = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
    y = (weights @ v).transpose(1, 2).reshape(b, t_new, c)  # (B, T_new, C)
    return mha.wo(y)
    ### END SOLUTION
