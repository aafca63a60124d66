//! Connecting and closing: a client handle is one core `Client`, shared by
//! the locks made from it.

use rlock_core::{Client, ClientOptions};

use crate::completion::{self, Done};
use crate::failure::{RLOCK_INTERNAL, RLOCK_INVALID};
use crate::handles::CLIENTS;
use crate::requests;
use crate::text::{read_all, RlockStr};

/// How to connect, besides the URLs.
#[repr(C)]
pub struct RlockClientOptions {
    /// The key prefix; empty: the default (`rlock`).
    pub prefix: RlockStr,
    /// The URLs are seed nodes of one Redis Cluster.
    pub cluster: bool,
    /// The PEM of the CA that signed the servers' certificates (`rediss://`
    /// with a private CA); empty: none.
    pub tls_ca_pem: RlockStr,
    /// The runtime in the client's registration (`go1.26.8`).
    pub face: RlockStr,
}

/// Connects to `urls` (none: `$REDIS_URL`, else `redis://127.0.0.1:6379`):
/// one URL, several masters (a Redlock), or with `cluster` the seeds of one
/// Cluster. Completes `token` with the client's handle as its value. Returns
/// [`RLOCK_OK`](crate::failure::RLOCK_OK) once started,
/// [`RLOCK_INTERNAL`] when [`rlock_init`](crate::completion::rlock_init) was not called
/// (nothing then completes).
///
/// # Safety
/// `urls` points at `n` strings readable during the call (or `n` is 0), and
/// `options` at one [`RlockClientOptions`] whose strings are readable during
/// the call.
#[no_mangle]
pub unsafe extern "C" fn rlock_connect(
    urls: *const RlockStr,
    n: usize,
    options: *const RlockClientOptions,
    token: u64,
) -> i32 {
    if !completion::ready() || options.is_null() {
        return RLOCK_INTERNAL;
    }
    let given = || -> rlock_core::Result<(Vec<String>, ClientOptions)> {
        let o = &*options;
        let mut urls = read_all(urls, n, "a URL")?;
        if urls.is_empty() {
            urls.push(Client::default_url());
        }
        let mut client = ClientOptions::default()
            .cluster(o.cluster)
            .face(o.face.read("the face")?);
        let prefix = o.prefix.read("the prefix")?;
        if !prefix.is_empty() {
            client = client.prefix(prefix);
        }
        let pem = o.tls_ca_pem.read("the CA certificate")?;
        if !pem.is_empty() {
            client = client.tls_ca_pem(Some(pem.into_bytes()));
        }
        Ok((urls, client))
    };
    requests::guard(token, || {
        let given = given();
        requests::start(token, false, async move {
            let (urls, options) = given?;
            let inner = Client::connect_urls(&urls, options).await?;
            Ok(Done::Value(CLIENTS.insert(inner)))
        })
    });
    crate::failure::RLOCK_OK
}

/// Closes the client: every lock still held counts as lost (its holder
/// told), each is released best effort, and every later operation fails
/// with [`RLOCK_CLOSED`](crate::failure::RLOCK_CLOSED). Completes `token`
/// once those releases are done (at most about 2 s). The handle stays valid
/// until [`rlock_client_free`].
///
/// Returns [`RLOCK_INVALID`] for a handle that is not a live client's
/// (nothing then completes).
#[no_mangle]
pub extern "C" fn rlock_client_close(client: u64, token: u64) -> i32 {
    if !completion::ready() {
        return RLOCK_INTERNAL;
    }
    let Some(client) = CLIENTS.get(client) else {
        return RLOCK_INVALID;
    };
    requests::guard(token, || {
        let closing = client.close();
        requests::start(token, false, async move {
            closing.await;
            Ok(Done::Value(0))
        })
    });
    crate::failure::RLOCK_OK
}

/// Frees a client handle (closing it first if it was not); a handle that
/// is not a live client's does nothing. Its locks stay valid handles, whose
/// operations then fail as closed.
#[no_mangle]
pub extern "C" fn rlock_client_free(client: u64) {
    let _ = std::panic::catch_unwind(|| {
        if let Some(client) = CLIENTS.remove(client) {
            drop(client.close());
        }
    });
}
