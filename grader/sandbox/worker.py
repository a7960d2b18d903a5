"""The worker: the only process that runs a submission's code.

It loads one exercise of one submission, then answers requests from the grading process
(``grader.sandbox.isolation``): call a function with these arrays, or run one of the
exercise's *operations* (build this module, run this forward/backward pass). Whatever the
student's code returns is converted here to plain arrays, numbers and strings before it is
sent; the grading process decides everything else.

The worker knows nothing of the exercises. The ``load`` request brings all it needs as data:
the functions the file must define, the source of the stand-ins for the *other* exercises a
file may import (``from .softmax import softmax``), the source of the exercise's operations
and its library-delegation rule, enforced here by ``Guard``. This module imports only the
standard library, NumPy, torch (lazily) and ``protocol``: the zygote runs it from source.
"""

from __future__ import annotations

import builtins
import contextlib
import dis
import importlib
import importlib.util
import socket
import sys
import traceback
import types
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from . import protocol

# What a reference stand-in's or an operation's source may use without importing it; torch
# only for a torch exercise (a NumPy exercise's worker has none: see ``forget_torch``).
PRELUDE = "import math\nimport numbers\n\nimport numpy as np\n"
TORCH_PRELUDE = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"
TORCH_PACKAGES = ("torch", "functorch", "torchgen", "triton")


def forget_torch() -> None:
    """Make torch unimportable in this worker (``import torch`` then fails): a NumPy exercise,
    whose stand-ins are the answer key's NumPy modules, has nothing to use it for."""
    for name in list(sys.modules):
        if name.split(".")[0] in TORCH_PACKAGES:
            sys.modules[name] = None  # type: ignore[assignment]


class BadReturn(Exception):
    """The student's code returned something that is not an array (or tuple of them)."""


class Fatal(BaseException):
    """Ends the worker: the exercise cannot be graded further."""


class Forbidden(BaseException):
    """The student's code used what its exercise's rule forbids (a BaseException, so that
    ``except Exception`` in the student's code does not swallow it; the guard also records it,
    so swallowing it with ``except BaseException`` gains nothing)."""


def code_objects(code: Any) -> set[Any]:
    """``code`` and every code object nested in it (functions, classes, comprehensions)."""
    found = {code}
    for const in code.co_consts:
        if hasattr(const, "co_consts"):
            found |= code_objects(const)
    return found


