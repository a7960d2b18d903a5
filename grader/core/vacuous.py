"""No points for ignoring the input, judged on each check's own calls.

A uniform softmax meets "every row sums to 1" and "adding a constant changes nothing" whatever
its input, and rejects NaN as the key does: those checks pass, and show nothing. So each
exercise names what the student writes that must use its input (``EX.judge_input``), and
``Student`` keeps every call a check makes of it with its answer (``Call``). Once a check has
passed, the reference answers the same calls here, in the grading process (``Judge.answer``,
once per question), and each part of the student's answers is judged beside the reference's
part in the same place (``read``; the comparisons are ``grader.core.movement``'s).

A call tells at a place where the reference's part varies (``tells``) and is none of the
answers that need no use of the input: one of the call's arguments as given, or, where the
call has a mask or entries that are not finite, the answer to the same call with every float
set to 0 (``_Question.beyond``). There the student's part is quiet when it holds one repeated
value, is an argument as given, is the answer for zeros, is the same as its part of that
shape for every other call of the check, the reference's differing for one at least (each
within ``TOLERANCE`` of how far the reference's moves), or is no answer (an exception, NaN
where the reference has none, no array: a module that cannot take the call's weights);
otherwise it moves. A check loses its points when, at some place that tells on its calls,
none moves. A check none of whose calls tells (each an input the reference rejects) is judged
by the others: it keeps its points when some visible check's calls, judged on their own, show
the function using its input. A call the function cannot answer counts against that call,
never as evidence about another.
"""

from __future__ import annotations

import copy
import pickle
import re
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..sandbox.errors import CallTimedOut
from .exercise import Exercise, Judged
from .movement import TOLERANCE, Entries, constant, parts, same, tells, zeroed
from .results import CheckResult

NO_POINTS = "Passed, but no points: {label} ignores its input ({why}), so this property holds " \
            "whatever the input and shows nothing."
# The whole line ``operation_helpers.load_state`` writes of a module whose parameters cannot
# take the weights a call sends (what ``engine`` tells the student then). A student's own text
# (a class named "has another shape than") never matches it.
MISFIT_LINE = re.compile(r"\w+\.\w+ is missing or has another shape than \((\d+(, \d+)*,?)?\)")

# The reference's answers to the questions the checks asked, by exercise and question, with
# the bytes each holds: the least recently asked dropped first past ``MAX_ANSWER_BYTES`` in
# all (an honest question and its answer hold a few KB), and none larger than a 64th of it.
ANSWERS: OrderedDict[tuple[str, bytes], tuple[Any, int]] = OrderedDict()
MAX_ANSWER_BYTES = 64 << 20
_HELD = [0]

CONSTANT = "every entry of its result is the same number"
ARGUMENT = "it returned one of its arguments unchanged"
FIXED = "it returned the same result for different inputs"
ZEROS = "its result is the one it should give if every number of its input were 0"
MIXED = "its result does not move with the numbers of its input"
NO_ARRAY = "it returned no array for a valid input"
NAN = "it returned NaN for a valid input"


@dataclass(frozen=True)
class Call:
    """One call a check made of a judged function or operation: the arguments as the check
    gave them (an operation's all by name), and what came back, or the exception raised."""

    name: str
    args: tuple
    kwargs: dict
    reply: Any


class Kept(list):
    """One check's calls (``Call``), kept as the student proxy makes them, up to ``MAX_BYTES``
    of arrays in all: the key's checks keep 43 KB at most (mha's, 20 calls), and the calls
    past it (a file that answers with arrays as large as a reply may be, call after call) are
    not kept, so no submission makes the grading process hold more than that per check. The
    check is judged on those kept."""

    MAX_BYTES = 4 << 20

    def __init__(self) -> None:
        super().__init__()
        self.bytes = 0

    def keep(self, name: str, args: tuple, kwargs: dict, reply: Any) -> None:
        """Keep the call, its arguments copied (a check may change an array it has sent),
        while the budget lasts."""
        size = about_bytes((args, kwargs, reply))
        if self.bytes + size <= self.MAX_BYTES:
            self.bytes += size
            self.append(Call(name, copy.deepcopy(args), copy.deepcopy(kwargs), reply))


