"""What installing the artefacts of dist/ as a user would needs: a real
redis-server to lock against, the version every artefact carries, and a
user's environment: no cargo or rustc on its PATH, and a HOME, caches and
package-manager settings of its own, so that nothing built or downloaded
before is reused and an install that tried to compile would fail."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Callable, Dict, Iterator, Sequence, Union

import pytest

from rlock_test_support.servers import RedisServer

ROOT = Path(__file__).resolve().parents[2]

# A fresh install unpacks and byte-compiles; it never builds, so this is ample.
RUN_WITHIN = 300.0

TOOLCHAIN = ("cargo", "rustc", "rustup")
# Settings of this machine's shell that would point an install at a build
# tool, a cache, an index or a package already built here.
INHERITED = ("CARGO", "RUSTUP", "RUSTC", "RUSTFLAGS", "PIP_", "npm_config_", "NPM_CONFIG_",
             "PYTHON", "VIRTUAL_ENV", "CONDA", "NODE_PATH", "MATURIN")


def toolchain_free_path() -> str:
    """This PATH without the folders that hold cargo, rustc or rustup."""
    kept = [folder for folder in os.environ.get("PATH", "").split(os.pathsep)
            if folder and not any(os.path.exists(os.path.join(folder, tool)) for tool in TOOLCHAIN)]
    return os.pathsep.join(dict.fromkeys(kept))


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def version() -> str:
    """The one version (Cargo.toml's), which names every artefact."""
    done = subprocess.run([str(ROOT / "scripts" / "check-version")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture(scope="session")
def dist() -> Path:
    folder = ROOT / "dist"
    assert folder.is_dir(), f"{folder} is missing: run `make dist`"
    return folder


@pytest.fixture
def user_env(tmp_path: Path, redis_server: RedisServer) -> Dict[str, str]:
    """A user's environment: no Rust toolchain on the PATH, a fresh HOME
    (so fresh pip and npm caches and no user configuration), pip held to
    wheels from the files named, and `REDIS_URL` naming the test's server."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(INHERITED)}
    env.update(
        PATH=toolchain_free_path(),
        HOME=str(home),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_CONFIG_HOME=str(home / ".config"),
        # No index and wheels only: an sdist, which would compile, cannot be chosen.
        PIP_NO_INDEX="1",
        PIP_ONLY_BINARY=":all:",
        PIP_CONFIG_FILE=os.devnull,
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        REDIS_URL=redis_server.url,
    )
    for tool in TOOLCHAIN:
        assert shutil.which(tool, path=env["PATH"]) is None, f"{tool} is still on the user's PATH"
    return env


Arg = Union[str, "os.PathLike[str]"]


@pytest.fixture
def as_user(user_env: Dict[str, str], tmp_path: Path) -> Callable[..., str]:
    """Runs a command in the user's environment (in `cwd`, else the test's
    folder); its stdout when it exits 0, else a failed assertion with
    everything it printed."""

    def run(argv: Sequence[Arg], cwd: Union[Path, None] = None) -> str:
        done = subprocess.run([os.fspath(a) for a in argv], cwd=cwd or tmp_path, env=user_env,
                              capture_output=True, text=True, timeout=RUN_WITHIN)
        assert done.returncode == 0, (
            f"{' '.join(map(os.fspath, argv))}: exit status {done.returncode}\n"
            f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}")
        return done.stdout

    return run
