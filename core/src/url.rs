//! The servers a client connects to, as URLs: `redis://`, `rediss://` (TLS)
//! and `redis+sentinel://`, parsed and checked without connecting. Errors
//! never echo a URL, which may carry a password, and a URL is only ever shown
//! with its password replaced by `***`.
//!
//! TLS runs on rustls with the ring provider (no OpenSSL, so the wheels and
//! addons stay portable).

use crate::error::{Error, Result};
use crate::redis::endpoint::Endpoint;

/// A server URL, checked without connecting (for faces that connect lazily);
/// returns the URL as it may be shown, any password replaced by `***`.
pub fn checked(raw: &str) -> Result<String> {
    let target = Target::parse(raw)?;
    target.endpoint(None)?;
    Ok(target.display)
}

/// An application's settings for one Redis server (or one Sentinel), as a
/// face finds them on a client the application made already (redis-py's
/// connection kwargs, ioredis' options), to be turned into a URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSettings {
    pub host: String,
    pub port: u16,
    pub db: i64,
    pub username: Option<String>,
    pub password: Option<String>,
    pub tls: bool,
}

/// The characters escaped in a URL's user and password: all but unreserved.
const USERINFO: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The URL of one server: `redis://` (`rediss://` with TLS), the user and
/// password percent-encoded, checked as any URL given directly.
pub fn url_from_settings(s: &ServerSettings) -> Result<String> {
    if s.db < 0 || s.db > i64::from(u16::MAX) {
        return Err(Error::invalid(format!(
            "the database number must be between 0 and {}, got {}",
            u16::MAX,
            s.db
        )));
    }
    let scheme = if s.tls { "rediss" } else { "redis" };
    let auth = userinfo(s.username.as_deref(), s.password.as_deref());
    let url = format!("{scheme}://{auth}{}/{}", address(&s.host, s.port)?, s.db);
    checked(&url)?;
    Ok(url)
}

/// The `redis+sentinel://` URL of a Sentinel group: `sentinels` are the
/// Sentinels' addresses; `db`, `username` and `password` are the master's.
/// The form has no room for TLS nor for the Sentinels' own credentials, so
/// those are refused rather than dropped.
pub fn sentinel_url_from_settings(
    master: &str,
    sentinels: &[ServerSettings],
    db: i64,
    username: Option<&str>,
    password: Option<&str>,
    tls: bool,
) -> Result<String> {
    if tls || sentinels.iter().any(|s| s.tls) {
        return Err(Error::invalid(
            "a redis+sentinel:// URL cannot use TLS: connect to the master's rediss:// URL instead",
        ));
    }
    if sentinels
        .iter()
        .any(|s| s.username.is_some() || s.password.is_some())
    {
        return Err(Error::invalid(
            "a redis+sentinel:// URL cannot carry the Sentinels' own username or password (only the master's)",
        ));
    }
    if sentinels.is_empty() {
        return Err(Error::invalid("at least one Sentinel is needed"));
    }
    if master.is_empty() || master.contains(['/', ',', '@']) {
        return Err(Error::invalid(format!(
            "a Sentinel master name must be non-empty, without '/', ',' or '@', got {master:?}"
        )));
    }
    if db < 0 {
        return Err(Error::invalid(format!(
            "the database number must be 0 or more, got {db}"
        )));
    }
    let hosts = sentinels
        .iter()
        .map(|s| address(&s.host, s.port))
        .collect::<Result<Vec<_>>>()?
        .join(",");
    let url = format!(
        "redis+sentinel://{}{hosts}/{master}/{db}",
        userinfo(username, password)
    );
    sentinel_endpoint(&url)?;
    Target::parse(&url)?;
    Ok(url)
}

/// `user:password@`, `user@`, `:password@` or nothing, percent-encoded.
fn userinfo(username: Option<&str>, password: Option<&str>) -> String {
    let encode = |s: &str| percent_encoding::utf8_percent_encode(s, USERINFO).to_string();
    match (username, password) {
        (None, None) => String::new(),
        (Some(user), None) => format!("{}@", encode(user)),
        (user, Some(pass)) => format!("{}:{}@", encode(user.unwrap_or_default()), encode(pass)),
    }
}

/// `host:port`, an IPv6 address in brackets.
fn address(host: &str, port: u16) -> Result<String> {
    if host.is_empty()
        || host.contains(['/', '@', ',', '?', '#'])
        || host.contains(char::is_whitespace)
    {
        return Err(Error::invalid(format!("bad Redis host {host:?}")));
    }
    Ok(if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    })
}

/// A parsed, checked server URL.
pub(crate) struct Target {
    pub(crate) url: String,
    pub(crate) display: String,
    pub(crate) secrets: Vec<String>,
    pub(crate) sentinel: bool,
    /// The server as errors name it: `host:port`, or the Sentinels' list.
    pub(crate) address: String,
}

