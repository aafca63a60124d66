use std::net::TcpListener;

/// A loopback port nothing listens on now. Another process may take it
/// before the caller binds it: whoever starts a server there must be ready
/// to try again on another.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free loopback port")
}