class Guard:
    """The library-delegation rule at run time (the grading process checks the source too).

    A use counts as the student's when the nearest frame on the stack that is either the
    student's (a file in the submission) or the kit's (a stand-in or an operation, known by
    its code objects, not its file name) is the student's: the kit's stand-ins may use torch
    on a NumPy exercise's behalf, the student's code may not.
    """

    def __init__(self, rule: dict[str, Any] | None, folder: Path):
        self.rule = rule or {}
        self.folder = str(folder.resolve()) + "/"
        self.kit_codes: set[Any] = set()
        self.violation: str | None = None
        self.mode: Any = None

    def student_frame(self, frame: Any) -> Any:
        while frame is not None:
            if frame.f_code in self.kit_codes:
                return None
            if frame.f_code.co_filename.startswith(self.folder):
                return frame
            frame = frame.f_back
        return None

    def flag(self, what: str, frame: Any) -> None:
        where = f"{Path(frame.f_code.co_filename).name} line {frame.f_lineno}"
        if self.violation is None:
            self.violation = (f"it uses {what} (at {where}), and "
                              f"{self.rule.get('why', 'the exercise forbids it')}")
        raise Forbidden(self.violation)

    def install(self) -> None:
        if not self.rule:
            return
        modules = tuple(self.rule.get("modules", ()))
        original_import, original_import_module = builtins.__import__, importlib.import_module

        def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
            if level == 0 and name.split(".")[0] in modules and str(
                    (globals or {}).get("__file__", "")).startswith(self.folder):
                self.flag(f"import {name}", sys._getframe(1))
            return original_import(name, globals, locals, fromlist, level)

        def guarded_import_module(name, package=None):
            frame = self.student_frame(sys._getframe(1))
            if frame is not None and name.split(".")[0] in modules:
                self.flag(f"import {name}", frame)
            return original_import_module(name, package)

        builtins.__import__ = guarded_import
        importlib.import_module = guarded_import_module
        self.imports = guarded_import
        if sys.modules.get("torch") is None:
            return  # forgotten: nothing of torch to watch
        import torch.overrides

        guard = self
        calls = tuple(c.lower() for c in self.rule.get("calls", ()))
        any_torch = "torch" in modules

        class Mode(torch.overrides.TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                name = getattr(func, "__name__", str(func))
                if any_torch or any(c in name.lower() for c in calls):
                    frame = guard.student_frame(sys._getframe(1))
                    if frame is not None:
                        guard.flag(f"torch's {name}", frame)
                return func(*args, **(kwargs or {}))

        self.mode = Mode()

    @contextlib.contextmanager
    def watching(self):
        """While the student's code runs: torch calls pass by the guard."""
        if self.mode is None:
            yield
            return
        with self.mode:
            yield
            if builtins.__import__ is not self.imports:
                self.violation = self.violation or (
                    "it replaced the grader's import hook (builtins.__import__)")


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


def load_state(module: Any, state: dict[str, np.ndarray]) -> None:
    """Copy ``{"wq.weight": array, ...}`` into the module's parameters, shapes checked."""
    import torch

    with torch.no_grad():
        for key, value in state.items():
            layer_name, param_name = key.split(".")
            target = getattr(getattr(module, layer_name, None), param_name, None)
            if target is None or tuple(target.shape) != value.shape:
                raise BadReturn(f"{key} is missing or has another shape than {value.shape}")
            target.copy_(torch.from_numpy(value))


def sibling(name: str, module: types.ModuleType) -> types.ModuleType:
    """Another exercise's module beside ``module`` (the answer key's own, where it runs in the
    grading process). In a worker, operations get the session's: its stand-in, if any."""
    return importlib.import_module(f"{module.__package__}.{name}")


def stand_in(name: str, package: str, spec: dict[str, Any]) -> tuple[types.ModuleType, set[Any]]:
    """A module that exposes only the ``exports`` of ``spec``: the answer key's module
    (``kind`` "key"), or the kit's torch reference run after the preludes; and the code objects
    that ran it. It may import the stand-ins loaded before it (``from .softmax import ...``)."""
    namespace: dict[str, Any] = {"__name__": f"{package}.{name}", "__package__": package}
    source = spec["source"] if spec["kind"] == "key" else (
        PRELUDE + TORCH_PRELUDE + spec["source"])
    code = compile(source, f"<stand-in for {name}>", "exec")
    exec(code, namespace)
    module = types.ModuleType(f"{package}.{name}")
    module.__package__ = package
    for export in spec["exports"]:
        setattr(module, export, namespace[export])
    return module, code_objects(code)


class Session:
    def __init__(self, config: dict[str, Any]):
        self.folder = Path(config["folder"])
        self.exercise = config["exercise"]
        self.package = config["package"]
        self.module: Any = None
        self.functions: tuple[str, ...] = ()
        self.siblings: dict[str, types.ModuleType] = {}
        self.ops: dict[str, Any] = {}
        self.guard = Guard(None, self.folder)

    # -- requests ---------------------------------------------------------------------------
    def load(self, functions: list[str], stand_ins: dict[str, dict[str, Any]],
             ops: dict[str, str], framework: str = "torch",
             rule: dict[str, Any] | None = None) -> dict[str, Any]:
        self.functions = tuple(functions)
        self.guard = Guard(rule, self.folder)
        root = package_module(self.folder, self.package)
        self.siblings = {}
        for name, spec in stand_ins.items():
            if name != self.exercise:
                module, codes = stand_in(name, self.package, spec)
                self.siblings[name] = module
                sys.modules[module.__name__] = module
                setattr(root, name, module)
                sys.modules.setdefault(name, module)  # a bare `import softmax` gets the same
                self.guard.kit_codes |= codes
        helpers = {"plain": plain, "BadReturn": BadReturn, "seed_cpu": seed_cpu,
                   "linears": linears, "load_state": load_state, "sibling": self.sibling}
        prelude = PRELUDE + (TORCH_PRELUDE if framework == "torch" else "")
        for op, source in ops.items():
            namespace = dict(helpers)
            code = compile(prelude + source, f"<operation {op}>", "exec")
            self.guard.kit_codes |= code_objects(code)
            exec(code, namespace)
            self.ops[op] = namespace[op]
        if rule is not None and framework == "numpy" and all(
                spec["kind"] == "key" for spec in stand_ins.values()):
            forget_torch()
        self.guard.install()
        with self.guard.watching():
            self.module = load_exercise(self.folder, self.exercise, root)
        return {"missing": [f for f in self.functions if not hasattr(self.module, f)]}

    def sibling(self, name: str, module: types.ModuleType | None = None) -> types.ModuleType:
        """Another exercise's module: its stand-in, or else the submission's own file."""
        if name in self.siblings:
            return self.siblings[name]
        return importlib.import_module(f"{self.package}.{name}")

    def call(self, func: str, args: list, kwargs: dict) -> Any:
        if func not in self.functions:
            raise Fatal(f"no such function {func!r}")
        with self.guard.watching():
            return plain(getattr(self.module, func)(*args, **kwargs), f"what {func} returned")

    def operation(self, name: str, kwargs: dict[str, Any]) -> Any:
        if name not in self.ops:
            raise Fatal(f"unknown request {name!r}")
        with self.guard.watching():
            return self.ops[name](self.module, **kwargs)


def package_module(folder: Path, package: str) -> types.ModuleType:
    """The package the submission's files load into, named by the kit.

    A submission folder may be called anything (``jane.doe@uni``) and may or may not hold an
    ``__init__.py``; that file is never executed, so one broken file cannot break another
    exercise. A sibling import without a stand-in (``from .heads import split_heads`` in
    ``mha.py``) loads the student's own file from the folder.
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
    tb = error.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    code, at = tb.tb_frame.f_code, tb.tb_lasti
    raised = code.co_code[at] == dis.opmap["RAISE_VARARGS"] and code.co_code[at + 1] > 0
    return raised and Path(code.co_filename).resolve() == path.resolve()


def _describe(error: BaseException, folder: Path, exercise: str) -> dict[str, Any]:
    frames = [
        f"{Path(f.filename).name} line {f.lineno}, in {f.name}: {(f.line or '').strip()}"
        for f in traceback.extract_tb(error.__traceback__)
        if Path(f.filename).resolve().is_relative_to(folder.resolve())
    ]
    return {
        "type": type(error).__name__,
        "message": str(error)[:1000],
        "value_error": isinstance(error, ValueError),
        "not_implemented": isinstance(error, NotImplementedError)
                           and _raised_by(error, folder / f"{exercise}.py"),
        "bad_return": isinstance(error, BadReturn),
        "where": frames[-3:],
    }


def serve(sock: socket.socket, config: dict[str, Any]) -> None:
    """Answer requests until told to exit or the grading process goes away. Every reply echoes
    its request's ``id``."""
    # A forked worker inherits the grading process's warning filters (pytest turns warnings
    # into errors). Clear them: a student's warning is printed to the worker's output, never
    # raised, whoever started the grading.
    warnings.resetwarnings()
    session = Session(config)
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

        if op == "exit":
            reply({"ok": True, "value": None})
            return
        try:
            if op == "load":
                value = session.load(**kwargs)
            elif op == "call":
                value = session.call(**kwargs)
            else:
                value = session.operation(str(op), kwargs)
            message: dict[str, Any] = {"ok": True, "value": value}
        except Fatal as error:
            reply({"fatal": str(error)})
            return
        except Forbidden:
            message = {}  # recorded by the guard: said below, whatever the code did with it
        except SystemExit as error:
            reply({"fatal": f"the code called sys.exit({error.code!r})"})
            return
        except KeyboardInterrupt:
            reply({"fatal": "the code raised KeyboardInterrupt"})
            return
        except MemoryError:
            reply({"fatal": "the code ran out of memory (MemoryError)"})
            return
        except BaseException as error:  # the student's exception, reported as data
            message = {"ok": False,
                       "error": _describe(error, session.folder, session.exercise)}
        if session.guard.violation is not None:
            reply({"fatal": session.guard.violation})
            return
        try:
            reply(message)
        except protocol.ProtocolError as error:
            reply({"ok": False, "error": {
                "type": "BadReturn", "message": str(error), "value_error": False,
                "not_implemented": False, "bad_return": True, "where": []}})
