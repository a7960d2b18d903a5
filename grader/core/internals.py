"""The parts of Hypothesis's internals the kit relies on, found in one place.

- ``providers``: Hypothesis mixes the literals of every imported "local" module into its draws;
  ``grader.core.exercise`` turns that off, so a check draws the same examples whatever route
  imported it.
- ``InterestingOrigin``, ``failure_exceptions_to_catch``, ``StopTest``, ``UnsatisfiedAssumption``:
  how Hypothesis tells one run of a test from another (passed, invalid, or failed, and where);
  ``grader.core.replay`` follows a failing check's recorded run only while the student's code
  gives the same outcome at every step. ``current_build_context`` and ``ConjectureData.nodes``:
  the choices a run made (what else Hypothesis decides from), so two recorded runs are taken
  for one only where they made the same.
- ``ensure_free_stackframes``: the recursion limit Hypothesis sets for each run of a test (2000
  frames above the frame that calls it); ``grader.core.replay`` runs a replayed or followed
  example under the same one.
- ``deterministic_PRNG``: the seeded random state Hypothesis runs each example in;
  ``grader.core.replay`` runs a replayed example in the same one. Its registered generators
  (``RANDOMS_TO_MANAGE``) and their seeded state (``_seeded_state``) let a check's replayed
  examples share one save and restore, each example seeded afresh (``reseed``).

None of them is public API. The kit is tested on the Hypothesis range ``pyproject.toml`` declares;
where one has moved, importing the kit stops with one sentence that says what to install.
"""

from __future__ import annotations

from random import Random

import hypothesis

TESTED = ">=6.170,<6.171"  # as in pyproject.toml

try:
    from hypothesis.control import current_build_context
    from hypothesis.core import failure_exceptions_to_catch, skip_exceptions_to_reraise
    from hypothesis.errors import FailedHealthCheck, StopTest, UnsatisfiedAssumption
    from hypothesis.internal.conjecture import providers
    from hypothesis.internal.conjecture.junkdrawer import ensure_free_stackframes
    from hypothesis.internal.entropy import (
        RANDOMS_TO_MANAGE,
        _seeded_state,
        deterministic_PRNG,
    )
    from hypothesis.internal.escalation import InterestingOrigin

    for _name in ("exc_type", "filename", "lineno", "context", "group_elems"):
        InterestingOrigin.__dataclass_fields__[_name]
    from hypothesis.internal.conjecture.choice import ChoiceNode
    from hypothesis.internal.conjecture.data import ConjectureData

    ConjectureData.nodes  # noqa: B018  (the choices a run made: replay.choices)
    for _name in ("type", "value", "constraints", "was_forced"):
        ChoiceNode.__dataclass_fields__[_name]

    for _name in ("Constants", "CONSTANTS_CACHE", "_get_local_constants"):
        getattr(providers, _name)
    RANDOMS_TO_MANAGE.data  # noqa: B018  (a WeakValueDictionary: reseed reads its refs)
except (ImportError, AttributeError, KeyError, TypeError) as _missing:
    raise SystemExit(
        f"attention-kit cannot use Hypothesis {hypothesis.__version__}: an internal it relies "
        f"on has moved ({_missing}); install the tested range with "
        f"pip install 'hypothesis{TESTED}'") from None



def reseed() -> None:
    """Inside ``deterministic_PRNG``: every generator it manages back to the state it seeded
    it with, as entering it again would, without saving their states again (NumPy's global
    generator alone takes 0.09 ms to save and 0.07 ms to restore; a replayed check runs ten
    examples or more)."""
    seeded, _ = _seeded_state(0)
    for ref in list(RANDOMS_TO_MANAGE.data.values()):
        generator = ref()
        if generator is None:
            continue
        if type(generator) is Random:
            generator.setstate(seeded)
        else:
            generator.seed(0)


__all__ = ["TESTED", "ConjectureData", "FailedHealthCheck", "InterestingOrigin",
           "StopTest", "UnsatisfiedAssumption", "current_build_context", "deterministic_PRNG",
           "ensure_free_stackframes", "failure_exceptions_to_catch", "providers", "reseed",
           "skip_exceptions_to_reraise"]
