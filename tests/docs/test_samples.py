"""Every fenced sample of the README, CONTRIBUTING.md and docs/ runs as pasted
against a real redis-server and prints what the page shows it printing; a
sample marked `<!-- fragment -->` at least parses."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, List

import pytest

import samples
from pages import FRAGMENT, OUTPUT, ROOT, Block, all_pages, name, read

RUNS = {"python", "js", "mjs", "go", "console", "sh"}
# Shown, not run: ```text is output or prose; ```toml is parsed; ```rust is
# compiled by `cargo test -p rlock-core --doc` (see the last test).
SHOWN = {"text", "toml", "rust"}


def blocks() -> List[Block]:
    return [b for page in all_pages() for b in read(page).blocks if b.marker != OUTPUT]


def run_blocks() -> List[Block]:
    return [b for b in blocks() if b.lang in RUNS and b.marker != FRAGMENT
            and (b.lang in ("python", "js", "mjs", "go") or samples.calls_rlock(b))]


def fragments() -> List[Block]:
    return [b for b in blocks() if b.marker == FRAGMENT]


def clone_commands() -> List[Block]:
    """Shell blocks that build, install or test rather than lock: parsed, and
    what they name must exist."""
    return [b for b in blocks() if b.lang == "sh" and b.marker != FRAGMENT and not samples.calls_rlock(b)]


def block_id(block: Block) -> str:
    return block.id


def test_every_code_block_has_a_language_this_suite_checks() -> None:
    unknown = [b.id for b in blocks() if b.lang not in RUNS | SHOWN]
    assert not unknown, f"code blocks of no language this suite runs or shows: {unknown}"


def test_every_output_block_is_text_that_follows_a_sample() -> None:
    for page in all_pages():
        for block in read(page).blocks:
            if block.marker == OUTPUT:
                assert block.lang == "text", f"{block.id}: an output block is ```text"


@pytest.mark.parametrize("block", run_blocks(), ids=block_id)
def test_a_sample_runs_as_pasted_and_prints_what_the_page_shows(
    block: Block, sample_env: Dict[str, str], node_project: Path, tmp_path: Path
) -> None:
    if block.lang == "python":
        printed = samples.python(block, tmp_path, sample_env)
    elif block.lang in ("js", "mjs"):
        printed = samples.javascript(block, node_project, tmp_path, sample_env)
    elif block.lang == "go":
        printed = samples.go(block, tmp_path, sample_env)
    elif block.lang == "console":
        printed = samples.console(block, tmp_path, sample_env)
    else:
        printed = samples.shell(block, tmp_path, sample_env)
    shown = samples.console_output(block.code) if block.lang == "console" else (
        block.output.code if block.output else None)
    if shown is not None:
        assert samples.same_output(shown, printed), (
            f"{block.id} printed\n{printed}\nwhere the page shows\n{shown}")


def test_every_fragment_parses(tmp_path: Path) -> None:
    # One test over all of them: the pages may hold none, and an empty
    # parameter set would show as a skip.
    for block in fragments():
        samples.syntax(block, tmp_path)


@pytest.mark.parametrize("block", clone_commands(), ids=block_id)
def test_a_build_command_parses_and_names_what_exists(block: Block, tmp_path: Path) -> None:
    samples.syntax(block, tmp_path)
    targets, scripts = samples.make_targets(), samples.npm_scripts()
    for kind, what in samples.commands_for_a_clone(block):
        if kind == "make":
            assert what in targets, f"{block.id}: the Makefile has no target {what!r}"
        elif kind == "npm run":
            assert what in scripts, f"{block.id}: package.json has no script {what!r}"
        else:
            assert (ROOT / what).exists(), f"{block.id}: {what} does not exist"


@pytest.mark.parametrize("block", [b for b in blocks() if b.lang == "toml"], ids=block_id)
def test_a_toml_sample_parses(block: Block) -> None:
    tomllib = pytest.importorskip("tomllib", reason="Python 3.11 reads TOML")
    tomllib.loads(block.code)


def test_rust_samples_are_on_pages_compiled_as_doc_tests() -> None:
    compiled = {
        (src / included).resolve()
        for src in (ROOT / "core" / "src", ROOT / "tests" / "support" / "rust" / "src")
        for included in re.findall(
            r'#\[doc = include_str!\("([^"]+)"\)\]', (src / "lib.rs").read_text())
    }
    for block in blocks():
        if block.lang == "rust":
            assert block.page.resolve() in compiled, (
                f"{block.id}: a Rust sample on a page no lib.rs includes as doc tests")
    assert {name(p) for p in compiled} >= {"core/rust.md", "README.md"}
