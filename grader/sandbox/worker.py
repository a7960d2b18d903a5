"""The worker: the only process that runs a submission's code.

It loads one exercise of one submission, then answers requests from the grading process
(``grader.sandbox.isolation``): call a function with these arrays, or run one of the
exercise's *operations* (build this module, run this forward/backward pass). Whatever the
student's code returns is converted here to plain arrays, numbers and strings before it is
sent; the grading process decides everything else.

The worker holds no implementation of any exercise. When the file imports another exercise
it may use (``from .softmax import softmax`` in ``attention.py``), it gets a *proxy*: a
function (or, for a torch module, a class) that sends its arguments to the grading process
as arrays, over the same socket and in the middle of the request being answered; the grading
process runs the answer key (or the kit's reference) and sends the result back. No line of
the key or of a reference is ever in a worker's memory, files or messages.

The worker knows nothing of the exercises: the ``load`` request brings the functions the file
must define, the names the proxies export and the source of the exercise's operations, which
run with the worker's helpers in scope (``grader.sandbox.operation_helpers``, split from this
module: ``plain``, ``BadReturn``, ``seed_cpu``, ``linears``, ``load_state``,
``run_backward``). Before the student's file is imported, the worker arms the audit hook
(``grader.sandbox.audit``): from then on, compiling a string, opening a file, an import outside
the exercise's list, native code, a process or a socket ends it. This module imports only the
standard library, NumPy, torch (lazily: a NumPy exercise's worker has none), ``protocol``,
``operation_helpers`` and ``audit``: the zygote runs it from source.
"""

from __future__ import annotations

import dis
import importlib
import importlib.util
import os
import socket
import sys
import traceback
import types
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from . import audit, protocol
from .operation_helpers import (
    ANOMALY_ADVICE,
    BadReturn,
    linears,
    load_state,
    plain,
    run_backward,
    seed_cpu,
)

# What an operation's source may use without importing it; torch only in a torch exercise's
# worker (a NumPy exercise's has none: its zygote never imported it, and its root does not
# hold it).
PRELUDE = "import math\nimport numbers\n\nimport numpy as np\n"
TORCH_PRELUDE = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"
# The exceptions a proxy raises as themselves (the key's ValueError is the student's
# ValueError); any other becomes a RuntimeError carrying its message.
BUILTIN_ERRORS = {e.__name__: e for e in (
    ValueError, TypeError, IndexError, KeyError, ZeroDivisionError, ArithmeticError,
    OverflowError, FloatingPointError, AssertionError, NotImplementedError, RuntimeError,
    AttributeError, LookupError)}


class Fatal(BaseException):
    """Ends the worker: the exercise cannot be graded further."""


# -- proxies: another exercise's functions, run by the grading process ---------------------------
def to_wire(value: Any, what: str) -> tuple[Any, str | None]:
    """``value`` as the protocol carries it (tensors as arrays), and the device of the first
    tensor in it (None when there is none: the answer then stays NumPy)."""
    if type(value).__module__.startswith("torch") and hasattr(value, "detach"):
        return value.detach().cpu().numpy(), str(value.device)
    if isinstance(value, (tuple, list)):
        parts = [to_wire(x, what) for x in value]
        device = next((d for _, d in parts if d is not None), None)
        return type(value)(p for p, _ in parts), device
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        parts = {k: to_wire(v, what) for k, v in value.items()}
        device = next((d for _, d in parts.values() if d is not None), None)
        return {k: p for k, (p, _) in parts.items()}, device
    if isinstance(value, np.ndarray) and value.dtype.name in protocol.DTYPES:
        return value, None
    if isinstance(value, np.generic) or value is None or type(value) in (bool, int, float, str):
        return value, None
    raise TypeError(f"{what} takes arrays and numbers, not a {type(value).__name__}")


def from_wire(value: Any, device: str | None) -> Any:
    if device is None:
        return value
    import torch

    if isinstance(value, np.ndarray):
        return torch.from_numpy(value).to(device)
    if isinstance(value, (tuple, list)):
        return type(value)(from_wire(x, device) for x in value)
    return value


