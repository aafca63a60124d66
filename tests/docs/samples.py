"""How each kind of fenced sample runs as a reader would paste it, or, for a
marked fragment, how its syntax is checked."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Dict, List, Set, Tuple

from pages import ROOT, Block

# A sample that hangs fails instead of stalling the suite.
RUN_WITHIN = 60.0

PYTHON = str(ROOT / ".venv" / "bin" / "python")

# A shell line calling `rlock` as a command (not a comment or an argument).
CALLS_RLOCK = re.compile(r"(^|[;&|(]|\s--\s|\$\(|^\s*)\s*rlock\s")
ESM = re.compile(r"^\s*(import|export)\s", re.MULTILINE)
REPO_PATH = re.compile(r"^(?:\./)?((?:tests|core|cli|python|node|bench|demo|scripts|docs)/[\w./-]*)")


def run(argv: List[str], cwd: Path, env: Dict[str, str], merge_stderr: bool = False) -> str:
    """Runs a sample; its output when it exits 0, else a failed assertion
    with everything it printed."""
    done = subprocess.run(
        argv, cwd=cwd, env=env, timeout=RUN_WITHIN, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE)
    assert done.returncode == 0, (
        f"exit status {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}")
    return done.stdout


def is_esm(block: Block) -> bool:
    return block.lang == "mjs" or bool(ESM.search(block.code))


def without_comments(code: str) -> str:
    return "\n".join(re.sub(r"(^|\s)#.*$", "", line) for line in code.splitlines())


def calls_rlock(block: Block) -> bool:
    code = console_commands(block.code) if block.lang == "console" else block.code
    return any(CALLS_RLOCK.search(line) for line in without_comments(code).splitlines())


def console_commands(code: str) -> str:
    """The commands of a terminal transcript: its `$ ` lines."""
    return "\n".join(line[2:] for line in code.splitlines() if line.startswith("$ ")) + "\n"


def console_output(code: str) -> str:
    """What a terminal transcript shows the commands printing."""
    return "\n".join(line for line in code.splitlines() if not line.startswith("$ ")) + "\n"


def python(block: Block, workdir: Path, env: Dict[str, str]) -> str:
    sample = workdir / "sample.py"
    sample.write_text(block.code)
    return run([PYTHON, str(sample)], workdir, env)


def javascript(block: Block, node_project: Path, workdir: Path, env: Dict[str, str]) -> str:
    """An ES module when it imports, else CommonJS; either way from a folder
    of the Node project, so `redis-rlock` resolves as an installed package."""
    folder = node_project / workdir.name
    folder.mkdir()
    sample = folder / ("sample.mjs" if is_esm(block) else "sample.cjs")
    sample.write_text(block.code)
    return run(["node", str(sample)], folder, env)


def go(block: Block, workdir: Path, env: Dict[str, str]) -> str:
    """A program of package main, in a module that finds the Go face in this
    checkout (its static library built by `make go-lib`)."""
    (workdir / "go.mod").write_text(
        "module sample\n\ngo 1.21\n\nrequire github.com/redis-rlock/redis-rlock/go v0.0.0\n\n"
        f"replace github.com/redis-rlock/redis-rlock/go => {ROOT / 'go'}\n")
    (workdir / "main.go").write_text(block.code)
    return run(["go", "run", "."], workdir, env)


def shell(block: Block, workdir: Path, env: Dict[str, str]) -> str:
    sample = workdir / "sample.sh"
    sample.write_text(block.code)
    return run(["bash", "-e", "-o", "pipefail", str(sample)], workdir, env)


def console(block: Block, workdir: Path, env: Dict[str, str]) -> str:
    """A transcript's commands in one shell, their stderr shown with their
    stdout as a terminal would show it."""
    sample = workdir / "sample.sh"
    sample.write_text(console_commands(block.code))
    return run(["bash", str(sample)], workdir, env, merge_stderr=True)


def syntax(block: Block, workdir: Path) -> None:
    """A fragment: parsed, not run."""
    if block.lang == "python":
        compile(block.code, block.id, "exec")
    elif block.lang in ("js", "mjs"):
        sample = workdir / ("sample.mjs" if is_esm(block) else "sample.cjs")
        sample.write_text(block.code)
        run(["node", "--check", str(sample)], workdir, dict(os.environ))
    elif block.lang == "go":
        (workdir / "main.go").write_text(block.code)
        run(["gofmt", "-e", str(workdir / "main.go")], workdir, dict(os.environ))
    elif block.lang in ("sh", "console"):
        code = console_commands(block.code) if block.lang == "console" else block.code
        (workdir / "sample.sh").write_text(code)
        run(["bash", "-n", str(workdir / "sample.sh")], workdir, dict(os.environ))
    else:
        raise AssertionError(f"{block.id}: no syntax check for a {block.lang!r} fragment")


def same_output(expected: str, actual: str) -> bool:
    """Line by line, trailing blanks aside; `…` in the expected text stands
    for any run of characters (a lease's remaining seconds, say)."""
    want = expected.rstrip("\n").split("\n")
    got = actual.rstrip("\n").split("\n")
    if len(want) != len(got):
        return False
    for w, g in zip(want, got):
        pattern = ".*".join(re.escape(part) for part in w.rstrip().split("…"))
        if not re.fullmatch(pattern, g.rstrip()):
            return False
    return True


def make_targets() -> Set[str]:
    targets: Set[str] = set()
    for line in (ROOT / "Makefile").read_text().splitlines():
        m = re.match(r"^([\w.%/-]+(?:\s+[\w.%/-]+)*)\s*:(?!=)", line)
        if m and not line.startswith("\t"):
            targets.update(m.group(1).split())
    return targets


def npm_scripts() -> Set[str]:
    return set(json.loads((ROOT / "package.json").read_text()).get("scripts", {}))


def commands_for_a_clone(block: Block) -> List[Tuple[str, str]]:
    """What a build or test command names that must exist in the repository:
    ('make', target), ('npm run', script) and ('path', path) pairs."""
    named: List[Tuple[str, str]] = []
    for line in without_comments(block.code).splitlines():
        words = line.split()
        while words and "=" in words[0]:  # VAR=value make ...
            words = words[1:]
        if words[:1] == ["make"]:
            named += [("make", w) for w in words[1:] if "=" not in w and not w.startswith("-")]
        if words[:2] == ["npm", "run"] and len(words) > 2:
            named.append(("npm run", words[2]))
        for word in words:
            m = REPO_PATH.match(word)
            if m:
                named.append(("path", m.group(1).rstrip(".,;:")))
    return named