impl Target {
    pub(crate) fn parse(raw: &str) -> Result<Self> {
        // Errors here never echo the URL: it may carry a password.
        let (scheme, _) = raw
            .split_once("://")
            .ok_or_else(|| Error::invalid("malformed Redis URL (expected scheme://host)"))?;
        let sentinel = match scheme {
            "redis" | "rediss" => false,
            "redis+sentinel" => true,
            other => {
                return Err(Error::invalid(format!(
                    "unsupported URL scheme {other:?} (expected redis://, rediss:// or redis+sentinel://)"
                )))
            }
        };
        // Sentinel lists several hosts; check the rest with the first one.
        let mut sentinels = String::new();
        let first_host = if sentinel {
            let (head, tail) = raw.split_once("://").unwrap_or_default();
            let (auth, rest) = match tail.rsplit_once('@') {
                Some((a, r)) => (format!("{a}@"), r),
                None => (String::new(), tail),
            };
            let (hosts, path) = rest.split_once('/').unwrap_or((rest, ""));
            let host = hosts.split(',').next().unwrap_or_default();
            sentinels = format!("Sentinel {hosts}");
            if path.is_empty() {
                return Err(Error::invalid(
                    "a redis+sentinel:// URL needs /service-name",
                ));
            }
            format!("{head}://{auth}{host}")
        } else {
            raw.to_owned()
        };
        let url = url::Url::parse(&first_host.replacen("redis+sentinel://", "redis://", 1))
            .map_err(|e| Error::invalid(format!("malformed Redis URL ({e})")))?;
        if url.host_str().is_none_or(str::is_empty) {
            return Err(Error::invalid("Redis URL has no host"));
        }
        if !sentinel {
            let path = url.path().trim_start_matches('/');
            if !path.is_empty() && path.parse::<u16>().is_err() {
                return Err(Error::invalid(
                    "Redis URL path must be a database number (like /0)",
                ));
            }
        }
        let mut secrets = Vec::new();
        if let Some(p) = url.password() {
            secrets.push(p.to_owned());
            if let Ok(decoded) = percent_encoding::percent_decode_str(p).decode_utf8() {
                secrets.push(decoded.into_owned());
            }
        }
        let display = secrets.iter().fold(raw.to_owned(), |shown, s| {
            shown.replace(&format!(":{s}@"), ":***@")
        });
        let address = if sentinel {
            sentinels
        } else {
            let host = url.host_str().unwrap_or_default();
            format!("{host}:{}", url.port().unwrap_or(6379))
        };
        Ok(Target {
            url: raw.to_owned(),
            display,
            secrets,
            sentinel,
            address,
        })
    }

    pub(crate) fn endpoint(&self, tls_ca_pem: Option<&[u8]>) -> Result<Endpoint> {
        let tls = self.url.starts_with("rediss:");
        if tls {
            install_tls_provider();
        }
        if self.sentinel {
            return sentinel_endpoint(&self.url).map(|s| Endpoint::Sentinel(Box::new(s)));
        }
        let client = match tls_ca_pem {
            Some(_) if !tls => {
                return Err(Error::invalid(
                    "a TLS CA certificate was given for a URL without TLS (use rediss://)",
                ))
            }
            Some(pem) => redis::Client::build_with_tls(self.url.as_str(), certificates(pem)),
            None => redis::Client::open(self.url.as_str()),
        };
        client.map(|c| Endpoint::Server(Box::new(c))).map_err(|e| {
            let mut m = e.to_string();
            for s in &self.secrets {
                m = m.replace(s.as_str(), "***");
            }
            Error::invalid(format!("bad Redis URL: {m}"))
        })
    }
}

pub(crate) fn certificates(pem: &[u8]) -> redis::TlsCertificates {
    redis::TlsCertificates {
        client_tls: None,
        root_cert: Some(pem.to_vec()),
    }
}

