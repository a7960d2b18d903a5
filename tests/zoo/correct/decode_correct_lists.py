# zoo: decode
"""Zoo (correct): one position per list entry; the scores masked by absolute positions (a key
is visible when its position is at most the query's), softmax through torch.softmax."""

import math

import torch


class KVCache:
    def __init__(self):
        self.positions = []  # one (k, v) pair of (B, H, D) per cached position

    def __len__(self):
        return len(self.positions)

    def append(self, k, v):
        if k.dim() != 4 or k.shape != v.shape:
            raise ValueError(f"k {tuple(k.shape)} and v {tuple(v.shape)} must match, 4-D")
        if self.positions:
            old = self.positions[0][0]
            if old.device != k.device:
                raise ValueError(f"cache on {old.device}, keys on {k.device}")
            if (old.shape[0], old.shape[1], old.shape[2]) != (k.shape[0], k.shape[1], k.shape[3]):
                raise ValueError("keys do not fit the cached batch, heads or width")
        for i in range(k.shape[2]):
            self.positions.append((k[:, :, i], v[:, :, i]))
        keys = torch.stack([p[0] for p in self.positions], dim=2)
        values = torch.stack([p[1] for p in self.positions], dim=2)
        return keys, values


def decode_step(mha, x_new, cache):
    b, t, c = x_new.shape
    h = mha.n_head
    start = len(cache)
    q = mha.wq(x_new).view(b, t, h, c // h).transpose(1, 2)
    k, v = cache.append(mha.wk(x_new).view(b, t, h, c // h).transpose(1, 2),
                        mha.wv(x_new).view(b, t, h, c // h).transpose(1, 2))
    query_pos = torch.arange(start, start + t, device=x_new.device)[:, None]
    key_pos = torch.arange(start + t, device=x_new.device)[None, :]
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(c // h)
    scores = scores.masked_fill(key_pos > query_pos, float("-inf"))
    y = torch.softmax(scores, dim=-1) @ v
    return mha.wo(y.transpose(1, 2).reshape(b, t, c))
