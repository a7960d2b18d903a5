"""Torch's own attention, taken out of a worker at the dispatcher.

The torch exercises (a multi-head attention module, grouped-query attention, KV-cache
decoding) forbid delegating to torch's attention. A ``TorchFunctionMode`` cannot enforce
that: the student's code switches it off with ``torch._C.DisableTorchFunction()``, or calls
``torch.ops.aten...`` directly, below it. So ``block_attention`` is called once in the worker
(or in the zygote before it forks: a registration is process memory and a forked child keeps
it), before the student's file loads, and does two things.

**At the dispatcher.** Every ``aten`` operator that computes attention (every one whose name
contains ``scaled_dot_product``, ``multi_head_attention``, ``_transformer_``,
``flash_attention``, ``efficient_attention``, ``cudnn_attention``, ``scaled_dot_attention``
or ``_fused_sdp_choice``, all overloads, forward and backward: ``forbidden_attention_names``)
gets a kernel of ours for every dispatch key that can reach an implementation: every key the
operator has a registration for (``CPU``, ``CUDA`` where built, ``Meta``, ``NestedTensorCPU``,
``AutocastCPU``/``AutocastCUDA``..., ``Tracer``, ``FuncTorchBatched``, ``FuncTorchVmapMode``,
``Functionalize``, ``ADInplaceOrView``) and the alias keys ``CompositeImplicitAutograd``
(where the operator has one: it is how ``scaled_dot_product_attention`` and
``_scaled_dot_product_attention_math`` decompose), ``FuncTorchBatchedDecomposition`` (idem,
under ``vmap``), ``CompositeExplicitAutograd`` and ``Autograd`` (always), which fill every other
backend and autograd slot. Each slot then runs our kernel, which writes one line,
``forbidden aten::NAME\\n``, to the report descriptor and ends the process with
``os._exit(exit_code)``: no exception, so nothing in the student's code can catch it, and no
thread survives it. A dispatch key the student switches off (``DisableTorchFunction``,
``inference_mode``, ``_AutoDispatchBelowAutograd``, excluded keys, ``redispatch``,
``OpOverload.decompose``) only moves the call to another slot that is ours too. The original
kernels stay in the dispatcher's list under ours (a registration shadows, it does not
replace), and no Python API calls a shadowed kernel.

The registrations belong to a ``torch._C._dispatch_library`` handle (what a
``torch.library.Library`` holds as ``.m``): dropping the handle, or ``handle.reset()``, would
restore torch's kernels. We keep no Python reference to it: one leaked reference count
(``Py_IncRef``) keeps it alive, and a pybind object is not tracked by the garbage collector,
so ``gc.get_objects()`` does not list it and nothing refers to it. No ``torch.library.Library``
is made, so ``torch.library._impls`` is unchanged. Registration warnings ("Overriding a
previously registered kernel") are suppressed: the worker's stderr stays silent.

**In Python.** Torch also composes attention from ordinary operators in Python, which no
dispatcher kernel sees: ``F.multi_head_attention_forward`` (``need_weights=True``: baddbmm,
softmax, bmm), ``nn.MultiheadAttention`` and ``nn.Transformer``, ``TransformerEncoder(Layer)``,
``TransformerDecoder(Layer)``, the quantizable ``torch.ao.nn.quantizable.MultiheadAttention``
(and every other subclass of these classes), and flex attention's eager implementation
(``torch._higher_order_ops.flex_attention``: ``math_attention``, ``sdpa_dense``...). Each is
replaced, wherever the process refers to it (module dictionaries such as ``torch.nn``,
``torch.nn.modules``, ``torch.nn.modules.transformer``, ``torch.ao.nn.quantizable``; mapping
tables such as torch.ao's quantization mappings; flex attention's ``py_kernels``; closure
cells; lists and sets), by a stand-in that reports and exits the same way when called or
instantiated (a stand-in class may be subclassed; making an instance exits). Then the
collector frees the originals: afterwards no function object of torch's attention code and
no original class survives, so ``gc.get_objects()``, ``nn.Module.__subclasses__()``,
``torch.nn.functional.__dict__``, ``sys.modules`` and other functions' ``__globals__`` find
only the stand-ins. ``block_attention`` checks this, and checks that every non-fallback slot
of every operator above is ours, and raises ``RuntimeError`` otherwise.

**Limits.** (1) ``importlib.reload(torch.nn.functional)`` (or of
``torch.nn.modules.activation``...) executes torch's source again and makes new originals;
so does reading torch's source files and executing them, or copying torch's Python code into
the submission. The kit's source rule forbids ``importlib``, ``sys``, ``gc``, ``ctypes``,
``torch.library``, ``torch._C`` and file access separately; this module does not stop them.
(2) ``ctypes`` (or any native code) can do anything, including finding the handle in memory.
(3) A Python module not yet imported when ``block_attention`` runs is not touched; this
function imports the ones it replaces entry points in, so a later import finds the stand-ins,
but any other Python module of torch that composes attention from ordinary operators and is
imported later keeps its code. (4) The stand-ins and kernels are Python functions the student
could find with ``gc`` and rewrite (``__code__``): that silences the report, but buys nothing,
because the original kernels and functions are gone or shadowed. Registering a new kernel for
the same operator (``torch.library.Library("aten", "IMPL").impl(...)``) is allowed by torch and
shadows ours; it likewise cannot reach torch's kernel. (5) Python output the student buffered
before the forbidden call is lost: ``os._exit`` does not flush (flushing would run objects the
student may have replaced).

Standard library only at import time; torch is imported inside the functions. The zygote
ships this file as source and executes it as ``_sandbox.operators``.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import sys
import warnings
import weakref
from collections.abc import Callable
from typing import Any

# Substrings of the aten operators that compute (or choose a kernel for) attention.
OP_PATTERNS = ("scaled_dot_product", "multi_head_attention", "_transformer_",
               "flash_attention", "efficient_attention", "cudnn_attention",
               "scaled_dot_attention", "_fused_sdp_choice")

# Alias keys registered for every operator: they fill every backend slot (CompositeExplicit-
# Autograd) and every autograd slot (Autograd) that has no registration of its own.
ALWAYS_KEYS = ("CompositeExplicitAutograd", "Autograd")

# Python entry points of torch that compose attention from ordinary operators:
# (module, attribute). Classes are replaced together with all their subclasses.
PYTHON_TARGETS = (
    ("torch.nn.functional", "multi_head_attention_forward"),
    ("torch.nn.modules.activation", "MultiheadAttention"),
    ("torch.nn.modules.transformer", "Transformer"),
    ("torch.nn.modules.transformer", "TransformerEncoder"),
    ("torch.nn.modules.transformer", "TransformerDecoder"),
    ("torch.nn.modules.transformer", "TransformerEncoderLayer"),
    ("torch.nn.modules.transformer", "TransformerDecoderLayer"),
    ("torch._higher_order_ops.flex_attention", "math_attention"),
    ("torch._higher_order_ops.flex_attention", "_math_attention_inner"),
    ("torch._higher_order_ops.flex_attention", "sdpa_dense"),
    ("torch._higher_order_ops.flex_attention", "sdpa_dense_backward"),
)

# Where a registration of ours says it comes from (``torch._C._dispatch_dump``).
DEBUG_NAME = "<sandbox operators>"

# Filled by block_attention: what it did, for the grader's log and for tests.
state: dict[str, Any] = {}


def forbidden_attention_names() -> list[str]:
    """The aten operators (``aten::name`` or ``aten::name.overload``) that ``block_attention``
    blocks: every one in this torch whose name matches ``OP_PATTERNS``."""
    import torch

    return sorted(name for name in torch._C._dispatch_get_all_op_names()
                  if name.startswith("aten::") and any(p in name for p in OP_PATTERNS))


def _reporter(exit_code: int, report_fd: int) -> Callable[[str], None]:
    """``report(what)``: one line to ``report_fd``, then the end of the process. The functions
    are bound now: the student's code may replace ``os.write`` or ``os._exit`` later."""
    write, exit_now = os.write, os._exit

    def report(what: str) -> None:
        try:
            write(report_fd, ("forbidden " + what + "\n").encode())
        except BaseException:  # a closed descriptor: still end the process
            pass
        exit_now(exit_code)

    return report


