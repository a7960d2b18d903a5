"""Worker requests for the bonus exercises whose objects cannot cross the process boundary.

Runs IN THE WORKER, like ``grader.worker``: it builds the student's module or cache, runs it
on the arrays it is sent and returns plain arrays and numbers. ``grader.worker.serve``
dispatches the ops named in ``OPS`` here.

- ``gqa_build`` / ``gqa_forward``: ``GroupedQueryAttention``, as ``mha_build`` /
  ``mha_forward`` do for ``MultiHeadAttention``.
- ``decode_run``: a reference ``MultiHeadAttention`` (what ``from .mha import ...`` gives the
  submission) with the sent weights, fed chunk after chunk through the student's
  ``decode_step`` and one ``KVCache``.
- ``kvcache_run``: ``append`` after ``append`` on one student ``KVCache``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

OPS = ("gqa_build", "gqa_forward", "decode_run", "kvcache_run")
SHOWN_DEVICES = ("cpu", "cuda")  # results on other devices ("meta") are not sent back


def handle(session: Any, op: str, kwargs: dict[str, Any]) -> Any:
    return globals()[op](session.module, **kwargs)


def _linears(module: Any) -> dict[str, Any]:
    import torch

    found = {}
    for name in ("wq", "wk", "wv", "wo"):
        layer = getattr(module, name, None)
        if isinstance(layer, torch.nn.Linear):
            found[name] = {"in": int(layer.in_features), "out": int(layer.out_features),
                           "bias": layer.bias is not None}
    return found


def _load_state(module: Any, state: dict[str, np.ndarray]) -> None:
    import torch

    from .worker import BadReturn

    with torch.no_grad():
        for key, value in state.items():
            layer_name, param_name = key.split(".")
            target = getattr(getattr(module, layer_name, None), param_name, None)
            if target is None or tuple(target.shape) != value.shape:
                raise BadReturn(f"{key} is missing or has another shape than {value.shape}")
            target.copy_(torch.from_numpy(value))


def gqa_build(module: Any, d_model: int, n_head: int, n_kv_head: int, bias: bool) -> dict:
    import torch

    from .worker import BadReturn, seed_cpu

    seed_cpu(0)
    built = module.GroupedQueryAttention(d_model, n_head, n_kv_head, bias=bias)
    if not isinstance(built, torch.nn.Module):
        raise BadReturn("GroupedQueryAttention(...) is not a torch.nn.Module")
    count = sum(int(p.numel()) for p in built.parameters())
    return {"count": count, "linears": _linears(built)}


def gqa_forward(module: Any, d_model: int, n_head: int, n_kv_head: int, bias: bool,
                state: dict[str, np.ndarray], x: np.ndarray, mask: np.ndarray | None,
                device: str) -> dict[str, Any]:
    import torch

    from .worker import BadReturn, plain, seed_cpu

    seed_cpu(0)
    built = module.GroupedQueryAttention(d_model, n_head, n_kv_head, bias=bias)
    built = built.to(device=device, dtype=torch.from_numpy(x).dtype)
    _load_state(built, state)
    tx = torch.from_numpy(x).to(device)
    with torch.no_grad():
        result = built(tx) if mask is None else built(tx, torch.from_numpy(mask).to(device))
    if not isinstance(result, tuple) or len(result) != 2:
        raise BadReturn("forward must return a tuple (y, weights)")
    return {"y": plain(result[0], "y"), "weights": plain(result[1], "weights")}


def decode_run(module: Any, d_model: int, n_head: int, bias: bool,
               state: dict[str, np.ndarray], xs: list[np.ndarray], device: str) -> dict:
    """Feed the chunks ``xs`` (each ``(B, T_i, d_model)``) through ``decode_step``."""
    import torch

    from . import reference
    from .worker import BadReturn, plain, seed_cpu

    seed_cpu(0)
    mha = reference.MultiHeadAttention(d_model, n_head, bias=bias)
    mha = mha.to(device=device, dtype=torch.from_numpy(xs[0]).dtype)
    _load_state(mha, state)
    cache = module.KVCache()
    ys, lengths = [], []
    with torch.no_grad():
        for i, chunk in enumerate(xs):
            y = module.decode_step(mha, torch.from_numpy(chunk).to(device), cache)
            if not isinstance(y, torch.Tensor):
                raise BadReturn(f"decode_step returned a {type(y).__name__}, expected a tensor")
            ys.append(plain(y, f"the output of step {i}"))
            lengths.append(int(len(cache)))
    return {"ys": ys, "lengths": lengths}


def kvcache_run(module: Any, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``steps``: ``{"k", "v", "device"}`` each, appended in order to one new ``KVCache``."""
    import torch

    from .worker import BadReturn, plain

    cache = module.KVCache()
    replies = []
    for i, step in enumerate(steps):
        device = step.get("device", "cpu")
        k = torch.from_numpy(step["k"]).to(device)
        v = torch.from_numpy(step["v"]).to(device)
        result = cache.append(k, v)
        if not isinstance(result, tuple) or len(result) != 2:
            raise BadReturn(f"append (step {i}) must return a tuple (k_all, v_all)")
        reply: dict[str, Any] = {"len": int(len(cache))}
        if all(isinstance(t, torch.Tensor) and t.device.type in SHOWN_DEVICES for t in result):
            reply["k"] = plain(result[0], f"k_all after append {i}")
            reply["v"] = plain(result[1], f"v_all after append {i}")
        replies.append(reply)
    return replies
