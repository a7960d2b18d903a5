import atexit
import os
import sys
import threading

from .integrations.cli import main

code = main()
# Leave without the interpreter's teardown: freeing torch's objects one by one takes longer than
# half a second (measured: `python -c "import torch"` spends 0.7 s of its 2.9 s after the
# import), and nothing in it matters here. What does matter runs first: the exit handlers (the
# workers and zygotes closed, temporary folders removed) and the buffered output. A thread still
# running gets the ordinary exit, which waits for it.
if threading.active_count() == 1:
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 1
    os._exit(code if isinstance(code, int) else 1)
raise SystemExit(code)