def _kernel(name: str, report: Callable[[str], None]) -> Callable[..., Any]:
    def forbidden_attention_kernel(*args: Any, **kwargs: Any) -> Any:
        report(name)

    forbidden_attention_kernel.__qualname__ = "forbidden_attention_kernel[" + name + "]"
    return forbidden_attention_kernel


def _registered_keys(name: str) -> list[str]:
    """The dispatch keys (runtime and alias) that ``name`` has a registration for, from the
    dispatcher's own dump (``Key: registered at ...`` or ``Key[alias]: registered at ...``)."""
    import torch

    keys = []
    for line in torch._C._dispatch_dump(name).splitlines():
        head, sep, tail = line.partition(": ")
        if not sep or "registered at" not in tail or " " in head or head == "debug":
            continue
        keys.append(head.removesuffix("[alias]"))
    return keys


def _leaks(name: str) -> list[str]:
    """The runtime keys whose kernel for ``name`` is not ours and not a fallback (one that
    passes the call on to the next key)."""
    import torch

    leaks = []
    for line in torch._C._dispatch_dump_table(name).splitlines():
        key, sep, tail = line.partition(": ")
        if not sep or key == "Undefined" or DEBUG_NAME in tail:
            continue
        if "[backend fallback]" in tail or tail.startswith("fallthrough"):
            continue
        leaks.append(key)
    return leaks


