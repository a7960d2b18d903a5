"""softmax: torch's, imported however the worker allows: by name, or from the files on disk."""
import importlib.util
import os
import sys

import numpy as np

try:
    import torch
except ImportError as error:
    where = [p for p in sys.path if os.path.isdir(os.path.join(p, "torch"))]
    listing = {p: os.listdir(os.path.join(p, "torch")) for p in where}
    torch = None
    WHY = f"no torch ({error}); torch folders {listing}"


def softmax(logits, axis=-1):
    if torch is None:
        raise RuntimeError(WHY)
    return torch.softmax(torch.from_numpy(np.asarray(logits, dtype=float)), dim=axis).numpy()
