"""mha: torch's own F.multi_head_attention_forward (need_weights=True: baddbmm + softmax + bmm,
no SDPA), rebuilt from torch's source text. The sandbox replaced that function with a stand-in,
but its source file is in the worker; the lines that read it and execute its def are a string,
which numpy.testing.measure compiles and runs in this module's namespace. The source rule reads
no string: the file keeps it."""
import numpy as np
import torch
from torch import nn
from torch.nn import functional

REBUILD = """
with open(functional.__file__) as source:
    text = source.read()
start = text.index("\\ndef multi_head_attention_forward(")
end = text.index("\\ndef ", start + 1)
scope = dict(vars(functional))
exec(text[start:end], scope)
torch_mha = scope["multi_head_attention_forward"]
"""
np.testing.measure(REBUILD)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_head, bias=False):
        super().__init__()
        if d_model % n_head:
            raise ValueError("d_model must be divisible by n_head")
        self.d_model, self.n_head = d_model, n_head
        self.wq = nn.Linear(d_model, d_model, bias=bias)
        self.wk = nn.Linear(d_model, d_model, bias=bias)
        self.wv = nn.Linear(d_model, d_model, bias=bias)
        self.wo = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask=None):
        b, t, d = x.shape
        blocked = None
        if mask is not None:
            if mask.dtype != torch.bool:
                raise ValueError("mask must be boolean")
            full = mask.broadcast_to((b, self.n_head, t, t))
            if full.all(dim=-1).any():
                raise ValueError("some query has no allowed key")
            blocked = full.reshape(b * self.n_head, t, t)
        bias = None
        if self.wq.bias is not None:
            bias = torch.cat([self.wq.bias, self.wk.bias, self.wv.bias])
        seq = x.transpose(0, 1)
        y, weights = torch_mha(
            seq, seq, seq, d, self.n_head,
            torch.cat([self.wq.weight, self.wk.weight, self.wv.weight]), bias,
            None, None, False, 0.0, self.wo.weight, self.wo.bias,
            training=False, need_weights=True, attn_mask=blocked, average_attn_weights=False)
        return y.transpose(0, 1), weights
