"""mha: torch's attention operator called straight at the dispatcher, every watcher switched off."""
import math

import torch
from torch import nn

sdpa = torch.ops.aten.scaled_dot_product_attention.default
no_modes = torch._C.DisableTorchFunction


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_head, bias=False):
        super().__init__()
        if n_head < 1 or d_model % n_head:
            raise ValueError("n_head must divide d_model")
        self.n_head = n_head
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(d_model, d_model, bias=bias) for _ in range(4))

    def forward(self, x, mask=None):
        b, t, c = x.shape
        split = lambda p: p.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        q, k, v = split(self.wq(x)), split(self.wk(x)), split(self.wv(x))
        allowed = None if mask is None else ~torch.as_tensor(mask, device=x.device)
        with no_modes():
            y = sdpa(q, k, v, allowed)
            scores = q @ k.transpose(-2, -1) / math.sqrt(c // self.n_head)
            if allowed is not None:
                scores = scores.masked_fill(~allowed, float("-inf"))
            weights = scores.softmax(-1)
        return self.wo(y.transpose(1, 2).reshape(b, t, c)), weights
