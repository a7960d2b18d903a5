"""softmax_backward: the handout's own torch reference (grader/problems/softmax_backward.py), pasted."""
import numbers

import numpy as np

from helper import torch, unguarded  # torch recovered from the worker's heap by helper/ (a package)


@unguarded  # the guard is off while the reference runs
def softmax_backward(probabilities, upstream, axis=-1):
    """torch's own softmax backward; NumPy in, NumPy out (or torch)."""
    if isinstance(probabilities, torch.Tensor):
        p, g = probabilities, torch.as_tensor(upstream, device=probabilities.device)
    else:
        p, g = np.asarray(probabilities), np.asarray(upstream)
    if tuple(p.shape) != tuple(g.shape):
        raise ValueError(f"probabilities {tuple(p.shape)} and upstream {tuple(g.shape)} differ")
    if isinstance(p, torch.Tensor):
        return torch._softmax_backward_data(g, p, axis % p.ndim, p.dtype)
    common = np.result_type(p.dtype, g.dtype, np.float32)
    tp, tg = torch.from_numpy(p.astype(common)), torch.from_numpy(g.astype(common))
    if tp.numel() == 0:
        return tp.numpy()
    return torch._softmax_backward_data(tg, tp, axis % tp.ndim, tp.dtype).numpy()
