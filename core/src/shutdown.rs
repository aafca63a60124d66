//! The signal that stops a client's background tasks (the renewal loop, the
//! pub/sub feeds): given by `close()`, or when the client's last handle is
//! dropped.

use tokio::sync::watch;

/// Resolves once the client is closed or dropped: background tasks stop then.
pub(crate) struct Shutdown(watch::Receiver<bool>);

impl Shutdown {
    /// Listens to `switch`, which turns true to shut down.
    pub(crate) fn of(switch: &watch::Sender<bool>) -> Self {
        Shutdown(switch.subscribe())
    }

    pub(crate) async fn signalled(&mut self) {
        // Err: the client is gone, which is a shutdown too.
        let _ = self.0.wait_for(|closed| *closed).await;
    }
}
