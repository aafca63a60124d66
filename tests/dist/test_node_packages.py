"""The npm tarballs of dist/ as a user gets them: the main package (JS and
types, no native code) and the linux-x64-gnu platform package (the addon),
installed into a fresh folder with no network, no npm cache and no Rust, then
taking a lock against a real Redis from CommonJS and from ESM."""

from __future__ import annotations

import json
import subprocess
import tarfile
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import pytest

PLATFORM = "linux-x64-gnu"
ADDON = f"rlock.{PLATFORM}.node"
# npm runs these when it installs a package from a tarball or a registry.
INSTALL_SCRIPTS = ("preinstall", "install", "postinstall", "prepare")

# Takes and releases a lock, then names the addon files loaded (CommonJS and ESM share one cache).
TAKE_A_LOCK = """
const client = await Client.connect(process.env.REDIS_URL)
const lock = client.lock('dist:node', { ttlMs: 10000, timeoutMs: 3000 })
await lock.acquire()
console.log(lock.fencingToken)
await lock.release()
console.log(await lock.isLocked())
await client.close()
console.log(Object.keys(cache).filter((f) => f.endsWith('.node')).join(' '))
"""
PROGRAMS = {
    "commonjs": ["-e", "const { Client } = require('redis-rlock')\nconst { cache } = require;\n"
                       f"(async () => {{{TAKE_A_LOCK}}})()"],
    "module": ["--input-type=module", "-e", "import { createRequire } from 'node:module'\n"
               "import { Client } from 'redis-rlock'\nconst { cache } = createRequire(import.meta.url)\n"
               + TAKE_A_LOCK],
}


def members(tarball: Path) -> Dict[str, tarfile.TarInfo]:
    with tarfile.open(tarball) as tar:
        return {m.name: m for m in tar.getmembers() if m.isfile()}


def packed(tarball: Path, name: str) -> bytes:
    with tarfile.open(tarball) as tar:
        member = tar.extractfile(f"package/{name}")
        assert member is not None, f"{tarball.name} holds no {name}"
        return member.read()


def manifest(tarball: Path) -> dict:
    return json.loads(packed(tarball, "package.json"))


@pytest.fixture
def tarballs(dist: Path, version: str) -> Tuple[Path, Path]:
    main = dist / f"redis-rlock-{version}.tgz"
    platform = dist / f"redis-rlock-{PLATFORM}-{version}.tgz"
    for tarball in (main, platform):
        assert tarball.exists(), f"{tarball} is missing: run `make dist-node`"
    return main, platform


def test_the_main_package_holds_the_js_face_and_no_native_code(tarballs: Tuple[Path, Path], version: str) -> None:
    main, _ = tarballs
    files = members(main)
    assert not [f for f in files if f.endswith(".node")], "the main package carries an addon"
    for face in ("node/index.js", "node/index.mjs", "node/index.d.ts", "node/client.js", "node/lock.js", "node/rwlock.js",
                 "node/semaphore.js", "node/cache.js", "node/job.js", "node/owners.js", "node/options.js",
                 "node/settings.js", "node/error.js", "node/native.js", "node/load.js", "node/tracing.js",
                 "LICENSE-MIT", "LICENSE-APACHE"):
        assert f"package/{face}" in files
    package = manifest(main)
    assert package["version"] == version
    assert package["license"] == "MIT OR Apache-2.0"
    assert not [s for s in INSTALL_SCRIPTS if s in package.get("scripts", {})], "installing it would run a script"
    # Every platform package at this very version: npm picks the one that fits the machine.
    assert package["optionalDependencies"][f"redis-rlock-{PLATFORM}"] == version
    assert set(package["optionalDependencies"].values()) == {version}


def test_the_platform_package_holds_exactly_one_addon_for_x64_linux_with_glibc(
    tarballs: Tuple[Path, Path], version: str
) -> None:
    _, platform = tarballs
    addons = [f for f in members(platform) if f.endswith(".node")]
    assert addons == [f"package/{ADDON}"]
    package = manifest(platform)
    assert package["name"] == f"redis-rlock-{PLATFORM}"
    assert package["version"] == version
    assert (package["os"], package["cpu"], package["libc"]) == (["linux"], ["x64"], ["glibc"])
    assert package["main"] == ADDON
    assert not [s for s in INSTALL_SCRIPTS if s in package.get("scripts", {})]


def test_npm_installs_both_offline_without_building_and_both_module_systems_take_a_lock(
    tarballs: Tuple[Path, Path], as_user: Callable[..., str], tmp_path: Path
) -> None:
    main, platform = tarballs
    project = tmp_path / "project"
    project.mkdir()
    as_user(["npm", "init", "-y"], project)
    # --foreground-scripts: had any package a script to run at install, its output would show here.
    output = as_user(["npm", "install", "--offline", "--no-audit", "--no-fund", "--foreground-scripts",
                      "--cache", tmp_path / "npm-cache", main, platform], project)
    for build in ("napi build", "cargo", "node-gyp"):
        assert build not in output, f"the install ran {build!r}:\n{output}"

    installed = project / "node_modules"
    assert sorted(p.name for p in installed.iterdir() if not p.name.startswith(".")) == [
        "redis-rlock", f"redis-rlock-{PLATFORM}"]
    # Nothing was compiled: no cargo target folder, and the one addon is the tarball's, byte for byte.
    assert not list(project.rglob("target"))
    assert [p.relative_to(installed) for p in installed.rglob("*.node")] == [Path(f"redis-rlock-{PLATFORM}", ADDON)]
    assert (installed / f"redis-rlock-{PLATFORM}" / ADDON).read_bytes() == packed(platform, ADDON)

    fences: List[int] = []
    for kind, program in PROGRAMS.items():
        fence, locked_after, addons = as_user(["node", *program], project).splitlines()
        fences.append(int(fence))
        assert locked_after == "false", f"{kind}: the lock is still held after release"
        # The main package has no addon of its own: the loader took the platform package's.
        assert addons == str((installed / f"redis-rlock-{PLATFORM}" / ADDON).resolve()), kind
    assert fences[1] > fences[0], f"fencing tokens did not increase: {fences}"


def test_the_main_package_without_its_platform_package_says_which_one_to_install(
    tarballs: Tuple[Path, Path], user_env: Dict[str, str], as_user: Callable[..., str], tmp_path: Path, version: str
) -> None:
    """An install that lacks the addon (an offline mirror, --omit=optional)
    fails when the package is loaded, naming the package to install."""
    main, _ = tarballs
    project = tmp_path / "project"
    project.mkdir()
    as_user(["npm", "init", "-y"], project)
    as_user(["npm", "install", "--offline", "--omit=optional", "--no-audit", "--no-fund",
             "--cache", tmp_path / "npm-cache", main], project)
    assert not (project / "node_modules" / f"redis-rlock-{PLATFORM}").exists()
    done = subprocess.run(["node", "-e", "require('redis-rlock')"], cwd=project, env=user_env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    said = done.stderr
    assert f"needs its native addon for {PLATFORM}, package redis-rlock-{PLATFORM}@{version}" in said, said
    assert f"npm install redis-rlock-{PLATFORM}@{version}" in said, said
    assert "ERR_RLOCK_NATIVE_MISSING" in said, said
    assert "wasm32-wasi" not in said.split("[cause]")[0], said
