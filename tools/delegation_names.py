"""``make names``: write ``grader/core/delegation_names.py``, the module attributes an exercise's
file may name, from the installed NumPy, torch and Python.

    python -m tools.delegation_names [--check]

A file may import the modules of ``MODULES`` (each one it names in full: ``numpy.linalg``, not
``numpy.lib``) and name of each only the attributes listed for it. Each list is the module's
public attributes (no leading underscore, no module: a submodule is reached as a module of
``MODULES`` or not at all) that one rule below admits, less the families no rule admits:

- names of the families ``delegation.FAMILIES`` refuses on any object (raw memory: storages,
  ``frombuffer``, ``as_strided``, dlpack; files: ``fromfile``, ``from_file``; compiling);
- what a module defines to read or write files and pickles (NumPy's ``npyio``: ``load``,
  ``loadtxt``, ``genfromtxt``, ``fromregex``, ``save*``; torch's ``serialization``);
- what runs code a string or a frame names (``numpy.testing.runstring``, ``measure``,
  ``rundocs``; ``np.bmat``, which looks names up in its caller's frame; ``np.info``), and what
  evaluates annotations as code (``typing.get_type_hints``, ``ForwardRef``,
  ``functools.singledispatch``, whose ``register`` evaluates them) or copies attributes by
  name (``functools.wraps``, ``update_wrapper``; ``dataclasses.make_dataclass``);
- what changes the process rather than an array (torch's settings: threads, default dtype
  and device, determinism, autocast, anomaly mode; printing and NumPy's floating-point error
  settings stay, they change only how a file's own numbers print and warn), or reads the
  install (``np.show_config``, ``np.get_include``, test runners).

Rerun after a new NumPy, torch or Python; ``--check`` (``tests/test_delegation_names.py``)
fails when the file is not what this writes from the versions installed.
"""

from __future__ import annotations

import argparse
import sys
import types
from collections.abc import Callable, Iterable
from pathlib import Path

KIT = Path(__file__).resolve().parent.parent
TARGET = KIT / "grader" / "core" / "delegation_names.py"
WIDTH = 99

# Each module a file may import, what it is for, and the rule its list follows.
PURPOSE = {
    "numpy": "arrays: ufuncs, array functions, dtypes and array types, constants",
    "numpy.linalg": "linear algebra",
    "numpy.random": "random numbers",
    "numpy.testing": "the assertions a file's own checks use",
    "numpy.typing": "annotations",
    "numpy.exceptions": "NumPy's exceptions",
    "torch": "tensors: tensor operations, dtypes and tensor types, gradient modes, random "
             "numbers",
    "torch.nn": "layers and their containers, parameters and buffers",
    "torch.nn.functional": "the functional form of the layers",
    "torch.nn.init": "initialising parameters",
    "torch.linalg": "linear algebra",
    "torch.special": "special functions (expit, logsumexp, softmax)",
    "torch.autograd": "gradients: Function, grad, backward and the gradient modes",
    "torch.testing": "the assertions a file's own checks use",
    "torch.optim": "the optimizers, for a file that trains its own model in a main block",
    "torch.cuda": "what a file asks of the GPU (is_available, the device, its seed)",
    "torch.backends": "only as the way to torch.backends.mps",
    "torch.backends.mps": "whether the Apple GPU is there",
    "math": "every function and constant",
    "itertools": "every iterator",
    "functools": "partial, reduce, caches, total_ordering, cmp_to_key",
    "typing": "annotations",
    "dataclasses": "dataclass, field and their helpers",
    "numbers": "the numeric ABCs",
    "collections": "the containers",
    "collections.abc": "the container ABCs",
    "copy": "copy and deepcopy",
    "abc": "abstract base classes",
    "warnings": "warnings and their filters",
    "__future__": "future statements",
}


def public(module: types.ModuleType, names: Iterable[str] | None = None) -> dict[str, object]:
    """The module's public attributes (``names``, or all without a leading underscore) that
    are not modules."""
    found = {}
    for name in sorted(names if names is not None else dir(module)):
        if name.startswith("_") or not hasattr(module, name):
            continue
        value = getattr(module, name)
        if not isinstance(value, types.ModuleType):
            found[name] = value
    return found


def defined_in(value: object) -> str:
    """The file a Python function (or a NumPy array function) is written in, '' for others."""
    code = getattr(getattr(value, "__wrapped__", value), "__code__", None)
    return code.co_filename.replace("\\", "/") if code is not None else ""


