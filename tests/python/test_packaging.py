"""The package as shipped: typed for its users, and an sdist that builds."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import tarfile

import rlock

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def test_the_public_api_type_checks_under_mypy_strict() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", os.path.join(HERE, "typed_usage.py")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_catches_a_misuse_through_the_stubs(tmp_path: "os.PathLike[str]") -> None:
    misuse = os.path.join(str(tmp_path), "misuse.py")
    with open(misuse, "w") as f:
        f.write("import rlock\nrlock.Client().lock('x', ttl='10')\nx: str = rlock.lock('y').fencing_token\n"
                # redis-py's lease, refused here at run time: the type checker says so first.
                "rlock.Client().lock('z', timeout=10)\n")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", misuse],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 1
    assert "misuse.py:2" in done.stdout and "misuse.py:3" in done.stdout and "misuse.py:4" in done.stdout


def test_the_sdist_carries_the_scripts_and_the_core(tmp_path: "os.PathLike[str]") -> None:
    done = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "maturin"), "sdist", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    (sdist,) = [f for f in os.listdir(str(tmp_path)) if f.endswith(".tar.gz")]
    with tarfile.open(os.path.join(str(tmp_path), sdist)) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    package = os.path.join(ROOT, "python", "rlock")
    modules = [f"python/rlock/{m}" for m in sorted(os.listdir(package)) if m.endswith(".py")]
    for needed in [
        *modules,
        "pyproject.toml",
        "core/lua/mutex/acquire.lua",
        "core/lua/mutex/release.lua",
        "core/lua/mutex/extend.lua",
        "core/lua/mutex/inspect.lua",
        "core/src/lib.rs",
        "python/Cargo.toml",
        "python/src/lib.rs",
        "python/rlock/__init__.py",
        "python/rlock/_native.pyi",
        "python/rlock/py.typed",
    ]:
        assert needed in names, f"{needed} missing from {sdist}"


def test_the_version_is_the_installed_packages() -> None:
    assert rlock.__version__ == importlib.metadata.version("redis-rlock")
    assert rlock.__version__.count(".") == 2
