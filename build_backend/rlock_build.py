"""The build backend of redis-rlock's source distribution: maturin's, with
one check first.

pip builds from the sdist only when no wheel fits the machine. Building needs
Rust (cargo), and without it maturin would download a Rust toolchain (some
860 MB) into a temporary folder and compile for minutes, saying nothing of
it. This backend refuses instead, at once, saying what is missing and what
to do, unless the user asks for that download (RLOCK_DOWNLOAD_RUST=1)."""

from __future__ import annotations

import os
import platform
import shutil
import sys
from typing import Any, List, Mapping, Optional

import maturin
from maturin import build_sdist, get_requires_for_build_sdist  # noqa: F401 (hooks as they are)

Settings = Optional[Mapping[str, Any]]

REFUSAL = """redis-rlock: no prebuilt wheel fits this machine ({machine}), and building one from the
source distribution needs Rust, which is not installed (no `cargo` on the PATH).

Do one of these, then run the same pip command again:
  - install Rust: https://rustup.rs (`curl https://sh.rustup.rs -sSf | sh`, about 300 MB),
    or your system's package (Debian/Ubuntu: `apt-get install cargo`; Alpine: `apk add cargo`);
  - or let this build download a Rust toolchain into a temporary folder itself
    (about 860 MB, and several minutes of compiling): set RLOCK_DOWNLOAD_RUST=1.

Prebuilt wheels exist for Linux x86_64 and aarch64 (glibc 2.17+ and musl), macOS and
Windows x64, for CPython 3.9 and later: on those, check that pip is recent
(`pip install -U pip`)."""


def _rust_or_refuse() -> None:
    if shutil.which("cargo") or os.environ.get("RLOCK_DOWNLOAD_RUST") == "1":
        return
    machine = f"{platform.system()} {platform.machine()}, CPython {platform.python_version()}"
    print(REFUSAL.format(machine=machine), file=sys.stderr)
    # An exit, not an exception: pip shows the message above, no traceback.
    raise SystemExit(1)


def get_requires_for_build_wheel(config_settings: Settings = None) -> List[str]:
    _rust_or_refuse()
    return maturin.get_requires_for_build_wheel(config_settings)


def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: Settings = None) -> str:
    _rust_or_refuse()
    return maturin.prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def build_wheel(wheel_directory: str, config_settings: Settings = None,
                metadata_directory: Optional[str] = None) -> str:
    _rust_or_refuse()
    return maturin.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory: str, config_settings: Settings = None,
                   metadata_directory: Optional[str] = None) -> str:
    _rust_or_refuse()
    return maturin.build_editable(wheel_directory, config_settings, metadata_directory)
