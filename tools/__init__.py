"""The kit's own tooling, kept out of the package students install: the benchmarks
(``python -m tools.bench``, ``make bench``; their profile, ``tools.bench_profile``) and the CUDA
check (``python -m tools.gpu_check``, ``make gpu-check``). Run from the kit's folder."""