def about_bytes(value: Any, depth: int = 0) -> int:
    """About how many bytes ``value`` holds: its arrays' bytes, 64 for anything else."""
    if isinstance(value, np.ndarray):
        return int(value.nbytes) + 64
    if depth < 32 and isinstance(value, dict):
        return 64 + sum(about_bytes(v, depth + 1) for v in value.values())
    if depth < 32 and isinstance(value, (list, tuple)):
        return 64 + sum(about_bytes(v, depth + 1) for v in value)
    return 64


# -- one check's calls, judged ----------------------------------------------------------------
@dataclass
class Reading:
    """What one check's calls of one judged name show, place by place in the answer: where the
    reference's answers tell (``telling``), where some call of the student's moves
    (``moving``), and how the others were quiet (``quiet``: place -> reasons, in call order)."""

    telling: set[tuple] = field(default_factory=set)
    moving: set[tuple] = field(default_factory=set)
    quiet: dict[tuple, list[str]] = field(default_factory=dict)

    @property
    def judged(self) -> bool:
        """Some answer of the reference's told: the calls can show whether it uses its input."""
        return bool(self.telling)

    def ignored(self) -> str | None:
        """Why the calls ignore their input, or None: some place that tells, where no call
        moves, its reasons said of the answers given before any exception."""
        places = sorted(self.telling - self.moving, key=lambda p: (not _answered(
            self.quiet.get(p, [])), repr(p)))
        return _why(self.quiet.get(places[0], [])) if places else None

    def add(self, other: Reading) -> None:
        self.telling |= other.telling
        self.moving |= other.moving
        for place, reasons in other.quiet.items():
            self.quiet.setdefault(place, []).extend(reasons)


def _answered(reasons: list[str]) -> list[str]:
    return [r for r in reasons if r in (CONSTANT, ARGUMENT, FIXED, ZEROS)]


def _why(reasons: list[str]) -> str:
    """One reason for them all: the one they share, or what each of theirs is a case of (one
    repeated value, the answer for zeros, one answer for different inputs: none moves with the
    numbers of the input), or the most frequent; the first exception where none answered."""
    answered = _answered(reasons)
    if len(set(answered)) == 1:
        return answered[0]
    if answered and ARGUMENT not in answered:
        return MIXED
    if answered:
        return max(sorted(set(answered)), key=answered.count)
    return reasons[0] if reasons else NO_ARRAY


def silence(error: BaseException) -> str:
    """What an exception instead of an answer says."""
    from .student import NotImplementedYet

    if isinstance(error, CallTimedOut):
        return "it gave no answer within its time limit"
    if isinstance(error, NotImplementedYet):
        return "it raised NotImplementedError on a valid input"
    return f"it raised {getattr(error, 'type', type(error).__name__)} on a valid input"


def read(calls: list[Call], answer: Callable[[Call], Any], passed: bool = False) -> Reading:
    """``calls`` (one check's, of one name) next to the reference's answers to them
    (``answer``: the answer, or the exception it raised), in order: ``Reading``.

    Where the check ``passed``, an exception the student's code raised was what the check
    asked for (the reference need not check its input), and its call is left out, as a call
    the reference rejects is. A call whose every part sits where an earlier call already
    moved adds nothing, and is not answered again."""
    reading = Reading()
    if passed:
        calls = [c for c in calls if not isinstance(c.reply, BaseException)]
    gots = [silence(c.reply) if isinstance(c.reply, BaseException)
            else {place: Entries(a) for place, a in parts(c.reply)} for c in calls]
    wants: dict[int, dict[tuple, Entries] | None] = {}

    def want(index: int) -> dict[tuple, Entries] | None:
        """The reference's parts for call ``index`` (None where it rejects the call)."""
        if index not in wants:
            reply = answer(calls[index])
            wants[index] = None if isinstance(reply, BaseException) else {
                place: Entries(a) for place, a in parts(reply)}
        return wants[index]

    for index, (call, got) in enumerate(zip(calls, gots)):
        if isinstance(got, dict) and got and set(got) <= reading.moving:
            continue
        reference_parts = want(index)
        if reference_parts is None:
            continue
        if not got and reference_parts:
            got = NO_ARRAY
        question = _Question(call, answer)
        for place, reference in reference_parts.items():
            if not (tells(reference) and question.beyond(place, reference)):
                continue
            reading.telling.add(place)
            if place in reading.moving:
                continue
            why = _quiet(got, place, reference, question) or _fixed(index, place, reference,
                                                                    gots, want)
            if why:
                reading.quiet.setdefault(place, []).append(why)
            else:
                reading.moving.add(place)
    return reading


