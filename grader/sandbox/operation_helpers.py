"""The worker's helpers: what an exercise's operations are given besides NumPy and torch, and
what the worker itself converts a student's return values with. Split from
``grader.sandbox.worker``, which puts them in each operation's namespace (``Session.load``).

- ``plain``: a student's return value as plain arrays (``BadReturn`` where it is not one);
- ``seed_cpu``, ``linears``, ``load_state``: a module's weights seeded, its ``nn.Linear``
  layers described, given weights loaded;
- ``run_backward``: a backward pass whose error, raised in autograd's engine, names the
  student's line (``ANOMALY_ADVICE``, ``_anomaly_frames``).

The answer key's operations run with the same helpers in the grading process. Like the worker,
this module imports only the standard library, NumPy, torch (lazily) and ``protocol``: the
zygote runs it from source.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

import numpy as np

from . import protocol


class BadReturn(Exception):
    """The student's code returned something that is not an array (or tuple of them)."""


def seed_cpu(seed: int) -> None:
    """Seed the CPU generator that initialises a module's weights, and nothing else:
    ``torch.manual_seed`` also queues a seed for every lazy accelerator backend, recording a
    stack trace each time, which made it the costliest line of a small forward pass."""
    import torch

    torch.random.default_generator.manual_seed(seed)


def _to_array(value: Any, what: str) -> np.ndarray:
    module = type(value).__module__
    if module.startswith("torch"):
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        array = np.array(value, subok=False, copy=True)
    elif isinstance(value, (np.generic, bool, int, float, list)):
        try:
            array = np.array(value, subok=False)
        except Exception as error:  # ragged lists and the like
            raise BadReturn(f"{what} could not be read as an array: {error}") from None
    else:
        raise BadReturn(f"{what} is a {type(value).__name__}, expected a NumPy array")
    if array.dtype.name not in protocol.DTYPES:
        raise BadReturn(f"{what} has dtype {array.dtype}, expected numbers or booleans")
    return array


def plain(value: Any, what: str = "the return value") -> Any:
    """Convert a student's return value: an array, or a tuple of arrays."""
    if isinstance(value, tuple):
        return tuple(plain(x, f"element {i} of {what}") for i, x in enumerate(value))
    return _to_array(value, what)


def linears(module: Any, names: tuple[str, ...] = ("wq", "wk", "wv", "wo")) -> dict[str, Any]:
    """The ``nn.Linear`` attributes among ``names``: their sizes and whether they have a bias."""
    import torch

    found = {}
    for name in names:
        layer = getattr(module, name, None)
        if isinstance(layer, torch.nn.Linear):
            found[name] = {"in": int(layer.in_features), "out": int(layer.out_features),
                           "bias": layer.bias is not None}
    return found


def load_state(module: Any, state: dict[str, np.ndarray], *,
               report: bool = False) -> dict[str, str]:
    """Copy ``{"wq.weight": array, ...}`` into the module's parameters, shapes checked. A
    parameter the module lacks, or holds in another shape, raises BadReturn; with ``report``
    it is left as it is and named in the dict returned instead (``{"wo.bias": "missing",
    "wq.weight": "shape (12, 6)"}``), everything that fits loaded: the grading process then
    says what the module lacks, which is no error its code raised."""
    import torch

    unfit = {}
    with torch.no_grad():
        for key, value in state.items():
            layer_name, param_name = key.split(".")
            target = getattr(getattr(module, layer_name, None), param_name, None)
            if not isinstance(target, torch.Tensor):
                unfit[key] = "missing"
            elif tuple(target.shape) != value.shape:
                unfit[key] = f"shape {tuple(target.shape)}"
            else:
                target.copy_(torch.from_numpy(value))
                continue
            if not report:
                raise BadReturn(f"{key} is missing or has another shape than {value.shape}")
    return unfit


def run_backward(y: Any, grad: Any, again: Any) -> None:
    """``y.backward(grad)``. When torch raises there (a tensor autograd needed was changed in
    place...), no line of the student's is on the stack: autograd's engine runs the backward
    pass. Then the forward pass runs again (``again()``, returning its ``y``) under autograd's
    anomaly mode, which records where each operation was called, and the error carries the
    student's frames of the operation whose gradient failed (``forward_frames``)."""
    import torch

    try:
        if (type(y) is torch.Tensor and type(grad) is torch.Tensor and y.requires_grad
                and (y.shape, y.dtype, y.device) == (grad.shape, grad.dtype, grad.device)):
            # The same gradient, bit for bit, as y.backward(grad), whose check of the two
            # shapes imports torch.fx's symbolic shapes and SymPy (0.6 s) on its first call
            (y * grad).sum().backward()
        else:  # what y.backward says of anything else
            y.backward(grad)
    except Exception as error:
        error.forward_frames = _anomaly_frames(again, grad)  # type: ignore[attr-defined]
        raise


# torch's advice, in an autograd error, to run its anomaly mode or to read the traceback that
# mode prints: the kit ran it (``run_backward``) and names the student's line itself, and the
# worker's output is not what the student reads.
ANOMALY_ADVICE = re.compile(
    r"\s*Hint: (?:enable anomaly detection to find the operation that failed to compute its "
    r"gradient, with torch\.autograd\.set_detect_anomaly\([^)]*\)\.|the backtrace further "
    r"above shows the operation that failed to compute its gradient\. The variable in question "
    r"was changed in there or anywhere later\. Good luck!)")
# A frame of the forward call that torch's anomaly mode reports: (file, line, function, code).
ANOMALY_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<name>[^\n]+)\n'
                           r"(?: {4}(?P<code>[^\n]*))?")


def _anomaly_frames(again: Any, grad: Any) -> list[tuple[str, int, str, str]]:
    import torch

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.autograd.set_detect_anomaly(True, check_nan=False):
            try:
                again().backward(grad)
            except Exception:
                pass
    for warning in caught:
        text = str(warning.message)
        if "Traceback of forward call that caused the error" in text:
            return [(m["file"], int(m["line"]), m["name"].strip(), (m["code"] or "").strip())
                    for m in ANOMALY_FRAME.finditer(text)]
    return []
