"""The two parts of Hypothesis's internals the kit relies on, found in one place.

- ``providers``: Hypothesis mixes the literals of every imported "local" module into its draws;
  ``grader.core.exercise`` turns that off, so a check draws the same examples whatever route
  imported it.
- ``deterministic_PRNG``: the seeded random state Hypothesis runs each example in;
  ``grader.core.replay`` runs a replayed example in the same one.

Neither is public API. The kit is tested on the Hypothesis range ``pyproject.toml`` declares;
where one has moved, importing the kit stops with one sentence that says what to install.
"""

from __future__ import annotations

import hypothesis

TESTED = ">=6.170,<6.171"  # as in pyproject.toml

try:
    from hypothesis.internal.conjecture import providers
    from hypothesis.internal.entropy import deterministic_PRNG

    for _name in ("Constants", "CONSTANTS_CACHE", "_get_local_constants"):
        getattr(providers, _name)
except (ImportError, AttributeError) as _missing:
    raise SystemExit(
        f"attention-kit cannot use Hypothesis {hypothesis.__version__}: an internal it relies "
        f"on has moved ({_missing}); install the tested range with "
        f"pip install 'hypothesis{TESTED}'") from None

__all__ = ["TESTED", "deterministic_PRNG", "providers"]
