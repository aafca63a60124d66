//! What a Python `Client` and every lock made from it share: the URLs and
//! options it was made with, and the connection of this process, made on
//! first use (and made afresh in a forked child, which must not touch the
//! parent's).

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use rlock_core::{Client as CoreClient, ClientOptions, Error};
use tokio::sync::OnceCell;

use crate::runtime;

/// A client's connection state, which every lock made from it uses.
pub struct ClientState {
    /// One URL, the seeds of a Cluster, or the masters of a Redlock.
    urls: Vec<String>,
    /// The URLs as they may be shown: never with a password.
    server: String,
    options: ClientOptions,
    conn: Mutex<Conn>,
}

/// The connection of one process generation (see `runtime::generation`).
struct Conn {
    generation: u64,
    client: Arc<OnceCell<CoreClient>>,
    closed: bool,
}

impl Conn {
    fn new() -> Self {
        Conn {
            generation: runtime::generation(),
            client: Arc::new(OnceCell::new()),
            closed: false,
        }
    }

    /// In a forked child, starts over with no connection.
    fn refresh(&mut self) {
        if self.generation != runtime::generation() {
            let closed = self.closed;
            let parents = std::mem::replace(self, Conn::new());
            self.closed = closed;
            drop(parents);
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if self.generation != runtime::generation() {
            // The parent's client: its sockets and runtime are the parent's.
            std::mem::forget(std::mem::replace(
                &mut self.client,
                Arc::new(OnceCell::new()),
            ));
        }
    }
}

impl ClientState {
    pub fn new(urls: Vec<String>, server: String, options: ClientOptions) -> Self {
        ClientState {
            urls,
            server,
            options,
            conn: Mutex::new(Conn::new()),
        }
    }

    /// The URLs as they may be shown (never with a password).
    pub fn server(&self) -> &str {
        &self.server
    }

    pub fn options(&self) -> &ClientOptions {
        &self.options
    }

    /// Whether the client was closed.
    pub fn closed(&self) -> bool {
        self.conn().closed
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Conn> {
        let mut conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        conn.refresh();
        conn
    }

    /// The core client, connecting on first use in this process.
    pub fn connected(
        &self,
    ) -> impl Future<Output = rlock_core::Result<CoreClient>> + Send + 'static {
        // Connected already (every call but the first): nothing to copy.
        let state = {
            let conn = self.conn();
            match (conn.client.get(), conn.closed) {
                // Closed after connecting: the core refuses what it must (and
                // still says which holdings the close ended).
                (Some(client), _) => Ok(Ok(client.clone())),
                (None, true) => Err(Error::Closed),
                (None, false) => Ok(Err((
                    conn.client.clone(),
                    self.urls.clone(),
                    self.options.clone(),
                ))),
            }
        };
        async move {
            match state? {
                Ok(client) => Ok(client),
                Err((cell, urls, options)) => cell
                    .get_or_try_init(|| CoreClient::connect_urls(&urls, options))
                    .await
                    .cloned(),
            }
        }
    }

    /// The core client if this process has connected (no I/O).
    pub fn current(&self) -> Option<CoreClient> {
        self.conn().client.get().cloned()
    }

    /// Marks the client closed and closes the core client, if connected;
    /// the future ends when the core's releases are done.
    pub fn close(&self) -> impl Future<Output = ()> + Send + 'static {
        let closing = {
            let mut conn = self.conn();
            conn.closed = true;
            conn.client.get().map(CoreClient::close)
        };
        async move {
            if let Some(closing) = closing {
                closing.await;
            }
        }
    }
}
