"""Stopping a process the grading process started and serves requests through (a zygote, the
reader): shared by ``zygote_client`` and ``readers``."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path
from typing import IO, Any


def stop(process: subprocess.Popen[Any], log: IO[Any], socket_path: str | Path,
         folder: str | Path) -> None:
    """End ``process`` (it ends on end of its input; killed if it has not within 5 s), close
    its output and ``log``, and remove its socket and the folder that held it."""
    with contextlib.suppress(Exception):
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=5)
    with contextlib.suppress(Exception):
        process.kill()
    for stream in (process.stdout, log):
        with contextlib.suppress(Exception):
            stream.close()
    with contextlib.suppress(OSError):
        os.unlink(socket_path)
    with contextlib.suppress(OSError):
        os.rmdir(folder)
