"""The worker: the only process that runs a submission's code.

It loads one exercise of one submission, then answers requests from the grading process
(``grader.isolation``): call a function with these arrays, build this module, run this
forward/backward pass. Whatever the student's code returns is converted here to plain arrays,
numbers and strings before it is sent; the grading process decides everything else.

Run as ``python -m grader.worker FD CONFIG_JSON`` when started fresh (the ``spawn`` method),
or entered through ``serve`` in a forked child.
"""

from __future__ import annotations

import json
import socket
import sys
import traceback
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from . import protocol, worker_bonus
from .exercises import BY_NAME, EXERCISE_NAMES


def seed_cpu(seed: int) -> None:
    """Seed the CPU generator that initialises a module's weights, and nothing else:
    ``torch.manual_seed`` also queues a seed for every lazy accelerator backend, recording a
    stack trace each time, which made it the costliest line of a small forward pass."""
    import torch

    torch.random.default_generator.manual_seed(seed)


class BadReturn(Exception):
    """The student's function returned something that is not an array (or tuple of them)."""


class Fatal(BaseException):
    """Ends the worker: the exercise cannot be graded further."""


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


class Session:
    def __init__(self, config: dict[str, Any]):
        self.folder = Path(config["folder"])
        self.exercise = config["exercise"]
        self.package = config["package"]
        self.module: Any = None

    # -- requests ---------------------------------------------------------------------------
    def load(self) -> dict[str, Any]:
        from . import loader, reference

        substitutes = {name: reference for name in EXERCISE_NAMES if name != self.exercise}
        self.module = loader.load_exercise(self.folder, self.exercise, self.package, substitutes)
        missing = [f for f in BY_NAME[self.exercise].functions if not hasattr(self.module, f)]
        return {"missing": missing}

    def call(self, func: str, args: list, kwargs: dict) -> Any:
        if func not in BY_NAME[self.exercise].functions:
            raise Fatal(f"no such function {func!r}")
        return plain(getattr(self.module, func)(*args, **kwargs), f"what {func} returned")

    def mha_build(self, d_model: int, n_head: int, bias: bool) -> dict[str, Any]:
        import torch

        seed_cpu(0)
        module = self.module.MultiHeadAttention(d_model, n_head, bias=bias)
        if not isinstance(module, torch.nn.Module):
            raise BadReturn("MultiHeadAttention(...) is not a torch.nn.Module")
        linears = {}
        for name in ("wq", "wk", "wv", "wo"):
            layer = getattr(module, name, None)
            if isinstance(layer, torch.nn.Linear):
                linears[name] = {
                    "in": int(layer.in_features),
                    "out": int(layer.out_features),
                    "bias": layer.bias is not None,
                }
        count = sum(int(p.numel()) for p in module.parameters())
        return {"count": count, "linears": linears}

    def mha_forward(
        self,
        d_model: int,
        n_head: int,
        bias: bool,
        state: dict[str, np.ndarray],
        x: np.ndarray,
        mask: np.ndarray | None,
        grad_y: np.ndarray | None,
        device: str,
    ) -> dict[str, Any]:
        import torch

        seed_cpu(0)
        module = self.module.MultiHeadAttention(d_model, n_head, bias=bias)
        dtype = torch.from_numpy(x).dtype
        module = module.to(device=device, dtype=dtype)
        with torch.no_grad():
            for key, value in state.items():
                layer_name, param_name = key.split(".")
                target = getattr(getattr(module, layer_name), param_name)
                if target is None or tuple(target.shape) != value.shape:
                    raise BadReturn(f"{key} is missing or has another shape than {value.shape}")
                target.copy_(torch.from_numpy(value))
        tx = torch.from_numpy(x).to(device).requires_grad_(grad_y is not None)
        tmask = None if mask is None else torch.from_numpy(mask).to(device)
        result = module(tx, tmask) if tmask is not None else module(tx)
        if not isinstance(result, tuple) or len(result) != 2:
            raise BadReturn("forward must return a tuple (y, weights)")
        y, weights = result
        if not isinstance(y, torch.Tensor) or not isinstance(weights, torch.Tensor):
            raise BadReturn("forward must return two tensors (y, weights)")
        reply: dict[str, Any] = {"y": plain(y, "y"), "weights": plain(weights, "weights")}
        if grad_y is not None:
            y.backward(torch.from_numpy(grad_y).to(device=y.device, dtype=y.dtype))
            reply["dx"] = plain(tx.grad if tx.grad is not None else torch.zeros_like(tx), "dx")
            grads = {}
            for key in state:
                layer_name, param_name = key.split(".")
                grad = getattr(getattr(module, layer_name), param_name).grad
                grads[key] = plain(grad if grad is not None else torch.zeros(state[key].shape), key)
            reply["grads"] = grads
        return reply


def _describe(error: BaseException, folder: Path) -> dict[str, Any]:
    frames = [
        f"{Path(f.filename).name} line {f.lineno}, in {f.name}: {(f.line or '').strip()}"
        for f in traceback.extract_tb(error.__traceback__)
        if Path(f.filename).resolve().is_relative_to(folder.resolve())
    ]
    return {
        "type": type(error).__name__,
        "message": str(error)[:1000],
        "value_error": isinstance(error, ValueError),
        "not_implemented": isinstance(error, NotImplementedError),
        "bad_return": isinstance(error, BadReturn),
        "where": frames[-3:],
    }


def serve(sock: socket.socket, config: dict[str, Any]) -> None:
    """Answer requests until told to exit or the grading process goes away."""
    # A forked worker inherits the grading process's warning filters (pytest turns warnings
    # into errors). Clear them: a student's warning is printed to the worker's output, never
    # raised, whoever started the grading.
    warnings.resetwarnings()
    session = Session(config)
    while True:
        try:
            request = protocol.recv(sock)
        except (EOFError, OSError):
            return
        op = request.get("op")
        if op == "exit":
            protocol.send(sock, {"ok": True, "value": None})
            return
        try:
            if op == "load":
                value = session.load()
            elif op in ("call", "mha_build", "mha_forward"):
                value = getattr(session, op)(**request["kwargs"])
            elif op in worker_bonus.OPS:
                value = worker_bonus.handle(session, op, request["kwargs"])
            else:
                raise Fatal(f"unknown request {op!r}")
            reply: dict[str, Any] = {"ok": True, "value": value}
        except Fatal as error:
            protocol.send(sock, {"fatal": str(error)})
            return
        except SystemExit as error:
            protocol.send(sock, {"fatal": f"the code called sys.exit({error.code!r})"})
            return
        except KeyboardInterrupt:
            protocol.send(sock, {"fatal": "the code raised KeyboardInterrupt"})
            return
        except MemoryError:
            protocol.send(sock, {"fatal": "the code ran out of memory (MemoryError)"})
            return
        except BaseException as error:  # the student's exception, reported as data
            reply = {"ok": False, "error": _describe(error, session.folder)}
        try:
            protocol.send(sock, reply)
        except protocol.ProtocolError as error:
            protocol.send(sock, {"ok": False, "error": {
                "type": "BadReturn", "message": str(error), "value_error": False,
                "not_implemented": False, "bad_return": True, "where": []}})


def main(argv: list[str]) -> None:
    fd, config = int(argv[0]), json.loads(argv[1])
    sock = socket.socket(fileno=fd)
    try:
        serve(sock, config)
    finally:
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
