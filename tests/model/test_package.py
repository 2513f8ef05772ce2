"""``from mlcopilot.model import X`` works for every domain type, whichever module defines it."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil

import pytest

import mlcopilot.model as model

SUBMODULES = sorted(m.name for m in pkgutil.iter_modules(model.__path__))


def _defined(name: str) -> set[str]:
    """The public names a submodule defines at its top level (classes, functions, constants)."""
    tree = ast.parse(inspect.getsource(importlib.import_module(f"mlcopilot.model.{name}")))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if not n.startswith("_")}


def test_the_package_is_split_by_what_the_types_describe() -> None:
    assert SUBMODULES == [
        "catalog",
        "chosen_baselines",
        "findings",
        "incident_heads",
        "notify",
        "owners",
        "profiles",
        "schema_digests",
        "writes",
    ]


@pytest.mark.parametrize("name", SUBMODULES)
def test_every_public_name_is_reexported_as_itself(name: str) -> None:
    module = importlib.import_module(f"mlcopilot.model.{name}")
    defined = _defined(name)
    assert defined
    missing = sorted(defined - set(model.__all__))
    assert not missing, f"mlcopilot.model does not re-export {missing} from {name}"
    for attr in defined:
        assert getattr(model, attr) is getattr(module, attr)


def test_all_names_each_thing_once_and_only_what_exists() -> None:
    assert len(model.__all__) == len(set(model.__all__))
    assert all(hasattr(model, name) for name in model.__all__)
