"""The exercises: names, files, public functions and points. Other modules refer to these."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Exercise:
    name: str
    points: int
    functions: tuple[str, ...]  # the names a submission's file must define
    uses_torch: bool = False
    bonus: bool = False  # graded and reported apart from the core points

    @property
    def filename(self) -> str:
        return f"{self.name}.py"


EXERCISES: tuple[Exercise, ...] = (
    Exercise("softmax", 15, ("softmax",)),
    Exercise("softmax_backward", 15, ("softmax_backward",)),
    Exercise("attention", 20, ("causal_mask", "scaled_dot_product_attention")),
    Exercise("heads", 10, ("split_heads", "merge_heads")),
    Exercise("mha", 25, ("MultiHeadAttention",), uses_torch=True),
    Exercise("kv_cache", 15, ("kv_cache_mask",)),
)
EXERCISE_NAMES: tuple[str, ...] = tuple(e.name for e in EXERCISES)
TOTAL_POINTS = sum(e.points for e in EXERCISES)

# The bonus track: graded when its file is in the submission, never part of TOTAL_POINTS.
BONUS: tuple[Exercise, ...] = (
    Exercise("masks", 10, ("sliding_window_mask", "padding_mask"), bonus=True),
    Exercise("attention_backward", 10, ("attention_backward",), bonus=True),
    Exercise("gqa", 10, ("repeat_kv", "GroupedQueryAttention"), uses_torch=True, bonus=True),
    Exercise("decode", 10, ("KVCache", "decode_step"), uses_torch=True, bonus=True),
)
BONUS_NAMES: tuple[str, ...] = tuple(e.name for e in BONUS)
BONUS_POINTS = sum(e.points for e in BONUS)
BY_NAME = {e.name: e for e in EXERCISES + BONUS}
