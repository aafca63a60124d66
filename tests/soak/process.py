"""A worker process seen from outside, through /proc (Linux): its resident
memory, its threads, and its TCP connections to one port."""

from __future__ import annotations

import os
from typing import Dict, Set


def status(pid: int) -> Dict[str, str]:
    with open(f"/proc/{pid}/status") as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def rss_kb(pid: int) -> int:
    """VmRSS in kB."""
    return int(status(pid)["VmRSS"].split()[0])


def threads(pid: int) -> int:
    return int(status(pid)["Threads"])


def _socket_inodes(pid: int) -> Set[str]:
    inodes = set()
    fd_dir = f"/proc/{pid}/fd"
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
        except OSError:  # closed since the listing
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    return inodes


def connections(pid: int, port: int) -> int:
    """The process' open TCP sockets whose remote end is `port` (any state:
    a socket it has not closed counts, half-closed or not)."""
    mine = _socket_inodes(pid)
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    remote_port = int(fields[2].rsplit(":", 1)[1], 16)
                    if remote_port == port and fields[9] in mine:
                        count += 1
        except FileNotFoundError:  # no IPv6 in this kernel
            continue
    return count
