"""The servers a redis-py client talks to, as this package's URLs: what
``Client.from_redis()`` reads. Only the settings are read (the core turns
them into URLs and checks them as any URL); the client made from them opens
connections of its own.

redis-py is no dependency: its classes are looked up among the modules
already imported, since an object of one of them means its module is."""

from __future__ import annotations

import sys
from typing import Any, List, Mapping, Optional, Tuple

from . import _native

ACCEPTED = (
    "a redis-py client: redis.Redis, redis.asyncio.Redis, redis.cluster.RedisCluster, "
    "redis.asyncio.cluster.RedisCluster, or Sentinel(...).master_for(name)"
)


def _classes(*spelled: str) -> Tuple[type, ...]:
    """The classes named ``module.Class`` whose modules are imported."""
    found = []
    for name in spelled:
        module, _, cls = name.rpartition(".")
        if module in sys.modules:
            found.append(getattr(sys.modules[module], cls))
    return tuple(found)


def servers_of(r: object) -> Tuple[List[str], bool, Optional[bytes]]:
    """The URLs of the servers ``r`` talks to, whether they are the nodes of
    a Redis Cluster, and the PEM of the CA it trusts (if it names one)."""
    clusters = _classes("redis.cluster.RedisCluster", "redis.asyncio.cluster.RedisCluster")
    if isinstance(r, clusters):
        kwargs = r.get_connection_kwargs()  # type: ignore[attr-defined]
        tls = _tls(kwargs, kwargs.get("connection_class"))
        nodes = r.startup_nodes  # type: ignore[attr-defined]
        urls = [_native.url_from_settings(_settings(n.host, n.port, 0, kwargs, tls)) for n in nodes]
        return urls, True, _ca(kwargs)
    if isinstance(r, _classes("redis.client.Redis", "redis.asyncio.client.Redis")):
        pool = r.connection_pool  # type: ignore[attr-defined]
        kwargs = pool.connection_kwargs
        tls = _tls(kwargs, pool.connection_class)
        sentinel_pools = _classes(
            "redis.sentinel.SentinelConnectionPool", "redis.asyncio.sentinel.SentinelConnectionPool"
        )
        if isinstance(pool, sentinel_pools):
            return [_sentinel_url(pool, kwargs, tls)], False, _ca(kwargs)
        if "host" not in kwargs:
            raise ValueError("a redis-py client of a Unix socket: only TCP servers are supported")
        settings = _settings(kwargs["host"], kwargs.get("port", 6379), kwargs.get("db", 0), kwargs, tls)
        return [_native.url_from_settings(settings)], False, _ca(kwargs)
    raise TypeError(f"from_redis() takes {ACCEPTED}; got {type(r).__name__}")


def _sentinel_url(pool: Any, kwargs: Mapping[str, Any], tls: bool) -> str:
    """The redis+sentinel:// URL of the master a Sentinel-managed pool serves."""
    if not pool.is_master:
        raise ValueError(
            "a Sentinel replica client (slave_for): locks are taken on the master, "
            "pass Sentinel(...).master_for(name)"
        )
    sentinels = []
    for sentinel in pool.sentinel_manager.sentinels:
        own = sentinel.connection_pool
        own_kwargs = own.connection_kwargs
        sentinels.append(
            _settings(own_kwargs["host"], own_kwargs["port"], 0, own_kwargs, _tls(own_kwargs, own.connection_class))
        )
    username, password = _credentials(kwargs)
    return _native.sentinel_url_from_settings(
        pool.service_name, sentinels, kwargs.get("db", 0), username, password, tls
    )


def _settings(host: str, port: int, db: int, kwargs: Mapping[str, Any], tls: bool) -> _native.ServerSettings:
    username, password = _credentials(kwargs)
    return _native.ServerSettings(
        host=host, port=int(port), db=int(db), username=username, password=password, tls=tls
    )


def _credentials(kwargs: Mapping[str, Any]) -> Tuple[Optional[str], Optional[str]]:
    """(username, password), from a credential provider when there is one."""
    provider = kwargs.get("credential_provider")
    if provider is None:
        return kwargs.get("username"), kwargs.get("password")
    given = provider.get_credentials()
    return (None, given[0]) if len(given) == 1 else (given[0], given[1])


def _tls(kwargs: Mapping[str, Any], connection_class: Optional[type]) -> bool:
    ssl = _classes("redis.connection.SSLConnection", "redis.asyncio.connection.SSLConnection")
    is_ssl = connection_class is not None and issubclass(connection_class, ssl)
    return bool(kwargs.get("ssl")) or is_ssl


def _ca(kwargs: Mapping[str, Any]) -> Optional[bytes]:
    """The PEM of the CA redis-py was told to trust, if any (else the system's)."""
    data = kwargs.get("ssl_ca_data")
    if data is not None:
        return data.encode() if isinstance(data, str) else bytes(data)
    path = kwargs.get("ssl_ca_certs")
    if path is not None:
        with open(path, "rb") as f:
            return f.read()
    return None
