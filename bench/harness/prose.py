"""The text of RESULTS.md, kept in RESULTS.in.md beside this file and filled
here with a run's figures."""

from __future__ import annotations

import functools
import os
import re
import string
from typing import Dict, List, Union

TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS.in.md")
MARKER = re.compile(r"^<!-- ([a-z0-9-]+) -->$")
ALONE = re.compile(r"^\$\{(\w+)\}$")
# Lines that stand on their own; any other line continues a wrapped paragraph or bullet.
BLOCK_START = ("#", "|", "- ")

Value = Union[str, List[str]]


@functools.lru_cache(maxsize=None)
def sections() -> Dict[str, List[str]]:
    """Every section of the template, its wrapped paragraphs joined into one line each."""
    out: Dict[str, List[str]] = {}
    lines: List[str] = []
    for raw in open(TEMPLATE, encoding="utf-8").read().splitlines():
        m = MARKER.match(raw)
        if m:
            lines = out.setdefault(m.group(1), [])
            continue
        line = raw.strip()
        joins = bool(line and lines and lines[-1] and not line.startswith(BLOCK_START)
                     and not ALONE.match(line) and not lines[-1].startswith(("#", "|"))
                     and not ALONE.match(lines[-1]))
        if joins:
            lines[-1] += " " + line
        else:
            lines.append(line)
    # Text before the first marker (the template's own comment) is in no section.
    return {name: strip_blank(body) for name, body in out.items()}


def strip_blank(lines: List[str]) -> List[str]:
    while lines and not lines[0]:
        lines = lines[1:]
    while lines and not lines[-1]:
        lines = lines[:-1]
    return lines


def section(name: str, **values: Value) -> List[str]:
    """The lines of a section with `values` filled in; a value alone on its line
    may be a list of lines (table rows), and none drops that line."""
    out: List[str] = []
    for line in sections()[name]:
        alone = ALONE.match(line)
        if alone and isinstance(values.get(alone.group(1)), list):
            out.extend(values[alone.group(1)])  # type: ignore[arg-type]
        else:
            out.append(string.Template(line).substitute(values))
    return out


def sentence(name: str, **values: Value) -> str:
    """A section of one line (a fragment the report joins into other text)."""
    lines = section(name, **values)
    assert len(lines) == 1, f"{name}: {len(lines)} lines"
    return lines[0]