def _fixed(index: int, place: tuple, reference: Entries, gots: list,
           want: Callable[[int], dict[tuple, Entries] | None]) -> str | None:
    """``FIXED`` where the student's part at ``place`` for call ``index`` is the same (within
    ``TOLERANCE`` of how far the reference's part varies) as its part of that shape for every
    other call of the check, and the reference's parts differ for one of them at least."""
    part = gots[index][place]
    same_shape = [j for j, got in enumerate(gots) if j != index and isinstance(got, dict)
                  and place in got and got[place].shape == part.shape]
    if any(gots[j][place].kinds_differ(part)
           or gots[j][place].gap(part) > TOLERANCE * reference.spread for j in same_shape):
        return None  # it answers other inputs of its shape otherwise
    for j in same_shape:
        other = want(j)
        if other is not None and place in other and same(
                (part, gots[j][place]), (reference, other[place])) is not None:
            return FIXED
    return None  # nothing that answers otherwise to compare it with


class _Question:
    """What a call's parts are judged against besides the reference's answer, each made when
    first asked for: the parts of its arguments, and the reference's answer to the same call
    with every float set to 0 (``zeroed``), where the call has more than values to it."""

    def __init__(self, call: Call, answer: Callable[[Call], Any]):
        self.call, self._answer = call, answer
        self._arguments: list[Entries] | None = None
        self._zeros: dict[tuple, Entries] | None = None

    @property
    def arguments(self) -> list[Entries]:
        if self._arguments is None:
            self._arguments = [Entries(a) for _, a in parts([list(self.call.args),
                                                            self.call.kwargs])]
        return self._arguments

    def zeros(self, place: tuple) -> Entries | None:
        """The reference's part at ``place`` for this call with its floats zeroed; None where
        the call has nothing but values (no bool array, no float that is not finite: the
        answer for zeros is then one repeated value, which ``constant`` judges) or the
        reference rejects the zeroed call."""
        if self._zeros is None:
            self._zeros = {}
            if any(a.dtype.kind == "b" or (a.dtype.kind == "f" and not np.isfinite(a).all())
                   for _, a in parts([list(self.call.args), self.call.kwargs])):
                call = Call(self.call.name, zeroed(self.call.args), zeroed(self.call.kwargs),
                            None)
                reply = self._answer(call)
                if not isinstance(reply, BaseException):
                    self._zeros = {p: Entries(a) for p, a in parts(reply)}
        return self._zeros.get(place)

    def beyond(self, place: tuple, reference: Entries) -> bool:
        """The reference's part at ``place`` is neither one of the call's arguments as given
        nor what the zeroed call gets (where the call has more than values to it): an answer
        that is one of those cannot be told from it here."""
        if any(a.shape == reference.shape and same((reference, a), (reference, a)) is None
               for a in self.arguments):
            return False
        zeros = self.zeros(place)
        return zeros is None or same((reference, zeros), (reference, zeros)) is not None


def _quiet(got: dict[tuple, Entries] | str, place: tuple, reference: Entries,
           question: _Question) -> str | None:
    """Why the student's part at ``place`` shows nothing of its input on its own, or None."""
    if isinstance(got, str):
        return got
    part = got.get(place)
    if part is None:
        return NO_ARRAY
    if not part.finite:
        nan = part.kinds == 1
        if nan.any() and (part.shape != reference.shape or (nan & (reference.kinds != 1)).any()):
            return NAN
    if constant(part, reference):
        return CONSTANT
    if any(a.shape == part.shape and same((part, a), (reference, a))
           for a in question.arguments):
        return ARGUMENT
    zeros = question.zeros(place)
    if zeros is not None and zeros.shape == part.shape and same((part, zeros),
                                                                (reference, zeros)):
        return ZEROS
    return None


