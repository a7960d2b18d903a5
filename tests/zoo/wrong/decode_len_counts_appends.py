# zoo: decode
"""Zoo: len(cache) counts append calls, not positions, so chunks get the wrong mask."""

import math

import torch

from .kv_cache import kv_cache_mask


class KVCache:
    def __init__(self):
        self.keys, self.values = [], []

    def __len__(self):
        return len(self.keys)

    def append(self, k, v):
        if k.shape != v.shape:
            raise ValueError("k and v differ in shape")
        if self.keys and (k.device != self.keys[0].device or k.shape[:2] != self.keys[0].shape[:2]):
            raise ValueError("k does not fit the cache")
        self.keys.append(k)
        self.values.append(v)
        return torch.cat(self.keys, 2), torch.cat(self.values, 2)


def decode_step(mha, x_new, cache):
    b, t, c = x_new.shape
    h = mha.n_head

    def split(p):
        return p.view(b, t, h, c // h).transpose(1, 2)

    n_cached = len(cache)
    k, v = cache.append(split(mha.wk(x_new)), split(mha.wv(x_new)))
    scores = split(mha.wq(x_new)) @ k.transpose(-2, -1) / math.sqrt(c // h)
    mask = torch.as_tensor(kv_cache_mask(n_cached, t), device=x_new.device)
    weights = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
    return mha.wo((weights @ v).transpose(1, 2).reshape(b, t, c))
