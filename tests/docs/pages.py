"""The documentation's Markdown as the checks see it: its pages, their
headings (as GitHub anchors them), their links and their fenced code blocks,
with the marker comment before each block."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

ROOT = Path(__file__).resolve().parents[2]

# The project's home: `repository` of [workspace.package] in Cargo.toml, which
# the other manifests must agree with. The pages link into the repository
# relatively, so that the checkout resolves them; a link to this home would
# name what is published there instead. The README is also the PyPI and
# crates.io page, where relative links may lead nowhere: there the manifests'
# Repository and Documentation URLs lead to the pages.
HOME = re.search(
    r'^repository\s*=\s*"([^"]+)"', (ROOT / "Cargo.toml").read_text(encoding="utf-8"), re.MULTILINE
)[1]

FRAGMENT = "<!-- fragment -->"
OUTPUT = "<!-- output -->"

FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
# What GitHub links without brackets: <https://...> and a bare https://...
BARE_URL = re.compile(r"<?\b(https?://[^\s<>()\[\]`]*[^\s<>()\[\]`.,;:!?'\"*_])>?")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def all_pages() -> List[Path]:
    """Every page whose links and samples are checked."""
    return [
        ROOT / "README.md",
        ROOT / "CONTRIBUTING.md",
        ROOT / "core" / "rust.md",
        *sorted((ROOT / "docs").glob("*.md")),
    ]


def name(path: Path) -> str:
    return str(path.relative_to(ROOT))


@dataclass
class Block:
    """One fenced code block: `lang` is the first word of its info string,
    `marker` the HTML comment on the line before it, if any."""

    page: Path
    line: int
    lang: str
    info: str
    code: str
    marker: Optional[str] = None
    output: Optional["Block"] = None

    @property
    def id(self) -> str:
        return f"{name(self.page)}:{self.line}:{self.lang}"


@dataclass
class Link:
    page: Path
    line: int
    target: str


@dataclass
class Page:
    path: Path
    blocks: List[Block] = field(default_factory=list)
    links: List[Link] = field(default_factory=list)
    anchors: List[str] = field(default_factory=list)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text as rendered, lower-cased,
    without punctuation but hyphens and underscores, spaces made hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").replace("*", "")
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def read(path: Path) -> Page:
    page = Page(path)
    seen: Dict[str, int] = {}
    lines = path.read_text(encoding="utf-8").split("\n")
    previous = ""  # the last non-blank line outside a block
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = FENCE.match(line)
        if fence:
            indent, mark = len(fence["indent"]), fence["fence"]
            info = fence["info"].strip()
            body: List[str] = []
            j = i + 1
            while j < len(lines) and not (
                lines[j].strip().startswith(mark[0] * len(mark))
                and set(lines[j].strip()) == {mark[0]}
            ):
                body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j])
                j += 1
            marker = previous if previous.startswith("<!--") else None
            lang = re.split(r"[\s,]", info, maxsplit=1)[0] if info else ""
            page.blocks.append(Block(path, i + 1, lang, info, "\n".join(body) + "\n", marker))
            previous = ""
            i = j + 1
            continue
        heading = HEADING.match(line)
        if heading:
            base = slug(heading.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            page.anchors.append(base if count == 0 else f"{base}-{count}")
        prose = CODE_SPAN.sub(lambda c: " " * len(c.group(0)), line)
        for m in LINK.finditer(prose):
            page.links.append(Link(path, i + 1, m.group(1)))
        for m in BARE_URL.finditer(LINK.sub(" ", prose)):
            page.links.append(Link(path, i + 1, m.group(1)))
        if line.strip():
            previous = line.strip()
        i += 1
    _attach_outputs(page)
    return page


def _attach_outputs(page: Page) -> None:
    """A ```text block marked as output belongs to the sample before it."""
    last: Optional[Block] = None
    for block in page.blocks:
        if block.marker == OUTPUT:
            assert last is not None, f"{block.id}: an output block with no sample before it"
            last.output = block
        else:
            last = block
