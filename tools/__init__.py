"""The kit's own tooling, kept out of the package students install: the benchmarks
(``python -m tools.bench``, ``make bench``; their profile, ``tools.bench_profile``), the CUDA
check (``python -m tools.gpu_check``, ``make gpu-check``), the source rule's lists
(``python -m tools.delegation_names``, ``make names``) and the trace of the workers' system
calls (``python -m tools.trace_syscalls``). Run from the kit's folder."""
