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
        raise NotImplementedError("decode: not implemented yet")

    def __len__(self):
        """The number of cached positions (0 for an empty cache)."""
        raise NotImplementedError("decode: not implemented yet")

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
        raise NotImplementedError("decode: not implemented yet")


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
    raise NotImplementedError("decode: not implemented yet")