# -- the rules, one per module -------------------------------------------------------------------
def numpy_rule(name: str, value: object) -> bool:
    """Arrays: every ufunc and array function, dtype and array type, constant and index
    helper (``s_``, ``r_``), and the error and print settings, less files (npyio), the
    install's introspection and ``bmat`` (names looked up in its caller's frame)."""
    import numpy as np

    where = defined_in(value)
    if any(part in where for part in ("_npyio_impl", "_utils_impl", "__config__")):
        return False
    if name == "bmat":
        return False
    if isinstance(value, (np.ufunc, type, np.generic, float, int, bool, type(None))):
        return not (isinstance(value, type) and value.__name__ == "PytestTester")
    if type(value).__name__ == "_ArrayFunctionDispatcher":
        return True
    if type(value).__module__.startswith("numpy.lib._index_tricks"):
        return True  # s_, index_exp, r_, c_, mgrid, ogrid
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType)):
        return "numpy/" in where or getattr(value, "__module__", "") == "numpy"
    return False


def numpy_submodule_rule(name: str, value: object) -> bool:
    """Every function and class, no test runner."""
    return callable(value) and type(value).__name__ != "PytestTester"


def numpy_testing_rule(name: str, value: object) -> bool:
    """The ``assert_*`` functions but ``assert_no_gc_cycles``, whose failure shows objects
    from the garbage collector (the grader's among them)."""
    return name.startswith("assert_") and name != "assert_no_gc_cycles"


def torch_rule(name: str, value: object) -> bool:
    """Tensors: every tensor operation (``torch._C._VariableFunctions``, and those written in
    Python: ``torch.functional``, linear algebra, random numbers), every dtype, layout and
    constant, the tensor and its types, the gradient modes and a few questions about them,
    and the print settings."""
    import torch

    if name in dir(torch._C._VariableFunctions):
        return True
    if getattr(value, "__module__", None) in (
            "torch.functional", "torch._linalg_utils", "torch._lobpcg", "torch._lowrank",
            "torch.random", "torch.autograd.grad_mode"):
        return name != "thread_safe_generator"
    if isinstance(value, (torch.dtype, torch.layout, torch.memory_format, torch.qscheme,
                          float, type(None))):
        return True
    if isinstance(value, type) and issubclass(value, BaseException):
        return True
    if type(value).__name__ == "tensortype":  # FloatTensor, LongTensor, ...
        return True
    return name in ("Tensor", "Size", "device", "dtype", "finfo", "iinfo", "layout",
                    "memory_format", "Generator", "is_tensor", "typename",
                    "get_default_dtype", "get_default_device", "is_grad_enabled",
                    "is_inference_mode_enabled", "set_printoptions")


def torch_nn_rule(name: str, value: object) -> bool:
    """Every class: the layers, their containers, ``Parameter`` and ``Buffer``."""
    return isinstance(value, type)


def torch_function_rule(prefix: str, *, exceptions: bool = False) -> Callable[..., bool]:
    def rule(name: str, value: object) -> bool:
        if exceptions and isinstance(value, type) and issubclass(value, BaseException):
            return True
        return (isinstance(value, (types.FunctionType, types.BuiltinFunctionType))
                and getattr(value, "__module__", "").startswith(prefix)
                and "torch_function" not in name and "dispatch" not in name)
    rule.__doc__ = (f"Every function {prefix} defines (no dispatch helper)"
                    + (", and its exceptions." if exceptions else "."))
    return rule


def torch_autograd_rule(name: str, value: object) -> bool:
    """What a backward needs: ``Function``, ``grad``, ``backward``, the gradient checks and
    modes (``Variable`` for older code)."""
    return name in ("Function", "Variable", "backward", "grad", "gradcheck", "gradgradcheck",
                    "no_grad", "enable_grad", "inference_mode", "set_grad_enabled")


def torch_testing_rule(name: str, value: object) -> bool:
    """``assert_close`` and its kin, ``make_tensor``: Python functions, not the JIT's
    FileCheck."""
    return isinstance(value, types.FunctionType)


def torch_optim_rule(name: str, value: object) -> bool:
    """Every optimizer class."""
    return isinstance(value, type)


def torch_device_rule(*questions: str) -> Callable[..., bool]:
    def rule(name: str, value: object) -> bool:
        return name in questions
    rule.__doc__ = (f"Only {', '.join(questions)}: not the allocator, streams by pointer, "
                    "the runtime's bindings or code compiled from strings." if questions else
                    "Nothing of its own: only its submodules of MODULES.")
    return rule


