"""Every link of the README, CONTRIBUTING.md and docs/ leads somewhere in this
checkout: a file or folder of the repository, linked relatively, and with
`#anchor` a heading of that page. A link to the project's own home (`HOME`,
as Cargo.toml names it) fails: it would be checked against what is published
there, not against this checkout. Links to other sites are not fetched.
The package manifests' URLs all lie under that home and name files that exist."""

from __future__ import annotations

import re
from pathlib import Path
from typing import List, Optional

import pytest

from pages import HOME, ROOT, Link, all_pages, read


def _bare(url: str) -> str:
    """A URL without its scheme, `www.`, case and trailing slash, to compare."""
    url = url.lower().partition("://")[2]
    return url[4:].rstrip("/") if url.startswith("www.") else url.rstrip("/")


def is_external(link: Link, home: str = HOME) -> bool:
    """A link to another site (not fetched: there may be no network)."""
    target = link.target.partition("#")[0]
    if target.startswith("mailto:"):
        return True
    if "://" not in target:
        return False
    here, there = _bare(target), _bare(home)
    return not (here == there or here.startswith(there + "/"))


def problem(link: Link, root: Path = ROOT, home: str = HOME) -> Optional[str]:
    """What is wrong with a link of a page under `root`, or None when it
    leads to a file of `root` (and to a heading of it, with an anchor) or to
    another site."""
    where = f"{link.page.relative_to(root)}:{link.line}: {link.target}"
    if is_external(link, home):
        return None
    target, _, anchor = link.target.partition("#")
    if "://" in target:
        return f"{where} links the project's home ({home}); link the file relatively"
    path = (link.page.parent / target).resolve() if target else link.page
    if not (path == root or root in path.parents):
        return f"{where} leaves the repository"
    if not path.exists():
        return f"{where} names no file"
    if anchor:
        if path.suffix != ".md":
            return f"{where}: an anchor into a page that is not Markdown"
        if anchor not in read(path).anchors:
            return f"{where}: {path.relative_to(root)} has no heading #{anchor}"
    return None


def links() -> List[Link]:
    """The links that must resolve in the checkout (other sites would need
    the network)."""
    return [link for page in all_pages() for link in read(page).links if not is_external(link)]


@pytest.mark.parametrize("link", links(), ids=lambda link: f"{link.page.relative_to(ROOT)}:{link.line}:{link.target}")
def test_a_link_leads_to_a_file_of_the_repository_and_a_heading_of_it(link: Link) -> None:
    assert problem(link) is None, problem(link)


def metadata() -> List[Path]:
    """The package manifests, whose URLs the registries show beside the README."""
    return [
        *sorted(ROOT.glob("*/Cargo.toml")), ROOT / "Cargo.toml", ROOT / "pyproject.toml",
        ROOT / "package.json", *sorted(ROOT.glob("npm/*/package.json")),
    ]


@pytest.mark.parametrize("manifest", metadata(), ids=lambda path: str(path.relative_to(ROOT)))
def test_a_package_names_the_home_cargo_toml_names_and_files_that_exist(manifest: Path) -> None:
    for url in re.findall(r'"(https?://[^"]+)"', manifest.read_text(encoding="utf-8")):
        assert url == HOME or url.startswith(HOME + "/"), f"{manifest.relative_to(ROOT)}: {url} is not under {HOME}"
        path = re.match(r"(?:blob|tree)/[^/]+/(.*)", url[len(HOME) + 1:])
        if path:
            assert (ROOT / path[1]).exists(), f"{manifest.relative_to(ROOT)}: {url} names no file of the checkout"


def test_the_check_refuses_a_broken_relative_link_and_a_link_to_the_projects_home(tmp_path: Path) -> None:
    tmp_path = tmp_path.resolve()
    home = "https://example.org/owner/project"
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text("# Guide\n\n## Install it\n", encoding="utf-8")
    readme = tmp_path / "README.md"
    readme.write_text("\n".join([
        "[fine](docs/guide.md#install-it) and [here](#top) and [elsewhere](https://example.com/x)",
        "# Top",
        "[no file](docs/missing.md)",
        "[no heading](docs/guide.md#uninstall-it)",
        "[out](../outside.md)",
        f"[home page]({home}/blob/main/docs/guide.md#install-it)",
        f"[home too]({home.replace('https://', 'http://www.')}/)",
        f"bare: {home}/issues.",
        "`" + home + "` in code is not a link",
        "```sh",
        f"git clone {home}",
        "```",
    ]), encoding="utf-8")
    found = {link.target: problem(link, tmp_path, home) for link in read(readme).links}
    assert found == {
        "docs/guide.md#install-it": None,
        "#top": None,
        "https://example.com/x": None,
        "docs/missing.md": "README.md:3: docs/missing.md names no file",
        "docs/guide.md#uninstall-it": "README.md:4: docs/guide.md#uninstall-it: docs/guide.md has no heading #uninstall-it",
        "../outside.md": "README.md:5: ../outside.md leaves the repository",
        f"{home}/blob/main/docs/guide.md#install-it":
            f"README.md:6: {home}/blob/main/docs/guide.md#install-it links the project's home ({home});"
            " link the file relatively",
        "http://www.example.org/owner/project/":
            f"README.md:7: http://www.example.org/owner/project/ links the project's home ({home});"
            " link the file relatively",
        f"{home}/issues":
            f"README.md:8: {home}/issues links the project's home ({home}); link the file relatively",
    }