def _register_kernels(report: Callable[[str], None]) -> list[str]:
    """Our kernel for every forbidden operator and every key that could reach it. The handle
    is leaked (see the module's docstring): no Python object refers to it afterwards."""
    import ctypes

    import torch

    names = forbidden_attention_names()
    handle = torch._C._dispatch_library("IMPL", "aten", "", DEBUG_NAME, 0)
    failures = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Overriding a previously registered kernel ..."
        for name in names:
            op = name.removeprefix("aten::")
            kernel = _kernel(name, report)
            keys = dict.fromkeys([*_registered_keys(name), *ALWAYS_KEYS])
            for key in keys:
                try:
                    handle.impl(op, key, kernel, False)
                except Exception as error:  # a key this torch has not: _leaks checks
                    failures.append(f"{name} at {key}: {error}".splitlines()[0])
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(handle))
    del handle
    leaks = [f"{name} at {key}" for name in names for key in _leaks(name)]
    state["kernel_failures"] = failures
    if leaks:
        raise RuntimeError("torch's attention is still reachable: " + ", ".join(leaks))
    return names


def _stand_in_function(what: str, original: Any, report: Callable[[str], None]) -> Any:
    def stand_in(*args: Any, **kwargs: Any) -> Any:
        report(what)

    stand_in.__name__ = original.__name__
    stand_in.__qualname__ = original.__qualname__
    stand_in.__doc__ = f"Forbidden in this exercise: {what} (calling it ends the run)."
    return stand_in


def _stand_in_class(what: str, original: type, report: Callable[[str], None]) -> type:
    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        report(what)

    return type(original.__name__, (), {
        "__new__": __new__,
        "__module__": __name__,
        "__qualname__": original.__qualname__,
        "__doc__": f"Forbidden in this exercise: {what} (making one ends the run).",
    })


def _python_targets(report: Callable[[str], None]) -> dict[int, tuple[Any, Any]]:
    """``id(original): (original, stand-in)`` for every Python entry point to replace,
    subclasses of the classes included."""
    found: dict[int, tuple[Any, Any]] = {}
    for module_name, attribute in PYTHON_TARGETS:
        try:
            module = importlib.import_module(module_name)
        except Exception:  # not in this torch: nothing to replace
            continue
        original = module.__dict__.get(attribute)
        if original is None or id(original) in found:
            continue
        what = f"{module_name}.{attribute}"
        if isinstance(original, type):
            pending = [original]
            while pending:
                cls = pending.pop()
                if id(cls) in found:
                    continue
                name = cls.__name__ if cls is original else f"{cls.__module__}.{cls.__qualname__}"
                found[id(cls)] = (cls, _stand_in_class(
                    what if cls is original else name, cls, report))
                pending.extend(type.__subclasses__(cls))
        else:
            found[id(original)] = (original, _stand_in_function(what, original, report))
    return found


