//! The Node binding of redis-rlock: the private native module behind the JS
//! face in `node/index.js`. It converts arguments, maps errors and wires
//! cancellation; every decision about locking is the core's (`rlock-core`).

// napi registers exports only outside cfg(test), so clippy's test build of
// this crate would see them as unused.
#![cfg_attr(test, allow(dead_code))]

mod client;
mod error;
mod event_loop;
mod lock;

use std::sync::OnceLock;

use rlock_core::driver::Driver;

/// The runtime every operation runs on, built on first use: the JS thread
/// drives it while it runs an operation, a background thread the rest of the
/// time (see `rlock_core::driver`). Leaked: it lives as long as the process,
/// like its thread.
pub(crate) fn driver() -> napi::Result<&'static Driver> {
    static DRIVER: OnceLock<Result<&'static Driver, String>> = OnceLock::new();
    DRIVER
        .get_or_init(|| {
            let driver: &'static Driver = Box::leak(Box::new(
                Driver::new("rlock-runtime").map_err(|e| e.to_string())?,
            ));
            std::thread::Builder::new()
                .name("rlock-runtime".to_owned())
                .spawn(move || driver.run_background())
                .map_err(|e| e.to_string())?;
            Ok(driver)
        })
        .clone()
        .map_err(|e| napi::Error::from_reason(format!("could not start the rlock runtime: {e}")))
}
