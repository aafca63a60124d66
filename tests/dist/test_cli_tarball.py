"""The rlock tarball of dist/ as a user gets it: downloaded beside its
checksum, verified, extracted, and run from where it was extracted against a
real Redis, on a machine without Rust."""

from __future__ import annotations

import os
import platform
import shutil
import tarfile
from pathlib import Path
from typing import Callable, Tuple

import pytest

# Rust's name for this machine's target, as `rustc -vV` gives it to `make dist-cli`.
TARGET = f"{platform.machine()}-unknown-linux-gnu"


@pytest.fixture
def download(dist: Path, version: str, tmp_path: Path) -> Tuple[Path, Path]:
    """The tarball and its checksum file, copied into a folder of their own
    as a browser or curl would leave them."""
    name = f"rlock-{version}-{TARGET}.tar.gz"
    assert (dist / name).exists(), f"{dist / name} is missing: run `make dist-cli`"
    folder = tmp_path / "download"
    folder.mkdir()
    for file in (name, f"{name}.sha256"):
        shutil.copy(dist / file, folder / file)
    return folder / name, folder / f"{name}.sha256"


def test_the_checksum_file_verifies_the_tarball_and_catches_a_changed_byte(
    download: Tuple[Path, Path], as_user: Callable[..., str]
) -> None:
    tarball, checksum = download
    assert as_user(["sha256sum", "-c", checksum.name], tarball.parent) == f"{tarball.name}: OK\n"
    data = bytearray(tarball.read_bytes())
    data[len(data) // 2] ^= 0xFF
    tarball.write_bytes(bytes(data))
    with pytest.raises(AssertionError, match="FAILED"):
        as_user(["sha256sum", "-c", checksum.name], tarball.parent)


def test_the_tarball_holds_rlock_the_licenses_and_the_readme_in_one_folder(
    download: Tuple[Path, Path], version: str
) -> None:
    tarball, _ = download
    top = f"rlock-{version}-{TARGET}"
    with tarfile.open(tarball) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert set(members) == {top, *(f"{top}/{f}" for f in ("rlock", "LICENSE-MIT", "LICENSE-APACHE", "README.md"))}
    assert members[f"{top}/rlock"].mode & 0o111 == 0o111, "rlock is not executable for everyone"


def test_rlock_from_the_tarball_runs_a_command_under_the_lock_and_leaves_it_free(
    download: Tuple[Path, Path], version: str, as_user: Callable[..., str]
) -> None:
    tarball, _ = download
    as_user(["tar", "-xzf", tarball.name], tarball.parent)
    rlock = tarball.parent / f"rlock-{version}-{TARGET}" / "rlock"
    assert os.access(rlock, os.X_OK)

    as_user([rlock, "exec", "dist:cli", "--", "true"])
    inside = as_user([rlock, "exec", "dist:cli", "--", "sh", "-c",
                      f'echo "$RLOCK_FENCING_TOKEN $PPID"; "{rlock}" status dist:cli'])
    token_and_pid, status, holder = inside.splitlines()
    fence, exec_pid = token_and_pid.split()
    assert int(fence) >= 2, "the second acquisition's token is not above the first's"
    assert status.startswith("dist:cli: held (ttl ") and status.endswith(f"count 1, fence {fence})")
    # Who holds it: the rlock exec around the shell, by its registration.
    assert holder.startswith("  holder: ") and f" pid {exec_pid} (cli) " in holder, holder
    assert as_user([rlock, "status", "dist:cli"]) == "dist:cli: free\n"
