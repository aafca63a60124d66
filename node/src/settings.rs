//! Reusing an application's Redis settings (`Client.fromIoredis()`): the JS
//! face reads them from the application's client, and the core turns them
//! into the URL this package connects to, so a password is encoded and
//! checked the one way every URL is.

use napi::Env;
use napi_derive::napi;

use crate::error::{ErrorFactory, Errors, Failure};

/// One server's settings (the core's `ServerSettings`).
#[napi(object, object_to_js = false)]
pub struct ServerSettings {
    pub host: String,
    pub port: u16,
    pub db: i64,
    pub username: Option<String>,
    pub password: Option<String>,
    pub tls: bool,
}

impl From<ServerSettings> for rlock_core::ServerSettings {
    fn from(s: ServerSettings) -> Self {
        rlock_core::ServerSettings {
            host: s.host,
            port: s.port,
            db: s.db,
            username: s.username,
            password: s.password,
            tls: s.tls,
        }
    }
}

/// The `redis://` (or `rediss://`) URL of one server.
#[napi(catch_unwind)]
pub fn url_from_settings(
    env: &Env,
    settings: ServerSettings,
    make_error: ErrorFactory,
) -> napi::Result<String> {
    rlock_core::url_from_settings(&settings.into())
        .map_err(|e| Errors::new(make_error).to_js(env, Failure::from(e)))
}

/// The `redis+sentinel://` URL of the master `master` watched by `sentinels`;
/// `db`, `username`, `password` and `tls` are the master's.
#[napi(catch_unwind)]
#[allow(clippy::too_many_arguments)]
pub fn sentinel_url_from_settings(
    env: &Env,
    master: String,
    sentinels: Vec<ServerSettings>,
    db: i64,
    username: Option<String>,
    password: Option<String>,
    tls: bool,
    make_error: ErrorFactory,
) -> napi::Result<String> {
    let sentinels: Vec<rlock_core::ServerSettings> =
        sentinels.into_iter().map(Into::into).collect();
    rlock_core::sentinel_url_from_settings(
        &master,
        &sentinels,
        db,
        username.as_deref(),
        password.as_deref(),
        tls,
    )
    .map_err(|e| Errors::new(make_error).to_js(env, Failure::from(e)))
}
