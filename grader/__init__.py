"""attention-kit's grader.

- ``grader.problems``: one module per exercise, everything the kit knows about it.
- ``grader.core``: the grading engine (course, checks, comparisons, diagnosis).
- ``grader.sandbox``: the only code that runs a submission (workers and their confinement).
- ``grader.integrations``: command line, batch, reports, notebooks, Gradescope, handout, bench.

The process that imports this package decides grades and never imports student code.
"""
