"""The mistakes exercise `mha` names, and the probes that find them: each runs the student's
module on fixed weights and input and compares it with a mistaken version of the computation
(or, for an unused bias, with the module's own answer when that bias is zero). The mistaken
versions are modules (``mistaken_module``), run by the worker operations as the answer key's
module is: what each gives is what earns a hint under a check's example."""

from __future__ import annotations

import itertools

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ...core.diagnose import (
    FULLY_MASKED2,
    FULLY_MASKED_MISTAKES,
    MASK3,
    attention_tensors,
    grid,
    matches,
    operated,
)
from .cases import PROJECTIONS
from .checks import EX

EX.misconception(
    "scale-by-d-model",
    mistake="scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)",
    hint="each head's dot products are over d_head = d_model / n_head numbers, so divide the "
         "scores by sqrt(d_head).",
)
EX.misconception(
    "head-averaged-weights",
    mistake="returns weights averaged over heads, (B, T, T)",
    hint="return one attention map per head, shape (B, H, T, T); do not average over heads "
         "(nn.MultiheadAttention does that only by default).",
)
EX.misconception(
    "bias-unused",
    mistake="never adds the projections' biases, so bias=True computes as if there were none",
    hint="with bias=True each projection adds its bias: call the layer itself (self.wq(x)), or "
         "add self.wq.bias when you multiply by self.wq.weight yourself.",
)
EX.misconception(
    "projection-bias-missing",
    mistake="builds a projection without its bias when bias=True (nn.Linear(d_model, d_model, "
            "bias=False) for wo, say), so the module lacks a weight nn.MultiheadAttention has",
    hint="with bias=True every projection has a bias: build each of wq, wk, wv and wo as "
         "nn.Linear(d_model, d_model, bias=bias).",
)
EX.misconception(
    "params-grow-with-heads",
    mistake="gives every head the full width, so parameters grow with the head count",
    hint="the heads share the width: each projection is nn.Linear(d_model, d_model) and is "
         "split into n_head slices of d_head columns, whatever n_head is.",
)

D_MODEL, N_HEAD = 4, 2
PROBE_STATE = {f"{name}.weight": 0.8 * np.cos(0.7 * np.arange(16.0) + 1.3 * i).reshape(4, 4)
               for i, name in enumerate(PROJECTIONS)}
PROBE_X = 1.5 * grid(1, 3, D_MODEL)
PROBE_BIAS = np.array([0.9, -0.7, 0.5, -1.1])  # moves the weights and y far, alone
# The fully masked row's mistakes, with no check for a row that has no allowed key
FULLY_MASKED = tuple({**m, "checked": False} for m in FULLY_MASKED_MISTAKES)


def mistaken_module(*, scale_width=None, split="ok", merge="ok", average=False,
                    adds=PROJECTIONS, lacks=(), full_width=False, checked=True, **mistake):
    """The module class with one mistake switched on by the keywords: the scores scaled by
    1/sqrt(``scale_width``), the straight reshape to heads (``split``) or back (``merge``),
    the weights averaged over heads, only the biases of ``adds`` added, the projections of
    ``lacks`` built without a bias, every head of the full width, no check for a query with
    no allowed key, or a mask mistake of ``attention_tensors``. In torch, autograd following
    it; its attention by F.scaled_dot_product_attention, which no answer may call."""

    class Mistaken(nn.Module):
        def __init__(self, d_model, n_head, bias=False):
            super().__init__()
            if n_head < 1 or d_model % n_head != 0:
                raise ValueError(f"n_head={n_head} does not divide d_model={d_model}")
            self.n_head = int(n_head)
            width = n_head * d_model if full_width else d_model
            self.wq, self.wk, self.wv = (nn.Linear(d_model, width, bias=bias and name not in lacks)
                                         for name in PROJECTIONS[:3])
            self.wo = nn.Linear(width, d_model, bias=bias and "wo" not in lacks)

        def forward(self, x, mask=None):
            b, t, _ = x.shape
            h = self.n_head
            d = self.wq.out_features // h

            def project(name, p):
                layer = getattr(self, name)
                return F.linear(p, layer.weight, layer.bias if name in adds else None)

            def heads(p):  # (B, T, H * D) -> (B, H, T, D), or the scrambled straight reshape
                if split == "scrambled":
                    return p.reshape(b, h, t, d)
                return p.reshape(b, t, h, d).transpose(1, 2)

            q, k, v = (heads(project(name, x)) for name in PROJECTIONS[:3])
            blocked = None if mask is None else torch.as_tensor(mask, device=x.device)
            if blocked is not None and blocked.dtype != torch.bool:
                raise ValueError(f"the mask must be boolean, not {blocked.dtype}")
            if checked and blocked is not None and mistake.get("when") != "after":
                shown = blocked if mistake.get("polarity", True) else ~blocked
                if shown.expand(b, h, t, t).all(dim=-1).any():
                    raise ValueError("some query has no allowed key (its mask row is all True)")
            out, weights = attention_tensors(q, k, v, blocked, scale=(scale_width or d) ** -0.5,
                                             **mistake)
            if merge == "scrambled":
                merged = out.reshape(b, t, h * d)
            else:
                merged = out.transpose(1, 2).reshape(b, t, h * d)
            return project("wo", merged), weights.mean(dim=1) if average else weights

    return Mistaken


