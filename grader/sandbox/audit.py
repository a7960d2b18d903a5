"""The worker's audit hook (PEP 578): at run time, what the source rule refuses at read time.

The source rule (``grader.core.delegation``) reads a submission's text, and what a string holds
it cannot see: ``numpy.testing.measure(text)`` compiles and runs ``text`` in the caller's
namespace, and a file that keeps the rule can hand it anything. So each student worker, after
its operations are compiled and before the student's module is imported, calls ``arm``, which
installs a hook that Python calls at every auditing event of the process from then on. The
hook admits what an honest worker raises, measured by running the answer key and the bug zoo
(correct and wrong entries) with a hook that logged every event, and ends the worker on
anything else:

- **The submission's own import.** Reading a ``.py`` file of the worker's view (and looking
  for its ``__pycache__`` file, which the view never holds), compiling exactly that file's
  bytes under its name, executing code whose file is one of them, listing a folder of the
  view, importing a module of the exercise's list (``Rule.imports``) or of the submission.
  Bytecode is neither written nor, since ``marshal`` is refused, read.
- **A library's own import.** numpy and torch import parts of themselves on first use (a
  first error on the meta device imports ``torch._dynamo``, SymPy and 800 more modules). An
  event raised where every frame between it and the nearest import is the standard library's
  or an installed package's (never the submission's, nor code compiled at run time but by
  such an import), and that import is of a module of the exercise's list (or a module such an
  import imports in turn), never loaded before (``del sys.modules[...]`` and a new import
  would re-create what ``operators`` replaced), may be one of the events such imports were
  measured to raise (``LIBRARY_IMPORT``); the code it compiles or runs from a library's file
  must be the file of the module imported (a finder of the student's could hand the import
  system ``torch/nn/functional.py`` under a new name).
- **Classes that write their own methods.** ``@dataclass``, ``namedtuple`` and
  ``typing.NamedTuple`` compile the methods they make from text, and typing compiles a string
  annotation (never runs it here): admitted from their own code, for fields named by plain
  identifiers (``class_factories``).
- **Reading frames for a traceback.** ``traceback``'s own functions may read the frames they
  turn into text (the worker's error report, torch's anomaly mode), and so may the worker's
  ``readers``; ``linecache`` may read a source file of the standard library or a package (to
  show a warning's line). ``id()`` and ``array.array`` (``HARMLESS``).

Everything else (compiling or running a string, ``marshal``, a code or function object made by
hand, opening any other file, an import outside the list, ``ctypes``, a process, a socket,
frames, a function's code, ``gc``'s object lists, tracing, another audit hook) ends the
worker at once with the exit code of its kind (``REFUSED``), which the grading process reads
from the kernel, as it reads torch's attention guard's (``operators``): the exercise scores 0
with the kind's sentence. No exception is raised, so no ``try`` of the student's can swallow
the refusal.

PEP 578 says an audit hook is no sandbox on its own: code that raises no event (a module's
attribute changed, a library's native code that opens a file by its path, as
``torch.from_file`` does) is not seen, and the frames a traceback reads could
be handed out. This is the second layer, under the source rule and over the kernel's
(``bounds``); what it guarantees rests on the events above. The hook holds its state
in its closure, never looks up a global or a builtin of its own (the student's code may change
them) nor calls a method of a student's object, and is the only reference to that closure:
nothing the student's code can reach changes what it admits. Standard library only: the
zygote ships this file as source.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from types import CodeType

# The kinds of refusal: the exit code a refused worker ends with, the event names (a prefix
# ends with "."; the first kind that names an event is its kind; "interpreter" takes the
# rest) and what the report says it tried to do.
KINDS = (
    (87, "code", ("compile", "exec", "marshal.", "code.", "function.", "cpython.", "pickle."),
     "compile code from a string (exec, eval or compile)"),
    (88, "import", ("import",), "import a module that is not on the exercise's list"),
    (89, "process", ("os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
                     "os.forkpty", "os.kill", "os.killpg", "subprocess.", "pty.",
                     "signal.pthread_kill", "_posixsubprocess."),
     "start or signal a process"),
    (90, "native", ("ctypes.", "_ctypes."), "load or call native code (ctypes)"),
    (91, "network", ("socket.", "http.", "urllib.", "ftplib.", "smtplib.", "poplib.",
                     "imaplib.", "nntplib.", "telnetlib.", "webbrowser."),
     "use the network"),
    (92, "files", ("open", "os.", "shutil.", "glob.", "tempfile.", "mmap.", "fcntl.",
                   "builtins.input", "sqlite3.", "syslog.", "resource."),
     "open, list or change files (or the environment)"),
    (93, "interpreter", (), "reach into the interpreter (frames, code objects, the garbage "
                            "collector, tracing, audit hooks)"),
)
REFUSED = {code: f"at run time it tried to {what}, which an exercise may not do"
           for code, _, _, what in KINDS}
# What honest work raises anywhere, each harmless: id(), and an array.array.
HARMLESS = frozenset({"builtins.id", "array.__new__"})
# What the imports numpy and torch make of their own modules raise (measured on the zoo: the
# first error on the meta device imports torch._dynamo, SymPy and mpmath), admitted only
# inside such an import (``arm``): its modules compiled or read from bytecode and run, its
# package files read, the classes it makes (``dataclasses``, ``typing``), ``tempfile``'s probe
# of /tmp, the environment variables and cache folders it sets.
LIBRARY_IMPORT = frozenset({
    "import", "open", "os.listdir", "compile", "exec", "marshal.loads", "object.__getattr__",
    "object.__setattr__", "sys._getframe", "os.mkdir", "os.remove", "os.putenv"})
READ_MODES = frozenset({"r", "rb"})
# What ``@dataclass`` and ``namedtuple`` raise as they make a class (``class_factories``).
CLASS_FACTORY = frozenset({"compile", "exec", "sys._getframe", "object.__getattr__",
                           "object.__setattr__"})


def own_files(folder: str) -> tuple[dict[str, bytes], frozenset[str], frozenset[str]]:
    """The submission's files in the worker's view ``folder``: each ``.py`` file's bytes by
    the path the importer opens it by, the paths of their ``__pycache__`` files (looked for,
    never there) and the view's folders."""
    import importlib.util

    files: dict[str, bytes] = {}
    folders = {folder}
    for root, names, found in os.walk(folder):
        folders.update(os.path.join(root, n) for n in names)
        for name in found:
            if name.endswith(".py"):
                path = os.path.join(root, name)
                with open(path, "rb") as handle:
                    files[path] = handle.read()
    cached = frozenset(importlib.util.cache_from_source(p) for p in files)
    return files, cached, frozenset(folders)


