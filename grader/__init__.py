"""attention-kit's grader.

- ``grader.problems``: one module per exercise, everything the kit knows about it.
- ``grader.core``: the grading engine (course, checks, comparisons, diagnosis), a grading run
  (``core.run.GradingRun``) and the typed records it gives (``core.results``).
- ``grader.sandbox``: the only code that runs a submission (workers and their confinement).
- ``grader.integrations``: what is built on the engine, by whom it serves: ``routes`` (the ways
  a submission reaches the grader: the command line, batch and Slurm, Gradescope, nbgrader,
  pytest, and the handout students get) and ``outputs`` (what a grade is rendered as: the
  report and results.json, the class report and its page, the gradebook exports, similarity).

The kit's own tooling (the benchmarks, the CUDA check) is in ``tools/``, outside this package.
The process that imports this package decides grades and never imports student code.
"""
