"""The kit's own tooling, kept out of the package students install: the benchmarks
(``python -m tools.bench``, ``make bench``; their profile, ``tools.bench_profile``) and the CUDA
check (``python -m tools.gpu_check``, ``make gpu-check``), and the source rule's lists
(``python -m tools.delegation_names``, ``make names``). Run from the kit's folder."""
