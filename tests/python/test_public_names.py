"""The package's public names: every name the reference documents imports
from `rlock`, every exported name is documented, and each still says it is
`rlock`'s (the package is one module per concept inside; what users see, in
reprs, tracebacks, pickles and type errors, is `rlock.Name`)."""

from __future__ import annotations

import importlib
import os
import pickle
import re
from typing import Set

import pytest

import rlock

DOCS = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "python.md")


def documented() -> Set[str]:
    """`rlock.Name` and `from rlock import Name` in the Python samples, and
    capitalised `rlock.Name` anywhere (lower-case ones in prose are also span
    and logger names, such as `rlock.acquire`)."""
    with open(DOCS, encoding="utf-8") as f:
        text = f.read()
    names = set(re.findall(r"`rlock\.([A-Z][A-Za-z0-9_]*)", text))
    for sample in re.findall(r"```python\n(.*?)```", text, re.S):
        names |= set(re.findall(r"\brlock\.([A-Za-z_][A-Za-z0-9_]*)", sample))
        for imported in re.findall(r"from rlock import \(?([^)\n]+)", sample):
            names |= {n.split(" as ")[0].strip() for n in imported.split(",") if n.strip()}
    return names


def test_every_documented_name_is_exported() -> None:
    names = documented()
    assert {"Client", "AsyncClient", "lock", "cached", "LockTimeout"} <= names, "the reader finds names"
    missing = sorted(n for n in names if n not in rlock.__all__)
    assert not missing, f"documented but not exported: {missing}"


def test_every_exported_name_is_documented_and_imports() -> None:
    with open(DOCS, encoding="utf-8") as f:
        text = f.read()
    for name in rlock.__all__:
        assert re.search(rf"\b{re.escape(name)}\b", text), f"{name} is not in docs/python.md"
        assert getattr(importlib.import_module("rlock"), name) is not None


@pytest.mark.parametrize("name", [n for n in rlock.__all__ if isinstance(getattr(rlock, n), type)])
def test_an_exported_class_says_it_is_rlocks(name: str) -> None:
    assert repr(getattr(rlock, name)) == f"<class 'rlock.{name}'>"


def test_an_error_pickles_as_the_same_class() -> None:
    err = rlock.LockTimeout("lock 'x' was not acquired")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is rlock.LockTimeout
    assert str(back) == str(err)
