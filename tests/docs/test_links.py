"""Every link of the README, CONTRIBUTING.md and docs/ leads somewhere: a
file or folder of the repository and, with `#anchor`, a heading of that
page."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Tuple

import pytest

from pages import BRANCH_PATHS, REPOSITORY, ROOT, Link, all_pages, name, read


def local_target(link: Link) -> Optional[Tuple[Path, str]]:
    """The file a link names and its anchor ('' when none); None for a link
    outside the repository."""
    target, _, anchor = link.target.partition("#")
    if target.startswith(REPOSITORY):
        rest = target[len(REPOSITORY):]
        branch = next((b for b in BRANCH_PATHS if rest.startswith(b)), "")
        return ROOT / rest[len(branch):], anchor
    if "://" in target or target.startswith("mailto:"):
        return None
    if not target:
        return link.page, anchor
    return (link.page.parent / target).resolve(), anchor


def links() -> List[Link]:
    """The links into the repository (others would need the network)."""
    return [link for page in all_pages() for link in read(page).links if local_target(link) is not None]


@pytest.mark.parametrize("link", links(), ids=lambda link: f"{name(link.page)}:{link.line}:{link.target}")
def test_a_link_leads_to_a_file_of_the_repository_and_a_heading_of_it(link: Link) -> None:
    local = local_target(link)
    assert local is not None
    path, anchor = local
    assert ROOT in path.parents or path == ROOT, f"{link.target} leaves the repository"
    assert path.exists(), f"{name(link.page)}:{link.line}: {link.target} names no file"
    if anchor:
        assert path.suffix == ".md", f"{link.target}: an anchor into a page that is not Markdown"
        anchors = read(path).anchors
        assert anchor in anchors, f"{name(link.page)}:{link.line}: {name(path)} has no heading #{anchor}"
