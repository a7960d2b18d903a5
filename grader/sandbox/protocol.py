"""The wire format between the grading process and a worker.

A message is a JSON header plus raw array buffers. Arrays travel as (dtype, shape, bytes) with
a whitelisted dtype and are rebuilt with ``np.frombuffer``: nothing from a worker is ever
unpickled, so a reply can only ever be plain data.

Frame: ``<u64 length of the rest><u64 header length><u64 buffer count>``, one ``<u64 length>``
per buffer, the header, then the buffers, back to back. The first eight bytes say how much
follows, so a message is read in two reads, whatever it holds; every length is checked against
the limits, and against the others, before anything is built from it.
"""

from __future__ import annotations

import json
import math
import socket
import struct
import time
from collections.abc import Callable
from typing import Any

import numpy as np

MAX_MESSAGE_BYTES = 64 << 20  # far above any real reply; a bigger one is a broken worker
MAX_HEADER_BYTES = 4 << 20  # the JSON part: arrays travel as raw buffers
MAX_BUFFERS = 4096
MAX_DIMS = 64  # NumPy's own limit
_MAX_SIZES = 16 + 8 * MAX_BUFFERS  # the lengths before the header
DTYPES = frozenset(
    "bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 float32 float64 "
    "complex64 complex128".split()
)
_U64 = struct.Struct("<Q")


class ProtocolError(Exception):
    """A malformed, oversized or truncated message."""


_PLAIN = frozenset({bool, int, float, str, type(None)})
_NAMES = {np.dtype(name): name for name in DTYPES}  # the native ones; others are looked up
_DTYPE_OF = {name: np.dtype(name) for name in DTYPES}


def _flatten(obj: Any, buffers: list[bytes]) -> Any:
    kind = type(obj)
    if kind in _PLAIN:  # most of a message: tested first
        return obj
    if kind is list:  # then the containers as they are (a subclass takes the long way)
        return [_flatten(x, buffers) for x in obj]
    if kind is tuple:
        return {"__tuple__": [_flatten(x, buffers) for x in obj]}
    if isinstance(obj, np.ndarray):
        dtype = obj.dtype
        name = _NAMES.get(dtype) or dtype.name
        if name not in DTYPES:
            raise ProtocolError(f"arrays of dtype {dtype} cannot be sent")
        shape = list(obj.shape)
        if type(obj) is not np.ndarray or not dtype.isnative:  # a subclass's methods unused
            obj = np.ascontiguousarray(obj).astype(dtype.newbyteorder("="), copy=False)
        buffers.append(obj.tobytes())  # in C order, whatever the array's own
        return {"__array__": len(buffers) - 1, "dtype": name, "shape": shape}
    if isinstance(obj, tuple):
        return {"__tuple__": [_flatten(x, buffers) for x in obj]}
    if isinstance(obj, list):
        return [_flatten(x, buffers) for x in obj]
    if isinstance(obj, dict):
        if not all(isinstance(key, str) for key in obj):
            raise ProtocolError("dictionary keys must be strings")
        if "__array__" in obj or "__tuple__" in obj:
            raise ProtocolError("reserved key in dictionary")
        return {key: _flatten(value, buffers) for key, value in obj.items()}
    if isinstance(obj, np.generic):
        return _flatten(np.asarray(obj), buffers)
    raise ProtocolError(f"cannot send a value of type {type(obj).__name__}")


