//! TLS for `rediss://` URLs, on rustls with the ring provider (no OpenSSL, so
//! the wheels and addons stay portable).

/// Installs ring as the process' rustls provider unless one is installed.
pub(crate) fn install_provider() {
    // Err means a provider is already installed, which is as good.
    let _ = rustls::crypto::ring::default_provider().install_default();
}