def library_folders(modules: Iterable[str]) -> tuple[str, ...]:
    """The folders whose files are a library's: the standard library's and the folder each of
    ``modules`` (loaded packages) is installed in."""
    folders = {os.path.dirname(os.__file__) + os.sep}
    for name in modules:
        file = getattr(sys.modules.get(name), "__file__", None)
        if isinstance(file, str) and os.path.basename(file) == "__init__.py":
            folders.add(os.path.dirname(os.path.dirname(file)) + os.sep)
    return tuple(sorted(folders))


def code_objects(*owners: object) -> tuple[frozenset[int], tuple[CodeType, ...]]:
    """Every code object of the functions and methods of ``owners`` (modules), nested ones
    included, and their ids: code objects compare equal by content, not by file, so a
    student's copy of a function would be "in" a set of them. Who holds the ids holds the
    objects too, so that no id is reused."""
    import inspect

    found: set[CodeType] = set()
    todo: list[CodeType] = []
    for owner in owners:
        for value in vars(owner).values():
            members = vars(value).values() if inspect.isclass(value) else (value,)
            for member in members:
                function = getattr(member, "__func__", member)
                if inspect.isfunction(function):
                    todo.append(function.__code__)
    while todo:
        code = todo.pop()
        if code not in found:
            found.add(code)
            todo += [c for c in code.co_consts if isinstance(c, CodeType)]
    return frozenset(map(id, found)), tuple(found)


