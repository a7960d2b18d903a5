"""Red team: decode without decoding. The core ``MultiHeadAttention`` this file may import is
a proxy whose forward the answer key computes; so keep every token seen and ask the key for the
whole causal forward each step. It passes the source rule (no forbidden name is used)."""

import torch

from .kv_cache import kv_cache_mask
from .mha import MultiHeadAttention


class KVCache:
    """The keys and values one attention layer has computed so far.

    Keys and values are kept per head, ``(B, H, T, D)``; ``len(cache)`` is T, the number of
    positions cached. An empty cache takes its batch size, head count, width, dtype and
    device from the first ``append``.
    """

    def __init__(self):
        self.k = None
        self.v = None
        self.xs = None

    def __len__(self):
        """The number of cached positions (0 for an empty cache)."""
        return 0 if self.k is None else self.k.shape[-2]

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



def decode_step(mha, x_new, cache):
    b, t_new, c = x_new.shape
    h = mha.n_head
    cache.append(x_new.new_zeros(b, h, t_new, c // h), x_new.new_zeros(b, h, t_new, c // h))
    cache.xs = x_new if cache.xs is None else torch.cat([cache.xs, x_new], dim=1)
    full = MultiHeadAttention(c, h, bias=mha.wq.bias is not None).to(dtype=mha.wq.weight.dtype)
    full.load_state_dict(mha.state_dict())
    total = cache.xs.shape[1]
    y, _ = full(cache.xs, torch.as_tensor(kv_cache_mask(0, total), device=x_new.device))
    return y[:, total - t_new:]
