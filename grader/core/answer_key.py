"""The answer key, run by the grading process: ``AnswerKey`` calls the key's functions and
operations in this process (the key is trusted: no worker is forked from here), and
``answerer`` keeps the trusted workers that run the key for the proxies of another exercise a
student's file imports (with ``module_call`` for a proxied torch module class). Split from
``grader.core.student``, whose ``Student`` asks them.
"""

from __future__ import annotations

import atexit
import copy
import hashlib
import importlib
import os
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..sandbox.errors import WorkerLost
from ..sandbox.isolation import Sandbox
from ..sandbox.operation_helpers import plain
from .exercise import Exercise, definition_source

# The trusted workers that run the answer key for the proxies, by grading process, key,
# exercise and limits: one serves every submission a grading process grades, and one that was
# lost (a question too big for its limits) is started again on the next question.
_ANSWERERS: dict[tuple, Sandbox] = {}


@atexit.register
def close_answerers() -> None:
    """This process's answer-key workers, ended on its way out (their cgroups go with them)."""
    for (pid, *_), sandbox in list(_ANSWERERS.items()):
        if pid == os.getpid():
            sandbox.kill()


def answerer(key_folder: Path, exercise: Exercise, limits: Any) -> Sandbox:
    """The trusted worker with the key's ``exercise`` loaded (and ``module_call``)."""
    index = (os.getpid(), str(key_folder), exercise.name, limits)
    sandbox = _ANSWERERS.get(index)
    if sandbox is None or sandbox.closed:
        sandbox = _ANSWERERS[index] = Sandbox(key_folder, exercise.name, limits=limits,
                                              trusted=True, framework=exercise.framework)
        reply = sandbox.request("load", functions=list(exercise.functions), siblings={},
                                ops={"module_call": definition_source(module_call)},
                                framework=exercise.framework)
        if reply.get("missing"):
            sandbox.kill()
            raise WorkerLost(f"the answer key does not define {reply['missing']}")
    return sandbox


def module_call(module: Any, name: str, method: str, args: list, kwargs: dict) -> Any:
    """A proxied torch module class, ``module.name`` (``decode`` imports the core
    ``MultiHeadAttention``): ``__init__`` builds one to say what the worker's copy holds (its
    ``nn.Linear`` layers and plain attributes); ``forward`` gets the constructor's arguments,
    the state and the input. Runs where the key does (a trusted worker: its source is sent
    there as an operation), or here with the kit's reference."""
    cls = getattr(module, name)
    if method == "__init__":
        built = cls(*args, **kwargs)
        return {"linears": {child: {"in": int(layer.in_features), "out": int(layer.out_features),
                                    "bias": layer.bias is not None}
                            for child, layer in built.named_children()
                            if isinstance(layer, torch.nn.Linear)},
                "attributes": {key: value for key, value in vars(built).items()
                               if not key.startswith("_") and key != "training"
                               and type(value) in (int, float, bool)}}
    if method != "forward" or len(args) < 3 or not isinstance(args[2], dict):
        raise AttributeError(f"{method} cannot be called through the proxy")
    init_args, init_kwargs, state, *rest = args
    built = cls(*init_args, **init_kwargs)
    dtype = next(iter(state.values())).dtype if state else np.float32
    built = built.to(dtype=torch.from_numpy(np.zeros(0, dtype)).dtype)
    built.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    tensors = [torch.from_numpy(a) if isinstance(a, np.ndarray) else a for a in rest]
    named = {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v
             for k, v in kwargs.items()}
    with torch.no_grad():
        return plain(built(*tensors, **named), "the module's output")


class AnswerKey:
    """The answer key's functions and operations, called in the grading process with what the
    student's worker is sent, answers converted as the worker converts them.

    The key is trusted, and no worker is ever forked from a grading process (they come from
    the zygote), so running it here puts no answer within a student's reach; it spares every
    submission a worker per exercise.
    """

    def __init__(self, folder: Path, exercise: Exercise):
        self._exercise = exercise
        self._module = _key_module(Path(folder).resolve(), exercise.name)

    def _note(self, name: str, args: tuple, kwargs: dict, reply: Any) -> None:
        """Keep the call for the hints (``Context.calls``), when someone listens."""
        calls = self.__dict__.get("_calls")
        if calls is not None:
            calls.append((name, args, dict(kwargs), reply))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self._exercise.functions:
            function = getattr(self._module, name)

            def call(*args: Any, **kwargs: Any) -> Any:
                args, kwargs = copy.deepcopy((args, kwargs))  # as the worker gets a copy
                return plain(function(*args, **kwargs), f"what {name} returned")
        elif name in self._exercise.operations:
            operation = self._exercise.operations[name]

            def call(*args: Any, **kwargs: Any) -> Any:
                args, kwargs = copy.deepcopy((args, kwargs))
                value = operation(self._module, *args, **kwargs)
                return (value, None) if getattr(operation, "measured", False) else value
        else:
            raise AttributeError(name)
        call.__name__ = name
        return call


def _key_module(folder: Path, exercise: str) -> Any:
    """``folder/<exercise>.py`` as a module of a package of its own (one per key folder), so
    its sibling imports get the key's own files."""
    package = "answer_key_" + hashlib.sha256(str(folder).encode()).hexdigest()[:12]
    if package not in sys.modules:
        root = types.ModuleType(package)
        root.__path__ = [str(folder)]  # type: ignore[attr-defined]
        sys.modules[package] = root
    return importlib.import_module(f"{package}.{exercise}")
