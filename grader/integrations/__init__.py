"""Everything built on the engine: command line, batch grading, reports, notebooks, Gradescope,
the handout, stubs and the benchmark."""