def forwards(*modules):
    """The mistaken version of mha_forward: its reply for each of the mistaken ``modules``
    (keyword arguments of ``mistaken_module``)."""
    def version(*args, **kwargs):
        return [operated(EX, "mha_forward", MultiHeadAttention=mistaken_module(**m))(
            *args, **kwargs) for m in modules]
    return version


def counts(*modules):
    """The mistaken version of mha_build: the parameter count of each of ``modules``."""
    def version(*args, **kwargs):
        return [{"count": operated(EX, "mha_build", MultiHeadAttention=mistaken_module(**m))(
            *args, **kwargs)["count"]} for m in modules]
    return version


def builds(*modules):
    """The mistaken version of mha_build: what each of ``modules`` builds."""
    def version(*args, **kwargs):
        return [operated(EX, "mha_build", MultiHeadAttention=mistaken_module(**m))(
            *args, **kwargs) for m in modules]
    return version


def mha_matches(student, mask=None, **mistake) -> bool:
    """The student's module answers the probe's input as the mistaken one does."""
    x = PROBE_X if mask is None else PROBE_X[:, :mask.shape[-1]]
    args = (D_MODEL, N_HEAD, False, PROBE_STATE, x, mask, None, "cpu")
    got = student.mha_forward(*args)
    wrong = forwards(mistake)(*args)[0]
    return matches(got["weights"], wrong["weights"]) and matches(got["y"], wrong["y"])


# The biases left out: all of them, or all but the output projection's
UNUSED = ({"adds": ()}, {"adds": ("wo",)})


@EX.probe("bias-unused",
          explains=("test_matches_torch_multihead_attention", "test_gradients_match_torch"),
          mistaken={"mha_forward": forwards(*UNUSED)})
def probe_bias_unused(student) -> bool:
    # The query's or the value's bias changes nothing the module returns (the key's bias
    # cancels in the softmax, and the output's is missing too when wo is never applied).
    zero = {**PROBE_STATE, **{f"{name}.bias": np.zeros(D_MODEL) for name in PROJECTIONS}}

    def forward(state):
        return student.mha_forward(D_MODEL, N_HEAD, True, state, PROBE_X, None, None, "cpu")

    base = forward(zero)
    for name in ("wq", "wv"):
        got = forward({**zero, f"{name}.bias": PROBE_BIAS})
        if matches(got["y"], base["y"]) and matches(got["weights"], base["weights"]):
            return True
    return False


# Each set of projections that may be built without their bias
LACKING = tuple({"lacks": lacks} for n in range(1, 5)
                for lacks in itertools.combinations(PROJECTIONS, n))


@EX.probe("projection-bias-missing",
          explains=("test_has_four_linear_projections", "test_parameter_count_independent_of_heads",
                    "test_matches_torch_multihead_attention", "test_gradients_match_torch"),
          mistaken={"mha_build": builds(*LACKING), "mha_forward": forwards(*LACKING)})
def probe_projection_bias_missing(student) -> bool:
    # Four nn.Linear(d_model, d_model) projections, bias-free as asked with bias=False, and one
    # or more of them bias-free with bias=True too.
    built = {bias: student.mha_build(6, 2, bias)["linears"] for bias in (False, True)}
    shapes = all(set(built[b]) == set(PROJECTIONS) and all(
        (layer["in"], layer["out"]) == (6, 6) for layer in built[b].values()) for b in built)
    return (shapes and not any(layer["bias"] for layer in built[False].values())
            and not all(layer["bias"] for layer in built[True].values()))