# -- an exercise's checks, judged -------------------------------------------------------------
class Judge:
    """The judgement of one exercise's checks, in one grading run: the reference's answers to
    the calls the checks made (each question answered once), and what each check's calls of
    each judged name show (``Reading``)."""

    def __init__(self, exercise: Exercise, uses: dict[str, str | None] | None = None):
        self.exercise = exercise
        self._readings: dict[tuple[str, str], Reading] = {}  # (check, judged name)
        self._calls: dict[str, list[Call]] = {}  # check -> its calls, in the order run
        self._names: dict[str, set[str]] = {}  # check -> the names it called
        self._visible: list[str] = []  # the visible checks, in the order run
        self._passed: set[str] = set()
        # judged name -> why it never uses its input over the visible checks' calls (a hidden
        # phase, in a worker and maybe a process of its own, is handed the visible one's: uses)
        self._uses: dict[str, str | None] = dict(uses or {})

    def note(self, check: str, calls: list[Call], names: set[str], *, passed: bool,
             hidden: bool = False) -> None:
        """Keep what check ``check`` called (``calls`` of the judged names, ``names`` of all),
        and whether it passed."""
        self._calls[check] = list(calls)
        self._names[check] = set(names)
        if passed:
            self._passed.add(check)
        if not hidden:
            self._visible.append(check)

    def lines(self, results: list[CheckResult]) -> dict[str, str]:
        """The line each passed check of ``results`` gets instead of its points, by check."""
        found: dict[str, str] = {}
        for result in results:
            if not result.passed:
                continue
            for judged in self.exercise.judged:
                why = self._judged(result.name, judged)
                if why:
                    found[result.name] = NO_POINTS.format(label=judged.label, why=why)
                    break
        return found

    def withhold(self, results: list[CheckResult]) -> None:
        """Take their points from the passed checks of ``results`` whose calls ignore their
        input (``lines``)."""
        for result in results:
            line = self.lines([result]).get(result.name)
            if line:
                result.passed, result.points = False, 0
                result.feedback = f"Property: {result.prop}\n{line}"

    def _judged(self, check: str, judged: Judged) -> str | None:
        """Why check ``check``'s calls of ``judged`` ignore their input: judged on its own
        calls, or where they cannot tell, on every check's (``_used``)."""
        if judged.call in self._names.get(check, ()):
            reading = self.reading(check, judged)
            if reading.judged:
                return reading.ignored()
        if self._names.get(check, set()) & set(judged.covers):
            return self._used(judged)
        return None

    def reading(self, check: str, judged: Judged) -> Reading:
        key = (check, judged.call)
        if key not in self._readings:
            calls = [c for c in self._calls.get(check, []) if c.name == judged.call]
            self._readings[key] = read(
                calls, lambda call: self.answer(judged, call), check in self._passed)
        return self._readings[key]

    def _used(self, judged: Judged) -> str | None:
        """Why ``judged`` ignores its input on every visible check's calls that tell, the
        first checks first (None as soon as one shows it used; None where none tells)."""
        if judged.call not in self._uses:
            everything = Reading()
            for check in self._visible:
                reading = self.reading(check, judged)
                if reading.judged and reading.ignored() is None:
                    self._uses[judged.call] = None
                    break
                everything.add(reading)
            else:
                self._uses[judged.call] = everything.ignored() if everything.judged else None
        return self._uses[judged.call]

    def uses(self) -> dict[str, str | None]:
        """Why each judged name ignores its input over the visible checks' calls (None: it
        uses it, or nothing tells), for the hidden phase's judge."""
        return {judged.call: self._used(judged) for judged in self.exercise.judged}

    def answer(self, judged: Judged, call: Call) -> Any:
        """The reference's answer to ``call``, or the exception it raised: computed once for
        equal questions in this process and the graders forked from it (every submission's
        checks ask the same questions, and a batch grades the key before it forks)."""
        try:
            question = (self.exercise.name, pickle.dumps((call.name, call.args, call.kwargs),
                                                         protocol=5))
        except Exception:
            question = None
        if question is not None and question in ANSWERS:
            ANSWERS.move_to_end(question)
            return ANSWERS[question][0]
        args, kwargs = copy.deepcopy((call.args, call.kwargs))
        try:
            answer: Any = judged.reference(*args, **kwargs)
        except Exception as error:
            answer = error.with_traceback(None)
        size = None if question is None else len(question[1]) + about_bytes(answer)
        if size is not None and size <= MAX_ANSWER_BYTES // 64:
            ANSWERS[question] = (answer, size)
            _HELD[0] += size
            while _HELD[0] > MAX_ANSWER_BYTES:
                _HELD[0] -= ANSWERS.popitem(last=False)[1][1]
        return answer
