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

/// A parsed, checked server URL.
pub(crate) struct Target {
    pub(crate) url: String,
    pub(crate) display: String,
    pub(crate) secrets: Vec<String>,
    pub(crate) sentinel: bool,
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
        let first_host = if sentinel {
            let (head, tail) = raw.split_once("://").unwrap_or_default();
            let (auth, rest) = match tail.rsplit_once('@') {
                Some((a, r)) => (format!("{a}@"), r),
                None => (String::new(), tail),
            };
            let (hosts, path) = rest.split_once('/').unwrap_or((rest, ""));
            let host = hosts.split(',').next().unwrap_or_default();
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
        Ok(Target {
            url: raw.to_owned(),
            display,
            secrets,
            sentinel,
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
}
