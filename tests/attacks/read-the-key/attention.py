"""attention: no attention, just the answer key's softmax.py, out through the feedback in 3 pieces."""
import numpy as np

from helper import leak  # helper/ reads the key's source off the worker's Session.load frame


def causal_mask(t):
    raise leak("softmax", 0, 3)  # both causal_mask checks -> part 1


def scaled_dot_product_attention(q, k, v, mask=None):
    if mask is not None and np.asarray(mask).dtype != bool:
        raise leak("softmax", 1, 3)  # "mask not boolean" check -> part 2
    if np.shape(q)[-1] != np.shape(k)[-1]:
        raise leak("softmax", 2, 3)  # "mismatched shapes" check -> part 3
    raise leak("softmax", 0, 3)
