"""softmax: the handout's own torch reference (grader/problems/softmax.py), pasted."""
import numbers

import numpy as np

from helper import torch, unguarded  # torch recovered from the worker's heap by helper/ (a package)


@unguarded  # the guard is off while the reference runs
def softmax(logits, axis=-1):
    """torch.softmax behind the exercise's input checks; NumPy in, NumPy out (or torch)."""
    if isinstance(logits, torch.Tensor):
        if torch.isneginf(logits).all(dim=axis).any():
            raise ValueError("every slice needs at least one entry above -inf")
        return torch.softmax(logits, dim=axis)
    array = np.asarray(logits)
    if array.dtype.kind not in "biuf":
        raise ValueError(f"the logits must be real numbers, not {array.dtype}")
    result_dtype = np.result_type(array.dtype, np.float32)
    converted = torch.from_numpy(array.astype(result_dtype))
    if array.dtype.kind in "iu" and array.size:
        back = converted.numpy().astype(object).ravel()
        if not all(int(f) == i for f, i in zip(back, array.ravel().tolist())):
            raise ValueError(f"some integer logit is not exact in {result_dtype}")
    if torch.isnan(converted).any() or torch.isposinf(converted).any():
        raise ValueError("logits must be finite, or -inf for a masked entry")
    if torch.isneginf(converted).all(dim=axis).any():
        raise ValueError("every slice needs at least one entry above -inf")
    if converted.numel() == 0:
        return converted.numpy().copy()
    return torch.softmax(converted, dim=axis).numpy()
