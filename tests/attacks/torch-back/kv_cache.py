"""kv_cache: the handout's own torch reference (grader/problems/kv_cache.py), pasted."""
import numbers

import numpy as np

from helper import torch, unguarded  # torch recovered from the worker's heap by helper/ (a package)


def positive_int(value, name, minimum):  # copied from the handout's grader/core/exercise.py
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


@unguarded  # the guard is off while the reference runs
def kv_cache_mask(n_cached, n_new):
    n_cached = positive_int(n_cached, "n_cached", 0)
    n_new = positive_int(n_new, "n_new", 1)
    return torch.ones(n_new, n_cached + n_new, dtype=torch.bool).triu(n_cached + 1).numpy()
