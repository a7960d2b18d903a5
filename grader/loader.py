"""Load one exercise file of a submission as a module of a package named by the kit.

A submission folder may be called anything (``jane.doe@uni``, ``s-123``) and may or may not
hold an ``__init__.py``; it is never executed, so one broken file cannot break another
exercise. The other exercises' modules are replaced by ``substitutes`` (the references), so a
sibling import such as ``from .softmax import softmax`` resolves to them.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path


def load_exercise(
    folder: Path, exercise: str, package: str, substitutes: dict[str, types.ModuleType]
) -> types.ModuleType:
    folder = Path(folder)
    root = types.ModuleType(package)
    root.__path__ = [str(folder)]  # type: ignore[attr-defined]
    root.__package__ = package
    sys.modules[package] = root
    for name, module in substitutes.items():
        sys.modules[f"{package}.{name}"] = module
        setattr(root, name, module)
        sys.modules.setdefault(name, module)  # a bare `import softmax` gets the same
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))  # the submission's own helper modules, if any
    path = folder / f"{exercise}.py"
    spec = importlib.util.spec_from_file_location(f"{package}.{exercise}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    setattr(root, exercise, module)
    return module
