"""The wheel of dist/ as a user gets it: one abi3 wheel for every CPython
>= 3.9 that an old glibc installs, typed and licensed, and that a fresh
virtualenv on a machine without Rust installs and locks with."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Callable, Dict

import pytest

from rlock_test_support.keys import lock_key
from rlock_test_support.servers import RedisServer

# The package's sources: each of its modules must be in the wheel.
PACKAGE = Path(__file__).resolve().parents[2] / "python" / "rlock"

# Takes and releases one lock from the installed package, and says where that
# package came from and what the process could find on its PATH.
LOCK_ONCE = """
import json, shutil, sys
import rlock

client = rlock.Client()  # REDIS_URL
with client.lock(sys.argv[1], ttl=10, blocking_timeout=5) as held:
    fence = held.fencing_token
    owned = held.owned()
client.close()
print(json.dumps({
    "fence": fence, "owned": owned, "version": rlock.__version__, "file": rlock.__file__,
    "cargo": shutil.which("cargo"), "rustc": shutil.which("rustc"),
}))
"""


@pytest.fixture(scope="module")
def wheel(dist: Path, version: str) -> Path:
    wheels = sorted(dist.glob(f"redis_rlock-{version}-*.whl"))
    assert len(wheels) == 1, f"one wheel of {version} expected in {dist}, found {wheels}: run `make dist-python`"
    return wheels[0]


def test_the_wheel_is_one_abi3_wheel_for_cpython_3_9_on_glibc_2_17(wheel: Path) -> None:
    # manylinux2014 is manylinux_2_17: CentOS 7, Debian 8, Ubuntu 14.04 and later.
    _, _, python, abi, platforms = wheel.stem.split("-")
    assert (python, abi) == ("cp39", "abi3")
    assert set(platforms.split(".")) == {"manylinux2014_x86_64", "manylinux_2_17_x86_64"}


def test_the_wheel_carries_every_module_the_typed_marker_the_licenses_and_the_metadata(
    wheel: Path, version: str,
) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        metadata = z.read(f"redis_rlock-{version}.dist-info/METADATA").decode()
    modules = [f"rlock/{module.name}" for module in sorted(PACKAGE.glob("*.py"))]
    assert "rlock/__init__.py" in modules
    for shipped in [*modules, "rlock/_native.pyi", "rlock/py.typed", "rlock/_native.abi3.so",
                    f"redis_rlock-{version}.dist-info/licenses/LICENSE-MIT",
                    f"redis_rlock-{version}.dist-info/licenses/LICENSE-APACHE"]:
        assert shipped in names, f"{shipped} missing from {wheel.name}"
    headers = metadata.split("\n\n", 1)[0].splitlines()
    for line in ["License-Expression: MIT OR Apache-2.0", "Requires-Python: >=3.9",
                 "Classifier: Typing :: Typed", "Classifier: Operating System :: POSIX :: Linux",
                 "Classifier: Programming Language :: Python :: 3.13"]:
        assert line in headers, f"{line!r} missing from the wheel's METADATA"
    urls = {line.split(", ", 1)[0] for line in headers if line.startswith("Project-URL: ")}
    assert urls >= {"Project-URL: Repository", "Project-URL: Documentation", "Project-URL: Changelog"}


def test_a_fresh_virtualenv_without_rust_installs_the_wheel_and_locks_with_it(
    wheel: Path, version: str, user_env: Dict[str, str], as_user: Callable[..., str],
    redis_server: RedisServer, tmp_path: Path,
) -> None:
    python3 = shutil.which("python3", path=user_env["PATH"])
    assert python3 is not None, "no python3 on the user's PATH"
    venv = tmp_path / "venv"
    as_user([python3, "-m", "venv", venv])
    python = venv / "bin" / "python"

    # --no-index and --only-binary: a wheel or nothing, never a build.
    installed = as_user([python, "-m", "pip", "install", "--no-index", "--only-binary", ":all:", wheel])
    assert f"Successfully installed redis-rlock-{version}" in installed

    printed = json.loads(as_user([python, "-c", LOCK_ONCE, "dist:python"]).splitlines()[-1])
    assert (printed["cargo"], printed["rustc"]) == (None, None)
    assert Path(printed["file"]).is_relative_to(venv)
    assert printed["version"] == version
    assert isinstance(printed["fence"], int) and printed["fence"] >= 1
    assert printed["owned"] is True
    assert redis_server.redis.exists(lock_key("dist:python")) == 0, "the lock was not released"


def test_the_sdist_on_a_machine_without_rust_refuses_at_once_saying_what_to_install(
    dist: Path, version: str, user_env: Dict[str, str], tmp_path: Path,
) -> None:
    """Where no wheel fits, pip builds from the sdist: without cargo, its
    backend stops before anything is downloaded or compiled, and says what
    to install (or how to let it download a toolchain itself)."""
    sdist = dist / f"redis_rlock-{version}.tar.gz"
    assert sdist.exists(), f"{sdist} is missing: run `make dist-python`"
    env = {k: v for k, v in user_env.items() if k != "PIP_ONLY_BINARY"}
    # The backend's own requirement (maturin) from this checkout's .venv:
    # no index is reachable, and the check comes before maturin runs.
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index",
         "--target", str(tmp_path / "target"), str(sdist)],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    took = time.monotonic() - started
    said = done.stdout + done.stderr
    assert done.returncode != 0, said
    assert "needs Rust, which is not installed (no `cargo` on the PATH)" in said, said
    assert "https://rustup.rs" in said and "RLOCK_DOWNLOAD_RUST=1" in said, said
    assert "Traceback" not in said, said
    assert took < 60, f"refused after {took:.0f} s"
    assert not (tmp_path / "target").exists() or not any((tmp_path / "target").iterdir())
