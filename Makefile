# attention-kit: every command a person runs. The first use creates .venv and installs into it.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
SUBMISSION ?= exercises
COURSE ?= build/nbgrader
ASSIGNMENT ?= attention
JOBS ?=
AGAINST ?=
EXERCISE ?=
FORCE ?=
TEST_WORKERS ?= auto
EXCHANGE ?=
DEMO ?= demo-class
COURSE_FILE ?=
COURSE_FLAG := $(if $(COURSE_FILE),--course $(COURSE_FILE))
CORE := $(VENV)/.installed-core
# torch: on Linux the CPU build, from PyTorch's CPU wheel index (PyPI's Linux wheel is the CUDA
# build, gigabytes more); make grade TORCH=cuda installs PyPI's CUDA build instead. macOS
# wheels are CPU builds either way. Only torch is looked up there (its dependencies and the rest
# come from the usual index after it); where that index cannot be reached (this machine's local
# wheels, CI), pip takes the pinned torch from the indexes it is configured with.
TORCH ?= cpu
TORCH_INDEX := $(if $(and $(filter cpu,$(TORCH)),$(filter Linux,$(shell uname -s))),\
	--extra-index-url https://download.pytorch.org/whl/cpu)
DEV := $(VENV)/.installed-dev
# The pinned NumPy needs Python 3.11 or newer: on an older one, stop before creating .venv
# with one line that says so (evaluated only when .venv is to be made).
PYTHON_VERSION = $(shell $(PYTHON) -c 'import sys; print(sys.version.split()[0])' 2>/dev/null)
PYTHON_OK = $(shell $(PYTHON) -c 'import sys; print(sys.version_info >= (3, 11))' 2>/dev/null)
CHECK_PYTHON = $(if $(filter True,$(PYTHON_OK)),,$(error attention-kit needs Python 3.11 or \
newer, and $(PYTHON) is $(or $(PYTHON_VERSION),not found): run make PYTHON=python3.11 (or newer)))

.PHONY: grade answer-key test test-slurm slurm-install bench stubs names zoo demo-class docs nbgrader \
	nbgrader-autograde handout handout-check gradescope gpu-check lint clean regenerate

# The install says what it does, one line a step. What pip prints (warnings it recovered from,
# such as an index it could not reach) goes to .venv/install.log, shown in full if a step fails.
INSTALL_LOG := $(VENV)/install.log
PIP := $(PY) -m pip install --disable-pip-version-check
LOGGED := >>$(INSTALL_LOG) 2>&1 || { cat $(INSTALL_LOG); echo "make: the step above failed \
(its log: $(INSTALL_LOG))"; exit 1; }
TORCH_PIN = $(shell grep '^torch==' requirements.lock)
TORCH_STEP = installing $(TORCH_PIN), the CPU build (about 190 MB)

$(CORE): pyproject.toml requirements.lock
	$(CHECK_PYTHON)
	@echo "setting up .venv/ with $(PYTHON) (Python $(PYTHON_VERSION)); the first time takes minutes"
	@$(PYTHON) -m venv $(VENV) && : >$(INSTALL_LOG)
	$(if $(TORCH_INDEX),@echo "$(TORCH_STEP)")
	$(if $(TORCH_INDEX),@$(PIP) --retries 2 --no-deps $(TORCH_INDEX) $(TORCH_PIN) $(LOGGED))
	@echo "installing the pinned packages (requirements.lock: torch, numpy, hypothesis, pytest)"
	@$(PIP) -r requirements.lock $(LOGGED)
	@echo "installing the kit into .venv/ (its command: .venv/bin/grader)"
	@$(PIP) --no-deps -e . $(LOGGED)
	@touch $@

$(DEV): $(CORE) requirements-dev.lock
	@echo "installing the kit's own tools (requirements-dev.lock: nbgrader, ruff, mkdocs, pytest-xdist)"
	@$(PIP) -r requirements-dev.lock $(LOGGED)
	@touch $@

## grade: grade $(SUBMISSION) (default: exercises/, your work); EXERCISE=NAME grades that
##        exercise alone (make grade EXERCISE=softmax; several: EXERCISE="softmax heads")
grade: $(CORE)
	$(VENV)/bin/grader grade $(strip $(SUBMISSION) $(EXERCISE:%=--exercise %) $(COURSE_FLAG))

## answer-key: grade solutions/ (must print 100/100)
answer-key: $(CORE)
	$(PY) -m grader grade solutions $(COURSE_FLAG)

## test: the kit's own tests (as root, the attack and limit tests again as uid 65534), split
##        over one process a core (pytest-xdist); TEST_WORKERS=N sets how many, 0 runs them in one
test: $(DEV)
	$(PY) -m pytest -q -ra -n $(TEST_WORKERS) --dist loadgroup tests

## test-slurm: start a one-node Slurm cluster on this machine (root, make slurm-install), then
##        grade a class on it through python -m grader slurm as uid 65534, as a site's user
##        does; skipped, with the reason, where it cannot be root or cannot install
test-slurm: $(DEV) slurm-install
	ATTENTION_KIT_SLURM_TEST=1 $(PY) -m pytest -q -rs tests/test_slurm.py

## slurm-install: as root, install Debian's slurm-wlm and munge (apt) for make test-slurm; as
##        another user, or without apt-get, it says why it did nothing
slurm-install:
	@if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && \
	    command -v munged >/dev/null; then \
	    echo "slurm-install: slurmctld, slurmd and munged are installed"; \
	elif [ "$$(id -u)" != 0 ]; then \
	    echo "slurm-install: skipped: installing slurm-wlm and munge needs root"; \
	elif ! command -v apt-get >/dev/null; then \
	    echo "slurm-install: skipped: no apt-get here (install slurm-wlm and munge by hand)"; \
	else \
	    export DEBIAN_FRONTEND=noninteractive; \
	    { apt-get install -y -q slurm-wlm munge || { apt-get update -q && \
	      apt-get install -y -q slurm-wlm munge; }; } >/tmp/attention-kit-slurm-install.log \
	      2>&1 && echo "slurm-install: installed slurm-wlm and munge" || \
	    { tail -5 /tmp/attention-kit-slurm-install.log; \
	      echo "slurm-install: skipped: apt-get could not install slurm-wlm and munge"; }; \
	fi

## bench: grading time as a ratio to `python -c "import torch"`, measured in the same run;
##        a class of 200 as notebooks (isolated autograde against plain `nbgrader autograde`
##        on the same notebooks); then the class of 200 as files (batch). AGAINST=DIR (another
##        checkout of the kit) measures its key ratios and its class in the same run
bench: $(DEV)
	$(PY) -m tools.bench $(if $(AGAINST),--against $(AGAINST))

## zoo: grade the bug zoo (tests/zoo) and print the entry x exercise matrix; EXERCISE=NAME:
##        the entries of that exercise only (make zoo EXERCISE=rope)
zoo: $(CORE)
	$(PY) tests/zoo/matrix.py $(if $(EXERCISE),--exercise $(EXERCISE))

## docs: build docs/ as a site in build/site/ (mkdocs, strict: a broken link or anchor fails)
docs: $(DEV)
	$(PY) -m mkdocs build --strict --quiet --site-dir build/site

## demo-class: write a small class to try batch and its report on, in $(DEMO) (default
##        demo-class/): correct, wrong, a hang, a file that cannot load, a copied pair, a stub
demo-class: $(CORE)
	$(PY) tests/demo_class.py $(DEMO)

## stubs: regenerate exercises/ from solutions/; a file that differs from the stub the kit
##        last wrote (someone's work) is refused by name, FORCE=1 replaces it and keeps it as
##        NAME.py.orig
stubs: $(CORE)
	$(VENV)/bin/grader $(strip stubs $(COURSE_FLAG) $(if $(FORCE),--force))

## names: rewrite grader/core/delegation_names.py (what a file may name of each module it may
##        import) from the installed NumPy, torch and Python
names: $(CORE)
	$(PY) -m tools.delegation_names

## regenerate: write again every file derived from the key, the exercise modules, the zoo
##        and course.toml: the stubs, the docs' counts, tables, lists and report examples, and
##        tests/golden/ (about 2 minutes on 2 cores); EXERCISE=NAME regrades only the zoo
##        entries graded with that exercise for tests/golden/ (and the golden class)
regenerate: $(CORE)
	$(PY) -m tools.regenerate $(if $(EXERCISE),--exercise $(EXERCISE))

## nbgrader: write the nbgrader course folder $(COURSE) (config + source/attention/attention.ipynb,
##        and student/nbgrader_config.py for students to copy); its exchange is
##        $(COURSE)/exchange, or EXCHANGE=DIR (a site's shared exchange)
nbgrader: $(DEV)
	$(VENV)/bin/grader nbgrader build $(strip $(COURSE) $(COURSE_FLAG) $(EXCHANGE:%=--exchange %))

## nbgrader-autograde: grade $(COURSE)'s submitted notebooks of $(ASSIGNMENT) in isolation, into
##        its gradebook (no notebook runs; then nbgrader export / generate_feedback as usual)
nbgrader-autograde: $(DEV)
	$(PY) -m grader nbgrader autograde --course $(COURSE) --assignment $(ASSIGNMENT) \
	    $(if $(JOBS),--jobs $(JOBS)) $(if $(COURSE_FILE),--course-file $(COURSE_FILE))

## handout: the student's copy in dist/handout/ (stubs, public grader, Makefile, README); it
##        replaces only what it wrote there before and keeps your own files: a file it would
##        replace that is not as it wrote it is refused by name, FORCE=1 replaces it
handout: $(CORE)
	$(PY) -m grader $(strip handout $(COURSE_FLAG) $(if $(FORCE),--force))

## handout-check: print each line the handout would ship (an exercise module, a stub) that
##        repeats a line of the answer key's solutions, with its file and line (exit 1 if any)
handout-check: $(CORE)
	$(PY) -m grader handout --check $(COURSE_FLAG)

## gradescope: dist/gradescope-autograder.zip (setup.sh, run_autograder, grader, answer key)
gradescope: $(CORE)
	$(PY) -m grader gradescope build $(COURSE_FLAG)

## gpu-check: on a machine with CUDA, grade the key and a CPU-only mha on cuda (exit 2 without;
##        it needs torch's CUDA build: make gpu-check TORCH=cuda in a fresh .venv)
gpu-check: $(CORE)
	$(PY) -m tools.gpu_check

clean:
	rm -rf $(VENV) build dist .pytest_cache .hypothesis

## lint: ruff over the kit (the zoo's deliberately wrong files are excluded in pyproject.toml)
lint: $(DEV)
	$(PY) -m ruff check grader tests solutions