def class_factories():
    """A check of the events ``@dataclass`` and ``namedtuple`` (``typing.NamedTuple`` too) raise
    as they make a class of the student's: the methods they write as text, compiled and run,
    and what they read and set on the way. Admitted where the event comes from the factory's
    own code, with nothing between it and the factory's entry but its own code (and
    ``inspect``'s, which a dataclass's docstring is made with), and only for a class whose field
    names are plain identifiers: a field name is the one part of that text a student chooses
    (a ``str`` subclass, or ``__annotations__`` written by hand, could make it code)."""
    import collections
    import dataclasses
    import inspect
    import keyword
    import typing

    process_class = dataclasses._process_class.__code__  # type: ignore[attr-defined]
    create_fn = dataclasses._create_fn.__code__  # type: ignore[attr-defined]
    namedtuple = collections.namedtuple.__code__
    named_tuple_class = typing.NamedTupleMeta.__new__.__code__  # class T(typing.NamedTuple)
    forward_reference = typing.ForwardRef.__init__.__code__  # compiled, run only to evaluate
    factory, kept = code_objects(dataclasses, inspect)
    settings = vars(dataclasses)  # where _create_fn's text finds __post_init__'s name
    field_, name_of = dataclasses.Field, vars(dataclasses.Field)["name"].__get__
    keywords = frozenset(keyword.kwlist)
    type_, str_, dict_, tuple_, id_ = type, str, dict, tuple, id

    def plain(name: object) -> bool:
        return (type_(name) is str_ and name.isascii() and name.isidentifier()
                and name not in keywords)

    def dataclass_fields(frame) -> bool:
        """From ``frame`` up to ``_process_class``, dataclasses' or inspect's code only, and
        the class's fields named by plain identifiers."""
        if not kept:  # (held here, in the closure, with the ids)
            return False
        while frame is not None:
            code = frame.f_code
            if code is process_class:
                fields = frame.f_locals.get("fields")
                if type_(fields) is not dict_:
                    return False
                for name, field in fields.items():
                    if not plain(name) or type_(field) is not field_ \
                            or name_of(field, field_) is not name:
                        return False
                post_init = settings.get("_POST_INIT_NAME")
                return type_(post_init) is str_ and post_init == "__post_init__"
            if id_(code) not in factory:
                return False
            frame = frame.f_back
        return False

    def admitted(event: str, first: object, second: object, frame) -> bool:
        code = frame.f_code
        named = type_(second) is str_  # an attribute's name, for the two attribute events
        if code is forward_reference:  # a string annotation: its evaluation (exec) is refused
            return event == "compile"
        if code is named_tuple_class:  # the bases and name of the class namedtuple just made
            return event == "object.__setattr__" and named \
                and second in ("__bases__", "__qualname__") \
                and first is frame.f_locals.get("nm_tpl")
        if code is namedtuple:
            names = frame.f_locals.get("field_names")
            if type_(names) is not tuple_ or not plain(frame.f_locals.get("typename")):
                return False
            for name in names:
                if not plain(name):
                    return False
            return event in ("compile", "exec", "sys._getframe") or (
                event == "object.__setattr__" and named and second in ("__defaults__",
                                                                       "__module__"))
        if event in ("compile", "exec"):
            return code is create_fn and dataclass_fields(frame)
        if event == "object.__getattr__":
            return named and second in ("__code__", "__defaults__", "__kwdefaults__") \
                and id_(code) in factory and dataclass_fields(frame)
        if event == "object.__setattr__":
            return named and second in ("__doc__", "__qualname__") and id_(code) in factory \
                and dataclass_fields(frame)
        return False

    return admitted