@EX.probe("params-grow-with-heads",
          explains=("test_has_four_linear_projections", "test_parameter_count_independent_of_heads",
                    "test_matches_torch_multihead_attention", "test_gradients_match_torch",
                    "test_token_permutation_equivariance",
                    "test_causal_later_token_never_changes_earlier_output",
                    "test_weights_per_head_rows_sum_to_one", "test_per_head_mask_blocks_exactly",
                    "test_rejects_fully_masked_query"),
          mistaken={"mha_build": counts({"full_width": True}),
                    "mha_forward": forwards({"full_width": True})})
def probe_params_grow(student) -> bool:
    # The mistaken version gives each head full-width projections: 4 * n_head * d_model**2
    # parameters. Any count that grows with the head count shows the same misunderstanding.
    sizes = [student.mha_build(6, n_head, False)["count"] for n_head in (1, 2, 3)]
    return sizes[0] < sizes[1] < sizes[2]


@EX.probe("fully-masked-row", explains=("test_rejects_fully_masked_query",),
          mistaken={"mha_forward": forwards(*FULLY_MASKED)})
def probe_fully_masked(student) -> bool:
    return any(mha_matches(student, FULLY_MASKED2, **m) for m in FULLY_MASKED)


@EX.probe("mask-after-softmax",
          explains=("test_matches_torch_multihead_attention", "test_gradients_match_torch",
                    "test_causal_later_token_never_changes_earlier_output",
                    "test_weights_per_head_rows_sum_to_one", "test_per_head_mask_blocks_exactly",
                    "test_rejects_fully_masked_query"),
          mistaken={"mha_forward": forwards({"when": "after"})})
def probe_mask_after(student) -> bool:
    return mha_matches(student, MASK3, when="after")


@EX.probe("mask-polarity",
          explains=("test_matches_torch_multihead_attention", "test_gradients_match_torch",
                    "test_causal_later_token_never_changes_earlier_output",
                    "test_weights_per_head_rows_sum_to_one", "test_per_head_mask_blocks_exactly",
                    "test_rejects_fully_masked_query"),
          mistaken={"mha_forward": forwards({"polarity": False})})
def probe_mask_polarity(student) -> bool:
    return mha_matches(student, MASK3, polarity=False)


# With the matching merge, or with the straight one
SCRAMBLED = ({"split": "scrambled"}, {"split": "scrambled", "merge": "scrambled"})


@EX.probe("head-split-scrambled",
          explains=("test_matches_torch_multihead_attention", "test_gradients_match_torch",
                    "test_token_permutation_equivariance",
                    "test_causal_later_token_never_changes_earlier_output"),
          mistaken={"mha_forward": forwards(*SCRAMBLED)})
def probe_split_scrambled(student) -> bool:
    return any(mha_matches(student, **m) for m in SCRAMBLED)


@EX.probe("scale-by-d-model",
          explains=("test_matches_torch_multihead_attention", "test_gradients_match_torch"),
          mistaken={"mha_forward": lambda *args, **kwargs: forwards(
              {"scale_width": operation_arguments(args, kwargs)["d_model"]})(*args, **kwargs)})
def probe_scale_by_d_model(student) -> bool:
    return mha_matches(student, scale_width=D_MODEL)


@EX.probe("scale-missing",
          explains=("test_matches_torch_multihead_attention", "test_gradients_match_torch"),
          mistaken={"mha_forward": forwards({"scale_width": 1})})
def probe_scale_missing(student) -> bool:
    return mha_matches(student, scale_width=1)


@EX.probe("head-averaged-weights",
          explains=("test_matches_torch_multihead_attention", "test_gradients_match_torch",
                    "test_token_permutation_equivariance",
                    "test_causal_later_token_never_changes_earlier_output",
                    "test_weights_per_head_rows_sum_to_one", "test_per_head_mask_blocks_exactly"),
          mistaken={"mha_forward": forwards({"average": True})})
def probe_head_averaged(student) -> bool:
    return mha_matches(student, average=True)


def operation_arguments(args, kwargs) -> dict:
    """mha_forward's arguments by name."""
    names = EX.operations["mha_forward"].__code__.co_varnames[1:]
    return {**dict(zip(names, args)), **kwargs}