def everything(name: str, value: object) -> bool:
    """Every public name."""
    return True


def stdlib_rule(*refused: str) -> Callable[..., bool]:
    def rule(name: str, value: object) -> bool:
        return name not in refused
    rule.__doc__ = ("Every name it exports" + (f", less {', '.join(refused)}" if refused
                                                 else "") + ".")
    return rule


RULES: dict[str, Callable[[str, object], bool]] = {
    "numpy": numpy_rule,
    "numpy.linalg": numpy_submodule_rule,
    "numpy.random": numpy_submodule_rule,
    "numpy.testing": numpy_testing_rule,
    "numpy.typing": everything,
    "numpy.exceptions": everything,
    "torch": torch_rule,
    "torch.nn": torch_nn_rule,
    "torch.nn.functional": torch_function_rule("torch"),
    "torch.nn.init": torch_function_rule("torch.nn.init"),
    "torch.linalg": torch_function_rule("torch", exceptions=True),
    "torch.special": torch_function_rule("torch"),
    "torch.autograd": torch_autograd_rule,
    "torch.testing": torch_testing_rule,
    "torch.optim": torch_optim_rule,
    "torch.cuda": torch_device_rule("is_available", "device_count", "current_device",
                                    "get_device_name", "get_device_capability",
                                    "is_bf16_supported", "manual_seed", "manual_seed_all",
                                    "synchronize"),
    "torch.backends": torch_device_rule(),
    "torch.backends.mps": torch_device_rule("is_available", "is_built"),
    "math": everything,
    "itertools": everything,
    # copies attributes named by strings; evaluates annotations (register) as code
    "functools": stdlib_rule("wraps", "update_wrapper", "WRAPPER_ASSIGNMENTS",
                             "WRAPPER_UPDATES", "singledispatch", "singledispatchmethod"),
    "typing": stdlib_rule("get_type_hints", "ForwardRef"),  # evaluate strings as code
    "dataclasses": stdlib_rule("make_dataclass"),  # builds a class from strings
    "numbers": everything,
    "collections": everything,
    "collections.abc": everything,
    "copy": everything,
    "abc": everything,
    "warnings": stdlib_rule("warn_explicit", "showwarning", "formatwarning"),  # read source
    "__future__": everything,
}
assert set(RULES) == set(PURPOSE)


def names(module_name: str) -> list[str]:
    """The attributes of ``module_name`` a file may name."""
    import importlib

    from grader.core.delegation import FAMILIES

    module = importlib.import_module(module_name)
    exported = getattr(module, "__all__", None) if not module_name.startswith(
        ("numpy", "torch")) else None
    rule = RULES[module_name]
    return [name for name, value in public(module, exported).items()
            if rule(name, value) and not FAMILIES.search(name)]


def versions() -> dict[str, str]:
    import numpy
    import torch

    return {"python": ".".join(map(str, sys.version_info[:2])), "numpy": numpy.__version__,
            "torch": torch.__version__}


def wrapped(words: list[str], indent: str) -> list[str]:
    lines, line = [], indent
    for word in words:
        if len(line) + len(word) > WIDTH and line.strip():
            lines.append(line.rstrip())
            line = indent
        line += word + " "
    if line.strip():
        lines.append(line.rstrip())
    return lines


def render() -> str:
    found = versions()
    out = [
        '"""What an exercise\'s file may name in each module it may import (a submodule only',
        "where it is a module of ``MODULES``), as ``grader.core.delegation`` reads it.",
        "",
        f"Written by ``python -m tools.delegation_names`` (make names) from Python "
        f"{found['python']},",
        f"NumPy {found['numpy']} and torch {found['torch']}, by the rules in its docstring; "
        "edit those, not this.",
        '"""',
        "",
        "VERSIONS = {" + ", ".join(f'"{k}": "{v}"' for k, v in found.items()) + "}",
        "",
        "# module -> the attributes a file may name",
        "NAMES: dict[str, frozenset[str]] = {",
    ]
    for module_name in PURPOSE:
        out.append(f"    # {module_name}: {PURPOSE[module_name]}")
        listed = names(module_name)
        if not listed:
            out.append(f'    "{module_name}": frozenset(),')
            continue
        out.append(f'    "{module_name}": frozenset("""')
        out += wrapped(listed, "        ")
        out.append('    """.split()),')
    out += ["}", "MODULES = frozenset(NAMES)", ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when the file is not what would be written")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if TARGET.read_text() != text:
            print(f"{TARGET.relative_to(KIT)} is stale: run make names", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
