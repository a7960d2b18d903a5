"""The mistakes exercise `mha` names, and the probes that find them: each runs the student's
module on fixed weights and input and compares it with a mistaken version of the computation
(or, for an unused bias, with the module's own answer when that bias is zero)."""

from __future__ import annotations

import numpy as np

from ...core.diagnose import (
    FULLY_MASKED2,
    FULLY_MASKED_MISTAKES,
    MASK3,
    attention_with,
    grid,
    matches,
)
from .checks import EX, PROJECTIONS

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


def mistaken_mha(x, mask=None, *, scale_width=None, split="ok", merge="ok", average=False,
                 **mistake):
    """Self-attention with the probe weights; one mistake switched on by the keywords."""
    s, (b, t, c), h = PROBE_STATE, x.shape, N_HEAD
    d = c // h

    def heads(p):  # (B, T, C) -> (B, H, T, D), or the scrambled straight reshape
        if split == "scrambled":
            return p.reshape(b, h, t, d)
        return p.reshape(b, t, h, d).swapaxes(1, 2)

    q, k, v = (heads(x @ s[f"{n}.weight"].T) for n in ("wq", "wk", "wv"))
    q = q * np.sqrt(d / (scale_width or d))  # attention_with divides by sqrt(d)
    out, weights = attention_with(q, k, v, mask, **mistake)
    merged = out.reshape(b, t, c) if merge == "scrambled" else out.swapaxes(1, 2).reshape(b, t, c)
    return merged @ s["wo.weight"].T, weights.mean(axis=1) if average else weights


def mha_matches(student, mask=None, **mistake) -> bool:
    x = PROBE_X if mask is None else PROBE_X[:, :mask.shape[-1]]
    got = student.mha_forward(D_MODEL, N_HEAD, False, PROBE_STATE, x, mask, None, "cpu")
    y, weights = mistaken_mha(x, mask, **mistake)
    return matches(got["weights"], weights) and matches(got["y"], y)


@EX.probe("bias-unused",
          explains=("test_matches_torch_multihead_attention", "test_gradients_match_torch"))
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


@EX.probe("projection-bias-missing",
          explains=("test_has_four_linear_projections", "test_parameter_count_independent_of_heads",
                    "test_matches_torch_multihead_attention", "test_gradients_match_torch"))
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
                    "test_rejects_fully_masked_query"))
def probe_params_grow(student) -> bool:
    # The mistaken version gives each head full-width projections: 4 * n_head * d_model**2
    # parameters. Any count that grows with the head count shows the same misunderstanding.
    counts = [student.mha_build(6, n_head, False)["count"] for n_head in (1, 2, 3)]
    return counts[0] < counts[1] < counts[2]


@EX.probe("fully-masked-row", explains=("test_rejects_fully_masked_query",))
def probe_fully_masked(student) -> bool:
    return any(mha_matches(student, FULLY_MASKED2, **m) for m in FULLY_MASKED_MISTAKES)


@EX.probe("mask-after-softmax",
          explains=("test_matches_torch_multihead_attention", "test_gradients_match_torch",
                    "test_causal_later_token_never_changes_earlier_output",
                    "test_weights_per_head_rows_sum_to_one", "test_per_head_mask_blocks_exactly",
                    "test_rejects_fully_masked_query"))
def probe_mask_after(student) -> bool:
    return mha_matches(student, MASK3, when="after")


@EX.probe("mask-polarity",
          explains=("test_matches_torch_multihead_attention", "test_gradients_match_torch",
                    "test_causal_later_token_never_changes_earlier_output",
                    "test_weights_per_head_rows_sum_to_one", "test_per_head_mask_blocks_exactly",
                    "test_rejects_fully_masked_query"))
def probe_mask_polarity(student) -> bool:
    return mha_matches(student, MASK3, polarity=False)


@EX.probe("head-split-scrambled",
          explains=("test_matches_torch_multihead_attention", "test_gradients_match_torch",
                    "test_token_permutation_equivariance",
                    "test_causal_later_token_never_changes_earlier_output"))
def probe_split_scrambled(student) -> bool:
    merges = ("ok", "scrambled")  # with the matching merge, or with the straight one
    return any(mha_matches(student, split="scrambled", merge=merge) for merge in merges)


@EX.probe("scale-by-d-model",
          explains=("test_matches_torch_multihead_attention", "test_gradients_match_torch"))
def probe_scale_by_d_model(student) -> bool:
    return mha_matches(student, scale_width=D_MODEL)


@EX.probe("scale-missing",
          explains=("test_matches_torch_multihead_attention", "test_gradients_match_torch"))
def probe_scale_missing(student) -> bool:
    return mha_matches(student, scale_width=1)


@EX.probe("head-averaged-weights",
          explains=("test_matches_torch_multihead_attention", "test_gradients_match_torch",
                    "test_token_permutation_equivariance",
                    "test_causal_later_token_never_changes_earlier_output",
                    "test_weights_per_head_rows_sum_to_one", "test_per_head_mask_blocks_exactly"))
def probe_head_averaged(student) -> bool:
    return mha_matches(student, average=True)