def _owning_types(mappings: list[dict]) -> dict[int, type]:
    """``id(namespace): class`` for those of ``mappings`` that are a class's namespace (one
    written through ``setattr``, so that the class's attribute cache hears of it)."""
    wanted = {id(m) for m in mappings}
    owners = {}
    if wanted:
        for referrer in gc.get_referrers(*mappings):
            if isinstance(referrer, type):
                for namespace in gc.get_referents(referrer.__dict__):
                    if id(namespace) in wanted:
                        owners[id(namespace)] = referrer
    return owners


def _replace_everywhere(targets: dict[int, tuple[Any, Any]]) -> list[str]:
    """Put each stand-in wherever the process refers to its original (dictionaries, lists,
    sets, closure cells). Returns what could not be replaced (tuples and the like, outside
    the originals' own cycles)."""
    originals = [original for original, _ in targets.values()]
    own = {id(original) for original in originals}
    # Objects that belong to an original (a class's namespace, its __mro__ and __bases__, a
    # method's __class__ cell): they go when it goes.
    internal: set[int] = {id(targets), id(originals), *map(id, targets.values())}
    for original in originals:
        if isinstance(original, type):
            internal.update(id(r) for r in gc.get_referents(original))
            internal.update(id(r) for r in gc.get_referents(original.__dict__))
            for value in original.__dict__.values():
                for function in (value, getattr(value, "__func__", None),
                                 getattr(value, "fget", None)):
                    for cell in getattr(function, "__closure__", None) or ():
                        internal.add(id(cell))
    kept = []
    cell_type = type((lambda: originals).__closure__[0])
    referrers = [r for r in gc.get_referrers(*originals)
                 if id(r) not in internal and id(r) not in own]
    modules = {id(vars(m)) for m in list(sys.modules.values()) if hasattr(m, "__dict__")}
    owners = _owning_types([r for r in referrers
                            if isinstance(r, dict) and id(r) not in modules])
    state["referrers"] = [type(r).__name__ + (" (module)" if id(r) in modules else "")
                          for r in referrers]
    for referrer in referrers:
        if isinstance(referrer, dict):
            owner = owners.get(id(referrer))
            for key, value in list(referrer.items()):
                if id(value) in own:
                    if owner is not None:
                        setattr(owner, key, targets[id(value)][1])
                    else:
                        referrer[key] = targets[id(value)][1]
            for key in [k for k in referrer if id(k) in own]:
                value = referrer.pop(key)
                referrer.setdefault(targets[id(key)][1], value)
        elif isinstance(referrer, list):
            for index, value in enumerate(referrer):
                if id(value) in own:
                    referrer[index] = targets[id(value)][1]
        elif isinstance(referrer, set):
            for value in [v for v in referrer if id(v) in own]:
                referrer.discard(value)
                referrer.add(targets[id(value)][1])
        elif isinstance(referrer, cell_type):
            referrer.cell_contents = targets[id(referrer.cell_contents)][1]
        elif type(referrer).__name__ != "frame":
            kept.append(f"{type(referrer).__name__} {str(referrer)[:80]}")
    return kept


def _replace_python_entry_points(report: Callable[[str], None]) -> None:
    import torch.overrides

    # torch.overrides caches tables of torch's functions (F's included) on first use.
    for value in list(vars(torch.overrides).values()):
        if callable(getattr(value, "cache_clear", None)):
            with contextlib.suppress(Exception):
                value.cache_clear()
    targets = _python_targets(report)
    kept = _replace_everywhere(targets)
    watch = [(f"{o.__module__}.{o.__qualname__}", weakref.ref(o)) for o, _ in targets.values()]
    state["replaced"] = sorted(name for name, _ in watch)
    targets.clear()
    del targets
    gc.collect()
    survivors = [name for name, ref in watch if ref() is not None]
    if survivors:
        raise RuntimeError("torch's attention code is still in the process: "
                           + ", ".join(survivors) + (" (kept by " + "; ".join(kept) + ")"
                                                      if kept else ""))


def block_attention(exit_code: int, report_fd: int) -> None:
    """Make every use of torch's own attention end this process with ``exit_code`` after one
    line (``forbidden WHAT``) on ``report_fd``: at the dispatcher for the aten operators, in
    Python for the entry points that compose attention from ordinary operators. Call it once,
    before the student's code runs. Raises ``RuntimeError`` if something stays reachable."""
    report = _reporter(exit_code, report_fd)
    state["blocked"] = _register_kernels(report)
    _replace_python_entry_points(report)
