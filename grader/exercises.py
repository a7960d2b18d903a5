"""The exercises: names, files, public functions and points. Other modules refer to these."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Exercise:
    name: str
    points: int
    functions: tuple[str, ...]  # the names a submission's file must define
    uses_torch: bool = False

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
BY_NAME = {e.name: e for e in EXERCISES}
TOTAL_POINTS = sum(e.points for e in EXERCISES)
