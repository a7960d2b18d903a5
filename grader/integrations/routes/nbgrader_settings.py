"""The nbgrader settings ``make nbgrader`` writes into the course folder: the course's own
``nbgrader_config.py`` (the instructor's commands run beside it), and
``student/nbgrader_config.py``, the settings a student's side needs (the course and its
exchange), for a student to copy into the folder they fetch the assignment into, where nbgrader
reads it, instead of naming both on every command.
"""

from __future__ import annotations

import os
from pathlib import Path

from .kernel import CELL_TIMEOUT, EXERCISE_TIMEOUT

COURSE_ID = "attention-kit"
STUDENT_CONFIG = "student/nbgrader_config.py"

CONFIG = f'''"""nbgrader settings for the attention-kit course. Written by `make nbgrader`:
edit grader/integrations/routes/nbgrader_settings.py, not this file (make nbgrader EXCHANGE=DIR
names another exchange)."""

import os

c = get_config()  # noqa: F821
c.CourseDirectory.course_id = "{COURSE_ID}"
# The exchange that release_assignment, fetch_assignment, submit and collect share:
# {{exchange}}. nbgrader makes it on the first release_assignment (mode 777, as it needs).
c.Exchange.root = {{root}}
# A test cell grades one exercise under the grader's {EXERCISE_TIMEOUT:g} s limit, and the calls
# stopped at their own limit (each fails its check), which that limit leaves out; a cell that
# still runs past this is interrupted and scores zero, and the notebook goes on.
c.Execute.timeout = {CELL_TIMEOUT}
c.Execute.interrupt_on_timeout = True
'''
# The course folder's own exchange/: an instructor without root can make it.
OWN_EXCHANGE = 'os.path.join(os.path.dirname(os.path.abspath(__file__)), "exchange")'

STUDENT = f'''"""nbgrader settings for a student of the attention-kit course. Copy this file
into the folder you fetch the assignment into and run nbgrader there (nbgrader
fetch_assignment attention, then nbgrader submit attention). Written by `make nbgrader`."""

c = get_config()  # noqa: F821
c.CourseDirectory.course_id = "{COURSE_ID}"
# The course's exchange: fetch_assignment takes the assignment from it, submit puts yours in it.
c.Exchange.root = {{root!r}}
'''


def config(exchange: str | None = None) -> str:
    """The course folder's ``nbgrader_config.py``: its exchange is ``exchange`` (a site's
    shared folder) or, by default, ``exchange/`` inside the course folder."""
    if exchange is None:
        return CONFIG.format(exchange="exchange/ in this course folder", root=OWN_EXCHANGE)
    path = os.path.abspath(exchange)
    return CONFIG.format(exchange=path, root=repr(path))


def student_config(folder: Path, exchange: str | None = None) -> str:
    """``student/nbgrader_config.py`` for the course folder ``folder``: the same exchange as
    its ``config``, by its full path, since the student's copy is read from another folder."""
    root = os.path.abspath(exchange if exchange is not None else Path(folder) / "exchange")
    return STUDENT.format(root=root)