def arm(folder: str, package: str, imports: Iterable[str],
        readers: Iterable[CodeType] = ()) -> None:
    """Install the hook: from now on this process may do only what an honest worker does.

    ``folder``: the worker's view of the submission (its files are read now); ``package``: the
    name its files load under; ``imports``: the modules the exercise may import (with their
    submodules); ``readers``: code objects of the worker's own that may read a traceback's
    frames (and return no frame)."""
    import _thread
    import gc
    import importlib._bootstrap
    import tokenize
    import traceback

    sys.dont_write_bytecode = True
    own, cached, folders = own_files(folder)
    view = folder.rstrip(os.sep) + os.sep
    own_tops = frozenset({package} | {os.path.relpath(p, folder).split(os.sep)[0]
                                      .removesuffix(".py") for p in own})
    libraries = frozenset(imports) - own_tops
    library = library_folders(libraries)
    frozen = (*library, "<frozen ")  # the frames of a library's code
    preloaded = frozenset(sys.modules)
    find_and_load = importlib._bootstrap._find_and_load.__code__
    walk_tb = traceback._walk_tb_with_full_positions.__code__
    extract = traceback.StackSummary._extract_from_extended_frame_gen.__func__.__code__
    frame_readers = (extract, *readers)  # by identity: code objects compare by content
    extract_stack = traceback.extract_stack.__code__
    linecache_open = tokenize.open.__code__
    kinds = tuple((name, code) for code, _, names, _ in KINDS for name in names)
    made_by_a_class_factory = class_factories()
    # Everything the hook uses is bound here, in its closure: it never looks up a global or a
    # builtin (the student's code may replace ``builtins.type`` or this module's constants).
    getframe, ident, exit_, write = sys._getframe, _thread.get_ident, os._exit, os.write
    type_, str_, bytes_, code_, len_ = type, str, bytes, CodeType, len
    sep, init = os.sep, os.sep + "__init__.py"
    harmless, import_events, read_modes = HARMLESS, LIBRARY_IMPORT, READ_MODES
    factory_events = CLASS_FACTORY
    collecting, stop_collecting, collect = gc.isenabled, gc.disable, gc.enable
    busy: set[int] = set()  # the threads in the hook: their own frame reads are the hook's
    made: set[str] = set()  # the files of code a library's import compiled (a template's)

    def kind(event: str) -> int:
        for name, code in kinds:
            if event == name or (name.endswith(".") and event.startswith(name)):
                return code
        return 93

    def library_import(frame) -> str | None:
        """The module being imported, where every frame from ``frame`` up to the nearest import
        is a library's and that import is of the exercise's list (or made, the same way, by
        one that is); None elsewhere."""
        innermost = None
        while frame is not None:
            code = frame.f_code
            if code is find_and_load:
                name = frame.f_locals.get("name")
                if type_(name) is not str_ or name in preloaded:
                    return None
                innermost = innermost or name
                top = name.partition(".")[0]
                if top in libraries:
                    return innermost
                if top in own_tops:
                    return None
            else:
                filename = code.co_filename
                if (type_(filename) is not str_ or filename.startswith(view)
                        or not (filename.startswith(frozen) or filename in made)):
                    return None
            frame = frame.f_back
        return None

    def its_own(filename: object, name: str) -> bool:
        """``filename`` is no library's file, or the file of module ``name`` (a loader handed
        another module's file runs that file again under a new name)."""
        if type_(filename) is not str_ or not filename.startswith(library):
            return True
        stem = name.replace(".", sep)
        for folder in library:
            if filename.removeprefix(folder) in (stem + ".py", stem + init):
                return True
        return False

    def admitted(event: str, args: tuple, frame) -> bool:
        first = args[0] if args else None
        second = args[1] if len_(args) > 1 else None
        if event == "import":
            if type_(first) is not str_ or first in preloaded:
                return False  # a module loaded before, loaded again
            top = first.partition(".")[0]
            if top in libraries or top in own_tops:
                return True
        elif event == "open" and type_(first) is str_ and type_(second) is str_ \
                and second in read_modes:
            if first in own or first in cached:
                return True
            if (frame.f_code is linecache_open and first.startswith(library)
                    and not first.startswith(view) and "/../" not in first and "/./" not in first):
                return True  # a library's source line, for a warning or a traceback
        elif event == "compile" and type_(first) is bytes_ and type_(second) is str_ \
                and own.get(second) == first:
            return True
        elif event == "exec" and type_(first) is code_ and first.co_filename in own:
            return True
        elif event == "os.listdir" and type_(first) is str_ and first in folders:
            return True
        elif event == "object.__getattr__" and type_(second) is str_ \
                and second in ("tb_frame", "f_code"):
            reader = frame.f_code
            for trusted in frame_readers:
                if reader is trusted:
                    return True
            caller = frame.f_back
            if reader is walk_tb and caller is not None and caller.f_code is extract:
                return True
        elif event == "sys._getframe" and frame.f_code is extract_stack:
            return True
        if event in factory_events and made_by_a_class_factory(event, first, second, frame):
            return True
        if event not in import_events:
            return False
        name = library_import(frame)
        if name is None:
            return False
        if event == "compile":
            if not its_own(second, name):
                return False
            if type_(second) is str_:
                made.add(second)  # its frames are the library's too
        if event == "exec" and type_(first) is code_ and not its_own(first.co_filename, name):
            return False
        return True

    def hook(event: str, args: tuple) -> None:
        if event in harmless:
            return
        code = 93
        try:
            me = ident()
            if me in busy:
                if event == "sys._getframe" or event == "object.__getattr__":
                    return  # the hook's own reading of frames
            else:
                busy.add(me)
                collected = collecting()
                stop_collecting()  # no finalizer of the student's runs inside the hook
                try:
                    if admitted(event, args, getframe(1)):
                        return
                finally:
                    busy.discard(me)
                    if collected:
                        collect()
            code = kind(event)
        except BaseException:  # a question the hook cannot answer is a refusal too
            try:
                code = kind(event)
            except BaseException:
                pass
        try:  # for the instructor's view of the output; fd 2 may be closed by now
            write(2, b"audit: refused " + event.encode("ascii", "replace") + b"\n")
        finally:
            exit_(code)

    sys.addaudithook(hook)
