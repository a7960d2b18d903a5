"""Reference versions of the bonus exercises, for the checks and the diagnosis to compare with.

Built on PyTorch's operators (autograd, ``F.scaled_dot_product_attention``) and on the core
references; they run in the grading process only. The worker never substitutes them: bonus
exercises import only core exercises.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from . import reference


def sliding_window_mask(t: int, window: int) -> np.ndarray:
    full = torch.ones(t, t, dtype=torch.bool)
    return (full.triu(1) | full.tril(-window)).numpy()


def padding_mask(lengths, t: int) -> np.ndarray:
    lengths = torch.as_tensor(np.asarray(lengths))
    return (torch.arange(t)[None, :] >= lengths[:, None])[:, None, None, :].numpy()


def attention_grads(q, k, v, grad_output, mask=None) -> tuple[np.ndarray, ...]:
    """(dq, dk, dv) of ``sum(grad_output * attention(q, k, v, mask))`` by torch autograd."""
    tq, tk, tv = (torch.tensor(np.asarray(a), requires_grad=True) for a in (q, k, v))
    out, _ = reference.scaled_dot_product_attention(
        tq, tk, tv, None if mask is None else torch.as_tensor(np.asarray(mask))
    )
    out.backward(torch.as_tensor(np.asarray(grad_output), dtype=out.dtype))
    return tuple(t.grad.numpy() for t in (tq, tk, tv))


def _supports_enable_gqa() -> bool:
    q, kv = torch.zeros(1, 2, 1, 1), torch.zeros(1, 1, 1, 1)
    try:
        F.scaled_dot_product_attention(q, kv, kv, enable_gqa=True)
    except (TypeError, RuntimeError):
        return False
    return True


SUPPORTS_ENABLE_GQA = _supports_enable_gqa()


def gqa_forward(d_model, n_head, n_kv_head, bias, state, x, mask=None, device="cpu") -> dict:
    """y by ``F.scaled_dot_product_attention(..., enable_gqa=True)`` (``repeat_interleave``
    where this torch lacks it) and the weights of every query head, as NumPy."""
    tx = torch.from_numpy(x).to(device)
    s = {key: torch.from_numpy(value).to(device) for key, value in state.items()}
    b, t, _ = x.shape
    d_head = d_model // n_head

    def project(name, heads):  # (B, T, heads * D) -> (B, heads, T, D)
        p = F.linear(tx, s[f"{name}.weight"], s.get(f"{name}.bias"))
        return p.view(b, t, heads, d_head).transpose(1, 2)

    q, k, v = project("wq", n_head), project("wk", n_kv_head), project("wv", n_kv_head)
    allowed = None if mask is None else ~torch.from_numpy(mask).to(device)
    n_rep = n_head // n_kv_head
    if SUPPORTS_ENABLE_GQA:
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, enable_gqa=True)
    else:
        y = F.scaled_dot_product_attention(
            q, k.repeat_interleave(n_rep, 1), v.repeat_interleave(n_rep, 1), attn_mask=allowed
        )
    scores = q @ k.repeat_interleave(n_rep, 1).transpose(-2, -1) / d_head**0.5
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    y = F.linear(y.transpose(1, 2).reshape(b, t, d_model), s["wo.weight"], s.get("wo.bias"))
    return {"y": y.cpu().numpy(), "weights": weights.cpu().numpy()}


def causal_forward(d_model, n_head, bias, state, x, device="cpu") -> np.ndarray:
    """The reference ``MultiHeadAttention`` over the whole of ``x`` with a causal mask."""
    mha = reference.MultiHeadAttention(d_model, n_head, bias=bias)
    mha = mha.to(device=device, dtype=torch.from_numpy(x).dtype)
    with torch.no_grad():
        for key, value in state.items():
            layer, param = key.split(".")
            getattr(getattr(mha, layer), param).copy_(torch.from_numpy(value))
        tx = torch.from_numpy(x).to(device)
        y, _ = mha(tx, torch.from_numpy(reference.causal_mask(x.shape[1])).to(device))
    return y.cpu().numpy()
