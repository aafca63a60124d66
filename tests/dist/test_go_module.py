"""The Go module of dist/goproxy as a Go user gets it: `go get` from a module
proxy (the folder, as file://, as any web server of it would serve it), then
`go build` of a program that takes a lock, run against a real Redis, with no
Rust toolchain on the PATH and fresh Go caches."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Callable, Dict

import pytest

from rlock_test_support.keys import lock_key
from rlock_test_support.servers import RedisServer

ROOT = Path(__file__).resolve().parents[2]

MODULE = next(line.split()[1] for line in (ROOT / "go" / "go.mod").read_text().splitlines()
              if line.startswith("module "))

PROGRAM = """package main

import (
	"context"
	"fmt"
	"os"
	"time"

	rlock "github.com/redis-rlock/redis-rlock/go"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := rlock.Connect(ctx, os.Getenv("REDIS_URL"))
	if err != nil {
		fmt.Println("connect:", err)
		os.Exit(1)
	}
	defer client.Close()
	held, err := client.Mutex("from-go-get", rlock.WithTTL(10*time.Second)).Lock(ctx)
	if err != nil {
		fmt.Println("lock:", err)
		os.Exit(1)
	}
	fmt.Println("token", held.FencingToken())
	if err := held.Unlock(ctx); err != nil {
		fmt.Println("unlock:", err)
		os.Exit(1)
	}
	fmt.Println("released")
}
"""


@pytest.fixture
def proxy(dist: Path, version: str) -> Path:
    folder = dist / "goproxy"
    assert (folder / MODULE / "@v" / f"v{version}.zip").exists(), f"{folder} is missing: run `make dist-go`"
    return folder


def test_the_proxy_serves_the_version_its_go_mod_and_a_zip_of_the_module_with_the_library(
    proxy: Path, version: str
) -> None:
    at = proxy / MODULE / "@v"
    assert f"v{version}" in (at / "list").read_text().split()
    assert json.loads((at / f"v{version}.info").read_text())["Version"] == f"v{version}"
    assert (at / f"v{version}.mod").read_bytes() == (ROOT / "go" / "go.mod").read_bytes()
    top = f"{MODULE}@v{version}/"
    with zipfile.ZipFile(at / f"v{version}.zip") as z:
        names = z.namelist()
        assert all(n.startswith(top) for n in names), [n for n in names if not n.startswith(top)]
        files = {n[len(top):] for n in names}
        assert {"go.mod", "bridge.go", "include/rlock.h", "lib/linux_amd64/librlock.a"} <= files
        assert z.read(top + "include/rlock.h") == (ROOT / "ffi" / "include" / "rlock.h").read_bytes()
    assert not any(f.startswith("lib/") and not f.endswith("/librlock.a") for f in files), files


def test_go_get_then_go_build_takes_a_lock_with_no_rust_toolchain(
    proxy: Path, version: str, tmp_path: Path, user_env: Dict[str, str],
    as_user: Callable[..., str], redis_server: RedisServer
) -> None:
    # A fresh HOME holds the module cache (GOPATH) and the build cache; only the proxy
    # folder serves modules, and nothing asks a checksum database on the network.
    user_env.update(GOPROXY=f"file://{proxy}", GOSUMDB="off", GOFLAGS="-mod=mod", GOTOOLCHAIN="local",
                    GOPATH=str(tmp_path / "home" / "go"), GOCACHE=str(tmp_path / "home" / "go-build"))
    app = tmp_path / "app"
    app.mkdir()
    (app / "go.mod").write_text("module example.com/app\n\ngo 1.21\n")
    (app / "main.go").write_text(PROGRAM)
    as_user(["go", "get", f"{MODULE}@v{version}"], app)
    assert f"{MODULE} v{version}" in (app / "go.mod").read_text()
    as_user(["go", "build", "-o", "app", "."], app)
    out = as_user([app / "app"], app).split("\n")
    assert out[0].startswith("token ") and int(out[0].split()[1]) >= 1, out
    assert out[1] == "released", out
    assert redis_server.redis.exists(lock_key("from-go-get")) == 0, "the program left its lock behind"