def _rebuild(tree: Any, buffers: list[memoryview | None]) -> Any:
    """The value ``tree`` (a message's JSON header) describes; each array takes its buffer
    out of ``buffers``, so no buffer is copied twice."""
    kind = type(tree)  # what json.loads makes: these types exactly
    if kind in _PLAIN:
        return tree
    if kind is list:
        return [_rebuild(x, buffers) for x in tree]
    if kind is dict:
        if "__array__" in tree:
            dtype = tree.get("dtype")
            shape = tree.get("shape")
            index = tree["__array__"]
            if (type(dtype) is not str or dtype not in DTYPES or type(index) is not int
                    or not 0 <= index < len(buffers)):
                raise ProtocolError("bad array descriptor")
            # At most NumPy's dimensions, none longer than a message could fill: the length
            # check below multiplies them, and a long list of big ints took minutes to multiply.
            if not isinstance(shape, list) or len(shape) > MAX_DIMS or not all(
                    type(n) is int and 0 <= n <= MAX_MESSAGE_BYTES for n in shape):
                raise ProtocolError("bad array shape")
            data = buffers[index]
            if data is None:  # k arrays naming one buffer would make k copies of it
                raise ProtocolError("two arrays name the same buffer")
            buffers[index] = None
            dt = _DTYPE_OF[dtype]
            if len(data) != dt.itemsize * math.prod(shape):
                raise ProtocolError("array buffer does not match its shape")
            return np.frombuffer(data, dtype=dt).reshape(shape).copy()
        if "__tuple__" in tree:
            items = tree["__tuple__"]
            if type(items) is not list:
                raise ProtocolError("bad tuple")
            return tuple(_rebuild(x, buffers) for x in items)
        return {key: _rebuild(value, buffers) for key, value in tree.items()}
    raise ProtocolError("bad value in message")


def encode(obj: Any) -> bytes:
    buffers: list[bytes] = []
    header = json.dumps(_flatten(obj, buffers)).encode()
    sizes = struct.pack(f"<{2 + len(buffers)}Q", len(header), len(buffers),
                        *(len(buffer) for buffer in buffers))
    rest = len(sizes) + len(header) + sum(len(buffer) for buffer in buffers)
    return b"".join([_U64.pack(rest), sizes, header, *buffers])


def send(sock: socket.socket, obj: Any) -> None:
    sock.sendall(encode(obj))


def read_exact(sock: socket.socket, n: int, deadline: float | None = None,
               wait: Callable[[], None] | None = None) -> bytes:
    """``n`` bytes; ``wait`` is called before each read (the grading process keeps a call's
    own limits there, for every byte of the reply, not only until its first)."""
    chunks, remaining = [], n
    while remaining:
        if wait is not None:
            wait()
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            sock.settimeout(left)
        chunk = sock.recv(min(remaining, 1 << 20))
        if not chunk:
            raise EOFError("the other side closed the connection")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def recv(sock: socket.socket, deadline: float | None = None,
         wait: Callable[[], None] | None = None) -> Any:
    """Read one message; ``deadline`` is a ``time.monotonic()`` value or None to wait forever;
    ``wait`` as for ``read_exact``."""
    return decode(recv_frame(sock, deadline, wait))


def recv_frame(sock: socket.socket, deadline: float | None = None,
               wait: Callable[[], None] | None = None) -> bytes:
    """Read one message's bytes (after its length), for ``decode``; as ``recv``."""
    rest = _U64.unpack(read_exact(sock, 8, deadline, wait))[0]
    if rest > MAX_MESSAGE_BYTES + _MAX_SIZES:
        raise ProtocolError("message too large")
    if rest < 16:
        raise ProtocolError("truncated message")
    return read_exact(sock, rest, deadline, wait)


def decode(frame: bytes) -> Any:
    """The message whose bytes (after its length) are ``frame``: a new value on every call."""
    rest = len(frame)
    if rest < 16:
        raise ProtocolError("truncated message")
    data = memoryview(frame)
    header_len, count = struct.unpack_from("<QQ", data)
    if header_len > MAX_HEADER_BYTES or count > MAX_BUFFERS:
        raise ProtocolError("message too large")
    start = 16 + 8 * count
    if start > rest:
        raise ProtocolError("truncated message")
    sizes = struct.unpack_from(f"<{count}Q", data, 16)
    body = header_len + sum(sizes)
    if start + body != rest or body > MAX_MESSAGE_BYTES:
        raise ProtocolError("the lengths in the message do not add up")
    try:
        tree = json.loads(data[start:start + header_len].tobytes())
    except ValueError as error:
        raise ProtocolError(f"bad header: {error}") from None
    buffers: list[memoryview | None] = []
    offset = start + header_len
    for size in sizes:
        buffers.append(data[offset:offset + size])
        offset += size
    return _rebuild(tree, buffers)