class Asker:
    """Sends a proxy's call to the grading process, during the request being answered."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.request: Any = None  # the id of the request in progress

    def __call__(self, exercise: str, function: str, args: tuple, kwargs: dict) -> Any:
        what = f"{exercise}.{function}"
        if self.request is None:
            raise RuntimeError(f"{what} can only be called while the grader calls your code")
        (args, kwargs), device = to_wire((tuple(args), dict(kwargs)), what)
        protocol.send(self.sock, {"ask": exercise, "function": function, "args": list(args),
                                  "kwargs": kwargs, "id": self.request})
        reply = protocol.recv(self.sock)
        if not isinstance(reply, dict):
            raise Fatal("the grading process sent no answer")
        if reply.get("ok") is True:
            return from_wire(reply.get("value"), device)
        error = reply.get("error") or {}
        kind = BUILTIN_ERRORS.get(str(error.get("type")), RuntimeError)
        raise kind(str(error.get("message", "")))


def proxy_function(ask: Asker, exercise: str, name: str) -> Any:
    def proxy(*args: Any, **kwargs: Any) -> Any:
        return ask(exercise, name, args, kwargs)

    proxy.__name__ = proxy.__qualname__ = name
    proxy.__doc__ = f"{exercise}.{name}, computed by the grader (the answer key's)."
    return proxy


def proxy_module_class(ask: Asker, exercise: str, name: str) -> Any:
    """A torch module class whose construction and forward run in the grading process: it
    holds the same ``nn.Linear`` layers and plain attributes as the key's module, and sends
    them with the input (outputs come back without autograd history)."""
    import torch
    from torch import nn

    class Proxy(nn.Module):
        def __init__(self, *args: Any, **kwargs: Any):
            super().__init__()
            self.init = (args, kwargs)
            built = ask(exercise, f"{name}.__init__", args, kwargs)
            for child, spec in built["linears"].items():
                setattr(self, child, nn.Linear(spec["in"], spec["out"], bias=spec["bias"]))
            for attribute, value in built["attributes"].items():
                setattr(self, attribute, value)

        def forward(self, *args: Any, **kwargs: Any) -> Any:
            state = {k: v.detach() for k, v in self.state_dict().items()}
            with torch.no_grad():
                return ask(exercise, f"{name}.forward",
                           (self.init[0], self.init[1], state, *args), kwargs)

    Proxy.__name__ = Proxy.__qualname__ = name
    return Proxy


def proxy_module(ask: Asker, package: str, exercise: str,
                 exports: dict[str, str]) -> types.ModuleType:
    """The module ``package.exercise`` as a file that imports it sees: ``exports`` maps each
    name to ``"function"`` or ``"module"`` (a torch module class)."""
    module = types.ModuleType(f"{package}.{exercise}")
    module.__package__ = package
    for export, kind in exports.items():
        make = proxy_module_class if kind == "module" else proxy_function
        setattr(module, export, make(ask, exercise, export))
    return module


# -- one session --------------------------------------------------------------------------------
class Session:
    def __init__(self, config: dict[str, Any], ask: Asker, audited: bool = True):
        self.folder = Path(config["folder"])
        self.audited = audited  # the student's file loads under the audit hook
        self.exercise = config["exercise"]
        self.package = config["package"]
        self.module: Any = None
        self.functions: tuple[str, ...] = ()
        self.ops: dict[str, Any] = {}
        self.ask = ask

    # -- requests ---------------------------------------------------------------------------
    def load(self, functions: list[str], siblings: dict[str, dict[str, str]],
             ops: dict[str, str], framework: str = "torch",
             imports: list[str] | None = None, audited: bool = True) -> dict[str, Any]:
        self.functions = tuple(functions)
        root = package_module(self.folder, self.package)
        for name, exports in siblings.items():
            if name != self.exercise:
                module = proxy_module(self.ask, self.package, name, exports)
                sys.modules[module.__name__] = module
                setattr(root, name, module)
                sys.modules.setdefault(name, module)  # a bare `import softmax` gets the same
        helpers = {"plain": plain, "BadReturn": BadReturn, "seed_cpu": seed_cpu,
                   "linears": linears, "load_state": load_state, "run_backward": run_backward}
        prelude = PRELUDE + (TORCH_PRELUDE if framework == "torch" else "")
        for op, source in ops.items():
            namespace = dict(helpers)
            exec(compile(prelude + source, f"<operation {op}>", "exec"), namespace)
            self.ops[op] = namespace[op]
        if self.audited and audited:  # from here on, what the rule refuses ends the worker
            audit.arm(str(self.folder), self.package, imports or (),
                      readers=(_last_instruction.__code__,))
        self.module = load_exercise(self.folder, self.exercise, root)
        return {"missing": [f for f in self.functions if not hasattr(self.module, f)]}

    def call(self, func: str, args: list, kwargs: dict) -> Any:
        if func not in self.functions:
            raise Fatal(f"no such function {func!r}")
        return plain(getattr(self.module, func)(*args, **kwargs), f"what {func} returned")

    def operation(self, name: str, kwargs: dict[str, Any]) -> Any:
        if name not in self.ops:
            raise Fatal(f"unknown request {name!r}")
        return self.ops[name](self.module, **kwargs)


def package_module(folder: Path, package: str) -> types.ModuleType:
    """The package the submission's files load into, named by the kit.

    A submission folder may be called anything (``jane.doe@uni``) and may or may not hold an
    ``__init__.py``; that file is never executed, so one broken file cannot break another
    exercise. A sibling import without a proxy (``from .heads import split_heads`` in
    ``mha.py``) loads the student's own file from the folder, where the grader left it.
    """
    root = types.ModuleType(package)
    root.__path__ = [str(folder)]  # type: ignore[attr-defined]
    root.__package__ = package
    sys.modules[package] = root
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))  # the submission's own helper modules, if any
    return root


def load_exercise(folder: Path, exercise: str, root: types.ModuleType) -> types.ModuleType:
    """Load ``folder/<exercise>.py`` as ``<package>.<exercise>``."""
    package = root.__name__
    spec = importlib.util.spec_from_file_location(f"{package}.{exercise}",
                                                  folder / f"{exercise}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    setattr(root, exercise, module)
    return module


def _raised_by(error: BaseException, path: Path) -> bool:
    """``error`` comes from a ``raise`` statement in the file ``path`` (a stub's own), not from
    a call that failed inside a library: torch's C++ code raises NotImplementedError too
    ("max_values_cpu" not implemented for 'ComplexDouble'), with the caller's frame last."""
    last = _last_instruction(error.__traceback__)
    if last is None:
        return False
    filename, raised = last
    return raised and Path(filename).resolve() == path.resolve()


def _last_instruction(tb: types.TracebackType | None) -> tuple[str, bool] | None:
    """The file of the last frame of ``tb`` and whether its last instruction raises; the one
    place the worker reads a frame itself (the audit hook admits it here, and it returns no
    frame)."""
    if type(tb) is not types.TracebackType:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    code, at = tb.tb_frame.f_code, tb.tb_lasti
    raised = code.co_code[at] == dis.opmap["RAISE_VARARGS"] and code.co_code[at + 1] > 0
    return code.co_filename, raised


def _in_folder(filename: str, folder: Path) -> bool:
    """A real file of the submission (not ``<operation mha_forward>``, which would resolve
    against the working directory)."""
    try:
        return (not filename.startswith("<")
                and Path(filename).resolve().is_relative_to(folder.resolve()))
    except (OSError, ValueError):
        return False


def _describe(error: BaseException, folder: Path, exercise: str) -> dict[str, Any]:
    frames = [(f.filename, f.lineno, f.name, f.line or "")
              for f in traceback.extract_tb(error.__traceback__)]
    own = [f for f in frames if _in_folder(f[0], folder)]
    forward = getattr(error, "forward_frames", None)
    backward = not own and isinstance(forward, list)
    if backward:  # raised in autograd's engine: the forward line whose gradient failed
        own = [f for f in forward if isinstance(f, tuple) and len(f) == 4
               and _in_folder(str(f[0]), folder)]
    where = [f"{Path(file).name} line {line}, in {name}: {str(code).strip()}"
             for file, line, name, code in own]
    message = str(error)
    if isinstance(forward, list):  # the kit ran the anomaly mode that torch's advice asks for
        message = ANOMALY_ADVICE.sub("", message)
    return {
        "type": type(error).__name__,
        "message": message[:1000],
        "value_error": isinstance(error, ValueError),
        "not_implemented": isinstance(error, NotImplementedError)
                           and _raised_by(error, folder / f"{exercise}.py"),
        "bad_return": isinstance(error, BadReturn),
        "where": where[-3:],
        "backward": backward and bool(where),
    }


def serve(sock: socket.socket, config: dict[str, Any], audited: bool = True) -> None:
    """Answer requests until told to exit or the grading process goes away. Every reply echoes
    its request's ``id``; a proxy's question in between carries it too. ``audited``: the
    student's file loads under the audit hook (``audit.arm``; the answer key's trusted worker
    does without)."""
    # A forked worker inherits the grading process's warning filters (pytest turns warnings
    # into errors). Clear them: a student's warning is printed to the worker's output, never
    # raised, whoever started the grading.
    warnings.resetwarnings()
    ask = Asker(sock)
    session = Session(config, ask, audited)
    while True:
        try:
            request = protocol.recv(sock)
        except (EOFError, OSError, protocol.ProtocolError):
            return
        if not isinstance(request, dict):
            return
        op, number = request.get("op"), request.get("id")
        kwargs = request.get("kwargs") or {}

        def reply(message: dict[str, Any], number: Any = number) -> None:
            protocol.send(sock, {**message, "id": number})

        if op in ("exit", "hello"):
            reply({"ok": True, "value": None})
            if op == "exit":
                return
            continue
        if op == "batch":  # one pass: each call answered in turn, its reply a frame of its own
            calls = kwargs.get("calls")
            for part, call in enumerate(calls if isinstance(calls, list) else []):
                if (not isinstance(call, dict) or call.get("op") in ONE_AT_A_TIME
                        or not isinstance(call.get("kwargs"), dict)):
                    reply({"fatal": "the grading process sent a malformed batch"}, number)
                    return
                _warn_afresh()  # each call prints its warnings (``passes.Printed`` keeps one)
                message = _answer(session, ask, str(call.get("op")), call["kwargs"], number)
                # What this call printed is in the capture before its reply, and the reply says
                # where it ends (the grading process reads the next call's output apart).
                if not _replied(reply, message, [number, part, _flushed()]):
                    return
            _warn_afresh()  # so does each call asked alone after the pass
            continue
        message = _answer(session, ask, str(op), kwargs, number)
        if not _replied(reply, message, number):
            return


# What a batch may not hold: the requests that start, end or nest a worker's answers.
ONE_AT_A_TIME = frozenset({"load", "exit", "hello", "batch"})


def _answer(session: Session, ask: Asker, op: str, kwargs: dict[str, Any],
            number: Any) -> dict[str, Any]:
    """The reply to one request (a ``fatal`` one ends the worker once it is sent)."""
    ask.request = number
    try:
        if op == "load":
            value = session.load(**kwargs)
        elif op == "call":
            value = session.call(**kwargs)
        else:
            value = session.operation(op, kwargs)
        return {"ok": True, "value": value}
    except Fatal as error:
        return {"fatal": str(error)}
    except SystemExit as error:
        return {"fatal": f"the code called sys.exit({error.code!r})"}
    except KeyboardInterrupt:
        return {"fatal": "the code raised KeyboardInterrupt"}
    except MemoryError:
        return {"fatal": "the code ran out of memory (MemoryError)"}
    except BaseException as error:  # the student's exception, reported as data
        return {"ok": False, "error": _describe(error, session.folder, session.exercise)}
    finally:
        ask.request = None


def _warn_afresh() -> None:
    """Forget which warnings were printed (every module's registry is out of date once the
    filters' version moves), so the next call prints each warning it raises: which of a pass's
    calls a check reads is known only in the grading process, which keeps the first of each
    (``passes.Printed``), as Python's default action would have, asked call by call."""
    mutated = getattr(warnings, "_filters_mutated", None)
    if mutated is not None:
        mutated()


def _flushed() -> int:
    """Flush what the code printed (``sys.stdout`` may be the code's own: its failure here is
    no one's but the code's, and is not a reply); the capture's size then (-1: unknown)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001, S110
            pass
    try:
        return os.fstat(2).st_size
    except OSError:
        return -1


def _replied(reply: Any, message: dict[str, Any], number: Any) -> bool:
    """Send ``message`` as the reply ``number``; False when the worker must end (a fatal one)."""
    try:
        reply(message, number)
    except protocol.ProtocolError as error:
        reply({"ok": False, "error": {
            "type": "BadReturn", "message": str(error), "value_error": False,
            "not_implemented": False, "bad_return": True, "where": []}}, number)
    return "fatal" not in message
