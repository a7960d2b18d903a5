"""Naming the likely misconception behind a failing bonus exercise.

Each probe feeds the submission a fixed input on which the mistaken version and the correct
one differ, and names the misconception only when the submission reproduces the mistaken
output and not the correct one: a correct submission never gets an id. Ids:

- ``window-off-by-one``: the sliding window lets a query see ``window + 1`` or ``window - 1``
  keys.
- ``padding-on-queries``: the padding mask hides padded *queries* instead of padded keys.
- ``backward-missing-mask``: the backward pass recomputes the weights without the mask.
- ``gqa-interleave-order``: key/value heads tiled ``[0, 1, 0, 1]`` instead of contiguous
  groups ``[0, 0, 1, 1]``.
- ``decode-upper-left``: the cache is right but new queries are masked from the top left, as
  if they were the first positions of the sequence.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from . import reference, reference_bonus
from .isolation import StudentError
from .student import NotImplementedYet


def diagnose(exercise: str, student: Any) -> list[str]:
    """The misconception ids ``student`` (a ``Student`` for a bonus exercise) shows."""
    probe = PROBES.get(exercise)
    if probe is None:
        return []
    try:
        return probe(student)
    except (StudentError, NotImplementedYet):
        return []
    except Exception:  # an output the probe cannot compare: no diagnosis
        return []


def _same(got: Any, expected: Any, rtol: float = 1e-6, atol: float = 1e-8) -> bool:
    got, expected = np.asarray(got), np.asarray(expected)
    return got.shape == expected.shape and bool(
        np.allclose(got.astype(np.float64), expected.astype(np.float64), rtol=rtol, atol=atol)
    )


def _mistaken(got: Any, correct: Any, wrong: Any) -> bool:
    return not _same(got, correct) and _same(got, wrong)


# -- masks ------------------------------------------------------------------------------------
def _masks(student: Any) -> list[str]:
    found = []
    t = 6
    off_by_one = []
    for window in (2, 3):
        got = student.sliding_window_mask(t, window)
        correct = reference_bonus.sliding_window_mask(t, window)
        off_by_one.append(
            _mistaken(got, correct, reference_bonus.sliding_window_mask(t, window + 1))
            or _mistaken(got, correct, reference_bonus.sliding_window_mask(t, window - 1))
        )
    if all(off_by_one):
        found.append("window-off-by-one")
    lengths = np.array([2, 4, 3])
    got = np.asarray(student.padding_mask(lengths, 4))
    correct = reference_bonus.padding_mask(lengths, 4)
    on_queries = np.swapaxes(correct, -1, -2)  # (B, 1, T, 1): padded queries hidden
    try:
        shown = np.broadcast_to(got, (3, 1, 4, 4))
    except ValueError:
        shown = None
    if shown is not None and _mistaken(shown, np.broadcast_to(correct, (3, 1, 4, 4)),
                                       np.broadcast_to(on_queries, (3, 1, 4, 4))):
        found.append("padding-on-queries")
    return found


# -- attention_backward ----------------------------------------------------------------------
def _attention_backward(student: Any) -> list[str]:
    rng = np.random.default_rng(6)
    q, k, v, g = (rng.normal(size=(3, 2)) for _ in range(4))
    mask = reference.causal_mask(3)
    got = student.attention_backward(q, k, v, g, mask)
    correct = reference_bonus.attention_grads(q, k, v, g, mask)
    unmasked = reference_bonus.attention_grads(q, k, v, g)
    # The mistake may hide in any of the three gradients (dv, dq, dk all use the weights).
    if all(_same(a, b) for a, b in zip(got, correct)):
        return []
    wrong = [not _same(a, b) for a, b in zip(got, correct)]
    if all(_same(a, b) for a, b, w in zip(got, unmasked, wrong) if w):
        return ["backward-missing-mask"]
    return []


# -- gqa --------------------------------------------------------------------------------------
def _tiled_forward(d_model, n_head, n_kv_head, state, x) -> np.ndarray:
    """Grouped-query attention whose KV heads are tiled [0, 1, 0, 1]: the mistake."""
    tx = torch.from_numpy(x)
    s = {key: torch.from_numpy(value) for key, value in state.items()}
    b, t, _ = x.shape
    d_head = d_model // n_head

    def project(name, heads):
        return F.linear(tx, s[f"{name}.weight"]).view(b, t, heads, d_head).transpose(1, 2)

    n_rep = n_head // n_kv_head
    q = project("wq", n_head)
    k, v = (project(n, n_kv_head).repeat(1, n_rep, 1, 1) for n in ("wk", "wv"))
    y = F.scaled_dot_product_attention(q, k, v)
    return F.linear(y.transpose(1, 2).reshape(b, t, d_model), s["wo.weight"]).numpy()


def _gqa(student: Any) -> list[str]:
    x = np.arange(2 * 3 * 1 * 2, dtype=np.float64).reshape(2, 3, 1, 2)
    got = student.repeat_kv(x, 2)
    correct = np.repeat(x, 2, axis=1)
    if _mistaken(got, correct, np.tile(x, (1, 2, 1, 1))):
        return ["gqa-interleave-order"]
    rng = np.random.default_rng(4)
    d_model, n_head, n_kv_head = 8, 4, 2
    state = {"wq.weight": rng.normal(size=(8, 8)) / 2, "wk.weight": rng.normal(size=(4, 8)) / 2,
             "wv.weight": rng.normal(size=(4, 8)) / 2, "wo.weight": rng.normal(size=(8, 8)) / 2}
    x = rng.normal(size=(1, 3, 8))
    got = student.gqa_forward(d_model, n_head, n_kv_head, False, state, x)["y"]
    correct = reference_bonus.gqa_forward(d_model, n_head, n_kv_head, False, state, x)["y"]
    if _mistaken(got, correct, _tiled_forward(d_model, n_head, n_kv_head, state, x)):
        return ["gqa-interleave-order"]
    return []


# -- decode -----------------------------------------------------------------------------------
def _upper_left_decode(d_model, n_head, state, xs) -> np.ndarray:
    """Decoding with a correct cache but the new queries' mask anchored at the top left."""
    mha = reference.MultiHeadAttention(d_model, n_head).double()
    with torch.no_grad():
        for key, value in state.items():
            layer, param = key.split(".")
            getattr(getattr(mha, layer), param).copy_(torch.from_numpy(value))
        keys, values, ys = [], [], []
        d_head = d_model // n_head
        for chunk in xs:
            x = torch.from_numpy(chunk)
            b, t, _ = x.shape

            def split(p, b=b, t=t):  # (B, T, C) -> (B, H, T, D)
                return p.view(b, t, n_head, d_head).transpose(1, 2)

            keys.append(split(mha.wk(x)))
            values.append(split(mha.wv(x)))
            k, v = torch.cat(keys, dim=2), torch.cat(values, dim=2)
            mask = torch.ones(t, k.shape[2], dtype=torch.bool).triu(1)
            y = F.scaled_dot_product_attention(split(mha.wq(x)), k, v, attn_mask=~mask)
            ys.append(mha.wo(y.transpose(1, 2).reshape(b, t, d_model)))
    return torch.cat(ys, dim=1).numpy()


def _decode(student: Any) -> list[str]:
    rng = np.random.default_rng(5)
    d_model, n_head = 4, 2
    state = {f"{n}.weight": rng.normal(size=(4, 4)) / 2 for n in ("wq", "wk", "wv", "wo")}
    x = rng.normal(size=(1, 5, 4))
    xs = [x[:, :2], x[:, 2:5]]
    got = np.concatenate(student.decode_run(d_model, n_head, False, state, xs)["ys"], axis=1)
    correct = reference_bonus.causal_forward(d_model, n_head, False, state, x)
    if _mistaken(got, correct, _upper_left_decode(d_model, n_head, state, xs)):
        return ["decode-upper-left"]
    return []


PROBES: dict[str, Callable[[Any], list[str]]] = {
    "masks": _masks,
    "attention_backward": _attention_backward,
    "gqa": _gqa,
    "decode": _decode,
}