/// `redis+sentinel://[user:pass@]host:port[,host:port…]/service[/db]`.
fn sentinel_endpoint(raw: &str) -> Result<redis::sentinel::SentinelClient> {
    use redis::sentinel::{SentinelClientBuilder, SentinelServerType};
    let rest = raw.trim_start_matches("redis+sentinel://");
    let (auth, rest) = match rest.rsplit_once('@') {
        Some((a, r)) => (Some(a), r),
        None => (None, rest),
    };
    let (hosts, path) = rest.split_once('/').unwrap_or((rest, ""));
    let mut parts = path.split('/');
    let service = parts
        .next()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| Error::invalid("a redis+sentinel:// URL needs /service-name"))?;
    let db = match parts.next() {
        None | Some("") => 0,
        Some(d) => d
            .parse::<i64>()
            .map_err(|_| Error::invalid("the Sentinel URL's /db must be a number"))?,
    };
    let mut addrs = Vec::new();
    for h in hosts.split(',') {
        let (host, port) = match h.rsplit_once(':') {
            Some((host, port)) => (
                host,
                port.parse::<u16>()
                    .map_err(|_| Error::invalid(format!("bad Sentinel port in {h:?}")))?,
            ),
            None => (h, 26379),
        };
        if host.is_empty() {
            return Err(Error::invalid("a Sentinel host is empty"));
        }
        addrs.push(redis::ConnectionAddr::Tcp(host.to_owned(), port));
    }
    let invalid =
        |e: redis::RedisError| Error::invalid(format!("bad Sentinel settings: {:?}", e.kind()));
    let mut builder = SentinelClientBuilder::new(addrs, service, SentinelServerType::Master)
        .map_err(invalid)?
        .set_client_to_redis_db(db);
    if let Some(auth) = auth {
        let (user, pass) = auth.split_once(':').unwrap_or((auth, ""));
        let decode = |s: &str| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned()
        };
        if !user.is_empty() {
            builder = builder.set_client_to_redis_username(decode(user));
        }
        if !pass.is_empty() {
            builder = builder.set_client_to_redis_password(decode(pass));
        }
    }
    builder.build().map_err(invalid)
}

/// Installs ring as the process' rustls provider unless one is installed.
fn install_tls_provider() {
    // Err means a provider is already installed, which is as good.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_without_connecting_and_shown_without_password() {
        // Port 1 has no server: nothing here may try to connect.
        assert_eq!(
            checked("redis://:hunter2@127.0.0.1:1/0").unwrap(),
            "redis://:***@127.0.0.1:1/0"
        );
        assert_eq!(
            checked("redis://127.0.0.1:1").unwrap(),
            "redis://127.0.0.1:1"
        );
        for (url, address) in [
            ("redis://:hunter2@127.0.0.1:1/0", "127.0.0.1:1"),
            ("rediss://u:p@[::1]/0", "[::1]:6379"),
            ("redis+sentinel://:p@a:1,b:2/m", "Sentinel a:1,b:2"),
        ] {
            assert_eq!(Target::parse(url).unwrap().address, address);
        }
        for bad in [
            "http://127.0.0.1:1",
            "redis://",
            "not a url",
            "redis://h:1/db",
        ] {
            let err = checked(bad).unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)), "{bad}: {err}");
        }
        let err = checked("http://u:hunter2@127.0.0.1:1").unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }

    fn settings(host: &str, port: u16) -> ServerSettings {
        ServerSettings {
            host: host.to_owned(),
            port,
            db: 0,
            username: None,
            password: None,
            tls: false,
        }
    }

    #[test]
    fn settings_become_a_url_with_user_and_password_encoded() {
        assert_eq!(
            url_from_settings(&settings("localhost", 6379)).unwrap(),
            "redis://localhost:6379/0"
        );
        let full = ServerSettings {
            db: 3,
            username: Some("app user".into()),
            password: Some("p@ss:w/rd%".into()),
            tls: true,
            ..settings("::1", 6380)
        };
        let url = url_from_settings(&full).unwrap();
        assert_eq!(url, "rediss://app%20user:p%40ss%3Aw%2Frd%25@[::1]:6380/3");
        let target = Target::parse(&url).unwrap();
        assert!(target.secrets.contains(&"p@ss:w/rd%".to_owned()));
        let password_only = ServerSettings {
            password: Some("s".into()),
            ..settings("h", 1)
        };
        assert_eq!(
            url_from_settings(&password_only).unwrap(),
            "redis://:s@h:1/0"
        );
        for bad in [
            settings("", 1),
            settings("a/b", 1),
            ServerSettings {
                db: -1,
                ..settings("h", 1)
            },
        ] {
            assert!(url_from_settings(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn sentinel_settings_become_the_sentinel_url_form() {
        let sentinels = [settings("10.0.0.1", 26379), settings("10.0.0.2", 26380)];
        assert_eq!(
            sentinel_url_from_settings("mymaster", &sentinels, 2, None, Some("pw"), false).unwrap(),
            "redis+sentinel://:pw@10.0.0.1:26379,10.0.0.2:26380/mymaster/2"
        );
        assert!(sentinel_url_from_settings("mymaster", &sentinels, 0, None, None, true).is_err());
        assert!(sentinel_url_from_settings("", &sentinels, 0, None, None, false).is_err());
        assert!(sentinel_url_from_settings("m", &[], 0, None, None, false).is_err());
        let with_auth = [ServerSettings {
            password: Some("x".into()),
            ..settings("h", 26379)
        }];
        assert!(sentinel_url_from_settings("m", &with_auth, 0, None, None, false).is_err());
    }
}
