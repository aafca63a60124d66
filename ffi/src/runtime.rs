//! The runtime every request runs on: the core's `Driver`, driven by a
//! thread of its own (no caller thread ever waits in this library), built
//! on first use and kept for the life of the process.

use std::future::Future;
use std::sync::OnceLock;

use rlock_core::driver::Driver;

pub(crate) fn get() -> Option<&'static Driver> {
    static DRIVER: OnceLock<Option<&'static Driver>> = OnceLock::new();
    *DRIVER.get_or_init(|| {
        let driver: &'static Driver = Box::leak(Box::new(Driver::new("rlock-runtime").ok()?));
        std::thread::Builder::new()
            .name("rlock-runtime".to_owned())
            .spawn(move || driver.run_background())
            .ok()?;
        Some(driver)
    })
}

/// Runs `fut` on the runtime (started by `rlock_init`).
pub(crate) fn spawn(fut: impl Future<Output = ()> + Send + 'static) {
    if let Some(driver) = get() {
        drop(driver.spawn(fut));
    }
}
