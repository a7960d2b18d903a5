"""``make demo-class``: a small class to try ``batch`` and its report on, written to a folder
(``demo-class/`` by default), one submission folder per student. Each starts from a different
author's correct files (tests/similar/, and the key for fay), so that only the copy is alike:

- ``ana``, ``eve``: correct, each in a style of their own.
- ``ben``: a wrong softmax: one maximum subtracted over the whole array, not each row's.
- ``cy``: correct, but their ``split_heads`` never ends on sequences longer than two tokens.
- ``dee``: correct, but their softmax backward's file stops with a NameError as it loads.
- ``fay``: eve's attention and mha, disguised (names, helpers, order, comments and indentation
  changed), the key's other files, and ``kv_cache.py`` left as the handout's stub.

Run it as ``python tests/demo_class.py [FOLDER]`` from the kit's folder (``make demo-class``).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from disguises import all_five

TESTS = Path(__file__).resolve().parent
KIT = TESTS.parent
CORE = ("softmax", "softmax_backward", "attention", "heads", "mha", "kv_cache")

HANG = '''

_split_heads = split_heads


def split_heads(x, n_head):
    position = 0
    while position < len(x[0]):  # never moves past the second token
        position = min(position + 1, 2)
    return _split_heads(x, n_head)
'''

CRASH = '''

TOLERANCE = 1e-6
print("checking to", TOLERENCE)  # a typo: the file stops with a NameError as it loads
'''


STUDENTS = ("ana", "ben", "cy", "dee", "eve", "fay")
GLOBAL_SHIFT = ("e = np.exp(zt - m)", "e = np.exp(zt - np.max(zt))")


def _files(source: Path) -> dict[str, str]:
    return {f"{name}.py": (source / f"{name}.py").read_text() for name in CORE}


def students() -> dict[str, dict[str, str]]:
    """Each student's files, by name."""
    own = {name: _files(TESTS / "similar" / name) for name in ("ana", "ben", "cy", "dee", "eve")}
    key = _files(KIT / "solutions")
    ben, cy, dee, eve = own["ben"], own["cy"], own["dee"], own["eve"]
    assert ben["softmax.py"].count(GLOBAL_SHIFT[0]) == 1
    return {
        "ana": own["ana"],
        "ben": {**ben, "softmax.py": ben["softmax.py"].replace(*GLOBAL_SHIFT)},
        "cy": {**cy, "heads.py": cy["heads.py"] + HANG},
        "dee": {**dee, "softmax_backward.py": dee["softmax_backward.py"] + CRASH},
        "eve": eve,
        "fay": {**key, "attention.py": all_five(eve["attention.py"], "attention"),
                "mha.py": all_five(eve["mha.py"], "mha"),
                "kv_cache.py": (KIT / "exercises" / "kv_cache.py").read_text()},
    }


def write(folder: Path) -> list[Path]:
    """The class under ``folder`` (made again from scratch): its submission folders."""
    if folder.exists():
        shutil.rmtree(folder)
    made = []
    for name, files in students().items():
        student = folder / name
        student.mkdir(parents=True)
        for filename, text in files.items():
            (student / filename).write_text(text)
        made.append(student)
    return made


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "demo-class")
    written = write(target)
    print(f"wrote {len(written)} submissions under {target}/: {', '.join(STUDENTS)}")
    print(f"try: .venv/bin/grader batch {target} --csv {target}-grades.csv "
          f"--json-dir {target}-results --report {target}-report")
