"""Naming the misunderstanding behind a failure, from the submission's behaviour alone.

Each misconception comes with a *mistaken version*: a few lines of NumPy that make exactly that
mistake. A probe sends one fixed input through the same ``Student`` proxy the checks use and
compares the submission's answer with the mistaken version's. Every probe input is chosen so
that the correct answer and the mistaken one are far apart (``tests/test_diagnose.py`` keeps
it so), which is why a correct submission is never named.

The source text is never read. A probe that the submission cannot answer (it raises, returns a
wrong shape, is a stub) simply diagnoses nothing; a worker that dies ends the probing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .isolation import StudentError, WorkerLost
from .student import NotImplementedYet


@dataclass(frozen=True)
class Misconception:
    id: str
    exercises: tuple[str, ...]
    mistake: str  # what the code does
    hint: str  # a nudge toward the fix, in the student's terms


MISCONCEPTIONS: dict[str, Misconception] = {m.id: m for m in (
    Misconception(
        "softmax-overflow", ("softmax",),
        "exponentiates the logits directly, so large logits overflow to inf and give NaN",
        "subtract each slice's maximum before np.exp; the result is unchanged and exp() "
        "never sees a number above 0.",
    ),
    Misconception(
        "softmax-wrong-axis", ("softmax",),
        "normalises along a fixed or different axis instead of `axis`",
        "take the max and the sum along the `axis` argument, with keepdims=True, so every "
        "slice along that axis is normalised on its own.",
    ),
    Misconception(
        "fully-masked-row", ("softmax", "attention", "mha"),
        "returns NaN or uniform weights for a row with no allowed entry",
        "a row whose entries are all -inf (every key blocked) has no valid distribution: "
        "detect it before the softmax and raise ValueError instead of returning NaN or "
        "spreading the weight evenly.",
    ),
    Misconception(
        "softmax-backward-diagonal", ("softmax_backward",),
        "uses only the diagonal of the Jacobian, p * (1 - p) * g",
        "raising one logit lowers every other probability in its slice, so the Jacobian is "
        "diag(p) - p p^T: the gradient is p * (g - sum(p * g)) along the axis.",
    ),
    Misconception(
        "mask-after-softmax", ("attention", "mha"),
        "zeroes the blocked weights after the softmax, so rows no longer sum to 1",
        "apply the mask to the scores (blocked -> -inf) before the softmax; the softmax then "
        "gives blocked keys exactly 0 and the allowed ones still sum to 1.",
    ),
    Misconception(
        "mask-polarity", ("attention", "mha"),
        "treats True as allowed (torch's SDPA convention) instead of blocked",
        "in this kit True means blocked: fill the scores with -inf where the mask is True "
        "(np.where(mask, -np.inf, scores) or masked_fill(mask, -inf)).",
    ),
    Misconception(
        "causal-mask-diagonal", ("attention",),
        "the causal mask blocks the diagonal, so a position cannot see itself",
        "a position may attend to itself: block only j > i, i.e. np.triu(..., k=1), not k=0.",
    ),
    Misconception(
        "head-split-scrambled", ("heads", "mha"),
        "reshapes straight to (B, H, T, D), mixing positions across heads",
        "split the width first, reshape (B, T, C) -> (B, T, H, D), then swap the T and H "
        "axes; a direct reshape to (B, H, T, D) mixes tokens into each head.",
    ),
    Misconception(
        "scale-by-d-model", ("mha",),
        "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)",
        "each head's dot products are over d_head = d_model / n_head numbers, so divide the "
        "scores by sqrt(d_head).",
    ),
    Misconception(
        "head-averaged-weights", ("mha",),
        "returns weights averaged over heads, (B, T, T)",
        "return one attention map per head, shape (B, H, T, T); do not average over heads "
        "(nn.MultiheadAttention does that only by default).",
    ),
    Misconception(
        "params-grow-with-heads", ("mha",),
        "gives every head the full width, so parameters grow with the head count",
        "the heads share the width: each projection is nn.Linear(d_model, d_model) and is "
        "split into n_head slices of d_head columns, whatever n_head is.",
    ),
    Misconception(
        "kv-cache-upper-left", ("kv_cache",),
        "aligns the causal mask to the top-left of the (n_new, n_cached + n_new) grid",
        "new query i is position n_cached + i: align the mask to the end of the keys (block "
        "key j only when j > n_cached + i), not to the top-left corner.",
    ),
)}


def feedback_line(misconception_id: str) -> str:
    """The sentence a failing check carries when the mistake is diagnosed."""
    return f"Likely mistake ({misconception_id}): {MISCONCEPTIONS[misconception_id].hint}"


# -- comparing an answer with the mistaken version --------------------------------------------
RTOL, ATOL = 1e-5, 1e-8  # loose enough for float32 work, far tighter than any probe's gap


def matches(got: Any, mistaken: Any) -> bool:
    """The submission's answer is the mistaken version's, NaNs in the same places included."""
    got, mistaken = np.asarray(got), np.asarray(mistaken)
    if got.shape != mistaken.shape or got.dtype.kind not in "biuf":
        return False
    if mistaken.dtype == np.bool_:
        return bool(np.array_equal(got, mistaken))
    return bool(np.allclose(got.astype(np.float64), mistaken, rtol=RTOL, atol=ATOL,
                            equal_nan=True))


def _softmax(x: np.ndarray, axis: Any = -1) -> np.ndarray:
    """Max-shifted softmax without any checks: an all -inf slice comes out NaN."""
    with np.errstate(all="ignore"):
        e = np.exp(x - np.max(x, axis=axis, keepdims=True))
        return e / np.sum(e, axis=axis, keepdims=True)


def _naive_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.exp(x) / np.sum(np.exp(x), axis=axis, keepdims=True)


def _grid(*shape: int) -> np.ndarray:
    """Fixed, distinct, unremarkable numbers: no ties, no symmetry a mistake could hide in."""
    return np.cos(1.0 + 0.7 * np.arange(int(np.prod(shape)))).reshape(shape)


# -- softmax ----------------------------------------------------------------------------------
def probe_softmax_overflow(student) -> bool:
    logits = np.array([[1000.0, 999.0], [-1000.0, -1001.0]])
    return matches(student.softmax(logits, axis=-1), _naive_softmax(logits, -1))


def probe_softmax_wrong_axis(student) -> bool:
    logits = 3.0 * _grid(2, 3, 4)
    for axis in (0, 1, -1):
        got = student.softmax(logits, axis=axis)
        others = [a for a in (0, 1, 2, None) if a != axis % 3]
        if any(matches(got, _softmax(logits, a)) for a in others):
            return True
    return False


def _fully_masked_versions(scores: np.ndarray) -> list[np.ndarray]:
    """The two usual results for an all -inf row: NaN (no check) or uniform (-1e9 fill)."""
    return [_softmax(scores), _softmax(np.where(np.isneginf(scores), -1e9, scores))]


def probe_softmax_fully_masked(student) -> bool:
    logits = np.array([[0.0, 1.0, 2.0], [-np.inf, -np.inf, -np.inf]])
    got = student.softmax(logits, axis=-1)
    return any(matches(got, wrong) for wrong in _fully_masked_versions(logits))


# -- softmax_backward ---------------------------------------------------------------------------
def probe_backward_diagonal(student) -> bool:
    p = _softmax(np.array([0.1, 0.5, -0.3, 1.0]))
    g = np.array([1.0, -2.0, 0.5, 0.25])
    return matches(student.softmax_backward(p, g, axis=-1), p * (1 - p) * g)


# -- attention --------------------------------------------------------------------------------
def _attention(q, k, v, mask=None, *, when="before", polarity=True, fill=-np.inf):
    """Attention with one mistake switched on: mask after softmax, inverted mask, fill value."""
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    blocked = None if mask is None else (mask if polarity else ~mask)
    if blocked is not None and when == "before":
        scores = np.where(blocked, fill, scores)
    weights = _softmax(scores)
    if blocked is not None and when == "after":
        weights = np.where(blocked, 0.0, weights)
    with np.errstate(all="ignore"):
        return weights @ v, weights


MASK3 = np.array([[False, True, False], [False, False, True], [True, False, False]])
FULLY_MASKED2 = np.array([[False, True], [True, True]])


def _attention_matches(student, mask, **mistake) -> bool:
    q, k, v = 2.0 * _grid(3, 2), 2.0 * _grid(3, 2)[::-1], _grid(3, 2) + 1.0
    if mask.shape[-1] == 2:
        q, k, v = q[:2], k[:2], v[:2]
    out, weights = student.scaled_dot_product_attention(q, k, v, mask=mask)
    wrong = _attention(q, k, v, mask, **mistake)
    return matches(weights, wrong[1]) and matches(out, wrong[0])


def probe_attention_fully_masked(student) -> bool:
    return any(_attention_matches(student, FULLY_MASKED2, fill=fill) for fill in (-np.inf, -1e9))


def probe_attention_mask_after(student) -> bool:
    return _attention_matches(student, MASK3, when="after")


def probe_attention_mask_polarity(student) -> bool:
    return _attention_matches(student, MASK3, polarity=False)


def probe_causal_mask_diagonal(student) -> bool:
    return matches(student.causal_mask(4), np.triu(np.ones((4, 4), dtype=bool), k=0))


# -- heads ------------------------------------------------------------------------------------
def probe_split_scrambled(student) -> bool:
    x = np.arange(2 * 3 * 4, dtype=np.float64).reshape(2, 3, 4)
    return matches(student.split_heads(x, 2), x.reshape(2, 2, 3, 2))


# -- mha --------------------------------------------------------------------------------------
D_MODEL, N_HEAD = 4, 2
MHA_STATE = {f"{name}.weight": 0.8 * np.cos(0.7 * np.arange(16.0) + 1.3 * i).reshape(4, 4)
             for i, name in enumerate(("wq", "wk", "wv", "wo"))}
MHA_X = 1.5 * _grid(1, 3, D_MODEL)


def _mha(x, mask=None, *, scale_width=None, split="ok", merge="ok", average=False, **mistake):
    """Self-attention with the probe weights; one mistake switched on by the keywords."""
    s, (b, t, c), h = MHA_STATE, x.shape, N_HEAD
    d = c // h

    def heads(p):  # (B, T, C) -> (B, H, T, D), or the scrambled straight reshape
        if split == "scrambled":
            return p.reshape(b, h, t, d)
        return p.reshape(b, t, h, d).swapaxes(1, 2)

    q, k, v = (heads(x @ s[f"{n}.weight"].T) for n in ("wq", "wk", "wv"))
    q = q * np.sqrt(d / (scale_width or d))  # _attention divides by sqrt(d)
    out, weights = _attention(q, k, v, mask, **mistake)
    merged = out.reshape(b, t, c) if merge == "scrambled" else out.swapaxes(1, 2).reshape(b, t, c)
    return merged @ s["wo.weight"].T, weights.mean(axis=1) if average else weights


def _mha_matches(student, mask=None, **mistake) -> bool:
    x = MHA_X if mask is None else MHA_X[:, :mask.shape[-1]]
    got = student.mha_forward(D_MODEL, N_HEAD, False, MHA_STATE, x, mask, None, "cpu")
    y, weights = _mha(x, mask, **mistake)
    return matches(got["weights"], weights) and matches(got["y"], y)


def probe_mha_fully_masked(student) -> bool:
    return any(_mha_matches(student, FULLY_MASKED2, fill=fill) for fill in (-np.inf, -1e9))


def probe_mha_mask_after(student) -> bool:
    return _mha_matches(student, MASK3, when="after")


def probe_mha_mask_polarity(student) -> bool:
    return _mha_matches(student, MASK3, polarity=False)


def probe_mha_split_scrambled(student) -> bool:
    merges = ("ok", "scrambled")  # with the matching merge, or with the straight one
    return any(_mha_matches(student, split="scrambled", merge=merge) for merge in merges)


def probe_mha_scale_by_d_model(student) -> bool:
    return _mha_matches(student, scale_width=D_MODEL)


def probe_mha_head_averaged(student) -> bool:
    return _mha_matches(student, average=True)


def probe_params_grow(student) -> bool:
    # The mistaken version gives each head full-width projections: 4 * n_head * d_model**2
    # parameters. Any count that grows with the head count shows the same misunderstanding.
    counts = [student.mha_build(6, n_head, False)["count"] for n_head in (1, 2, 3)]
    return counts[0] < counts[1] < counts[2]


# -- kv_cache ---------------------------------------------------------------------------------
def probe_kv_upper_left(student) -> bool:
    return matches(student.kv_cache_mask(3, 2), np.triu(np.ones((2, 5), dtype=bool), k=1))


PROBES: dict[str, list[tuple[str, Callable[[Any], bool]]]] = {
    "softmax": [
        ("softmax-overflow", probe_softmax_overflow),
        ("softmax-wrong-axis", probe_softmax_wrong_axis),
        ("fully-masked-row", probe_softmax_fully_masked),
    ],
    "softmax_backward": [("softmax-backward-diagonal", probe_backward_diagonal)],
    "attention": [
        ("fully-masked-row", probe_attention_fully_masked),
        ("mask-after-softmax", probe_attention_mask_after),
        ("mask-polarity", probe_attention_mask_polarity),
        ("causal-mask-diagonal", probe_causal_mask_diagonal),
    ],
    "heads": [("head-split-scrambled", probe_split_scrambled)],
    "mha": [
        ("params-grow-with-heads", probe_params_grow),
        ("fully-masked-row", probe_mha_fully_masked),
        ("mask-after-softmax", probe_mha_mask_after),
        ("mask-polarity", probe_mha_mask_polarity),
        ("head-split-scrambled", probe_mha_split_scrambled),
        ("scale-by-d-model", probe_mha_scale_by_d_model),
        ("head-averaged-weights", probe_mha_head_averaged),
    ],
    "kv_cache": [("kv-cache-upper-left", probe_kv_upper_left)],
}


def diagnose(exercise: str, student: Any) -> list[str]:
    """The ids of the misconceptions ``student``'s behaviour shows, sorted."""
    found: set[str] = set()
    for misconception_id, probe in PROBES.get(exercise, ()):
        try:
            if probe(student):
                found.add(misconception_id)
        except (StudentError, NotImplementedYet):
            continue  # the submission could not answer this probe: nothing to name
        except WorkerLost:
            break  # the worker is gone; the checks have already said what went wrong
        except Exception:  # an answer too malformed to compare (not a tuple, not a dict)
            continue
    return sorted(found)
