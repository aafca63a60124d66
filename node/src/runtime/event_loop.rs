//! The JS thread drives the core's runtime while its event loop would
//! otherwise sleep, so an operation that outlasts its inline slice (a wait
//! for a lock, above all) is finished on the JS thread too: the release
//! message wakes this thread, which settles the promise and runs the
//! continuation (typically the critical section, then `release()`) with no
//! hand-over from the runtime's background thread, which would cost a thread
//! wake-up on every handoff.
//!
//! How: a libuv prepare handle runs just before the loop polls for I/O, when
//! every callback and microtask of this turn has run. If operations handed to
//! the runtime are still pending, it drives the runtime until whichever comes
//! first: the loop has I/O (its backend fd turns readable: sockets, signals,
//! other threads' wake-ups), its next timer is due, or an operation settled
//! (its promise callback is queued in the loop). The loop then goes on as it
//! would have, so nothing JS waits on is delayed. When the JS thread is busy
//! instead, the runtime's background thread drives after a moment.
//!
//! Node's N-API has no hook for this, so the few libuv calls it needs are
//! declared here; they resolve against the `node` executable, which exports
//! libuv for addons. That reach under N-API (and the loop layout it relies
//! on, Linux only) is why this sits apart from the promise bridge in
//! `runtime.rs`, whose count of pending operations it reads.

use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use napi::Env;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

use super::{pending, turn_began, SETTLED};

/// The longest the JS thread drives the runtime in one turn of its loop.
const MAX_TURN: Duration = Duration::from_millis(500);

#[allow(non_camel_case_types)]
type uv_loop_t = c_void;
#[allow(non_camel_case_types)]
type uv_handle_t = c_void;

/// `UV_PREPARE` of libuv's `uv_handle_type`.
const UV_PREPARE: c_int = 9;

extern "C" {
    fn uv_handle_size(kind: c_int) -> usize;
    fn uv_prepare_init(uv_loop: *mut uv_loop_t, handle: *mut uv_handle_t) -> c_int;
    fn uv_prepare_start(handle: *mut uv_handle_t, cb: extern "C" fn(*mut uv_handle_t)) -> c_int;
    fn uv_prepare_stop(handle: *mut uv_handle_t) -> c_int;
    fn uv_close(handle: *mut uv_handle_t, cb: extern "C" fn(*mut uv_handle_t));
    fn uv_unref(handle: *mut uv_handle_t);
    fn uv_handle_get_loop(handle: *const uv_handle_t) -> *mut uv_loop_t;
    fn uv_backend_fd(uv_loop: *const uv_loop_t) -> c_int;
    fn uv_backend_timeout(uv_loop: *const uv_loop_t) -> c_int;
    fn uv_update_time(uv_loop: *mut uv_loop_t);
}

/// Where `uv.h` (libuv 1.x, Unix) puts the loop's `backend_fd` and
/// `watcher_queue`: after `data`, `active_handles`, `handle_queue`,
/// `active_reqs`, `internal_fields`, `stop_flag` and `flags`. Checked against
/// `uv_backend_fd` before use: on a mismatch the JS thread never drives.
const BACKEND_FD_OFFSET: usize = 64;
const WATCHER_QUEUE_OFFSET: usize = 88;

/// Whether the loop has socket watches not yet handed to its epoll set:
/// libuv hands them over only as it polls, after this callback, so until
/// then their I/O cannot wake a drive (a connection just accepted, a write
/// that met back-pressure). `None` when the layout is not the expected one.
///
/// # Safety
/// `uv_loop` is the live loop of this thread.
unsafe fn has_new_watches(uv_loop: *mut uv_loop_t) -> Option<bool> {
    let base = uv_loop.cast::<u8>();
    // SAFETY: both offsets lie inside `uv_loop_t`, whose public layout puts
    // an int and a two-pointer queue there.
    unsafe {
        if base.add(BACKEND_FD_OFFSET).cast::<c_int>().read() != uv_backend_fd(uv_loop) {
            return None;
        }
        let queue = base.add(WATCHER_QUEUE_OFFSET).cast::<*mut c_void>();
        Some(queue.read() != queue.cast::<c_void>())
    }
}

thread_local! {
    /// Whether this JS thread's loop has the prepare handle.
    static INSTALLED: Cell<bool> = const { Cell::new(false) };
}

/// Gives this JS thread's event loop the prepare handle, once. On failure the
/// background thread simply goes on driving everything.
pub(super) fn install(env: &Env) {
    // Linux only: libuv's backend fd elsewhere (a kqueue) may never report
    // the events of the fds it watches to another poller.
    if INSTALLED.get() || !cfg!(target_os = "linux") {
        return;
    }
    INSTALLED.set(true);
    let Ok(uv_loop) = env.get_uv_event_loop() else {
        return;
    };
    // SAFETY: a zeroed buffer of the size libuv reports for a prepare handle,
    // initialised and started on this (the loop's) thread; libuv owns it until
    // the close callback, which frees it.
    let handle = unsafe {
        let size = uv_handle_size(UV_PREPARE);
        let handle = std::alloc::alloc_zeroed(layout(size)).cast::<c_void>();
        if handle.is_null() {
            return;
        }
        if uv_prepare_init(uv_loop.cast(), handle) != 0 {
            std::alloc::dealloc(handle.cast(), layout(size));
            return;
        }
        // Never keeps the process alive on its own.
        uv_unref(handle);
        uv_prepare_start(handle, on_prepare);
        handle as usize
    };
    // Closed with the environment (a worker thread ending, Node exiting);
    // at once if that cannot be arranged, as a live handle would make a
    // worker's loop fail to close.
    if env.add_env_cleanup_hook(handle, close).is_err() {
        close(handle);
    }
}

fn close(handle: usize) {
    INSTALLED.set(false);
    let handle = handle as *mut uv_handle_t;
    // SAFETY: the handle started in `install`, on this same thread.
    unsafe {
        uv_prepare_stop(handle);
        uv_close(handle, on_closed);
    }
}

fn layout(size: usize) -> std::alloc::Layout {
    std::alloc::Layout::from_size_align(size.max(1), 16).expect("a handle's layout")
}

extern "C" fn on_closed(handle: *mut uv_handle_t) {
    // SAFETY: allocated in `install` with this layout; libuv is done with it.
    unsafe {
        let size = uv_handle_size(UV_PREPARE);
        std::alloc::dealloc(handle.cast(), layout(size));
    }
}

extern "C" fn on_prepare(handle: *mut uv_handle_t) {
    turn_began();
    if pending() == 0 {
        return;
    }
    // Never unwinds into libuv: a panic only ends this turn's driving.
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: libuv calls back with the live handle, on the loop's thread.
        let uv_loop = unsafe { uv_handle_get_loop(handle) };
        // SAFETY: this thread's live loop.
        if unsafe { has_new_watches(uv_loop) } != Some(false) {
            return;
        }
        if drive_until_loop_has_work(uv_loop) {
            // The loop read its clock before this callback; its next timeout
            // is counted from a clock read after the drive.
            // SAFETY: as above.
            unsafe { uv_update_time(uv_loop) };
        }
    });
}

/// The loop's backend (epoll) fd, watched for readiness only: never read or closed here.
struct Backend(RawFd);

impl AsRawFd for Backend {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// Whether it drove the runtime at all.
fn drive_until_loop_has_work(uv_loop: *mut uv_loop_t) -> bool {
    // SAFETY: queries of the loop whose prepare callback this is.
    let (timeout_ms, fd) = unsafe { (uv_backend_timeout(uv_loop), uv_backend_fd(uv_loop)) };
    if timeout_ms == 0 || fd < 0 {
        return false; // the loop has work at once
    }
    let Ok(driver) = super::get() else {
        return false;
    };
    driver.block_on(async {
        let settled = SETTLED.notified();
        tokio::pin!(settled);
        settled.as_mut().enable();
        if pending() == 0 {
            return;
        }
        // Registering reports the fd's current readiness too, so I/O that
        // arrived before this turn is never missed.
        // SAFETY: the loop's backend fd stays open while the loop runs, and
        // this registration ends (on drop) before this callback returns.
        let Ok(backend) =
            (unsafe { AsyncFd::register_with_interest(Backend(fd), Interest::READABLE) })
        else {
            return;
        };
        // -1: no timer. Capped all the same, so a wake-up the backend fd
        // did not show could only ever stall the loop this long.
        let due = u64::try_from(timeout_ms)
            .map_or(MAX_TURN, |ms| MAX_TURN.min(Duration::from_millis(ms)));
        tokio::select! {
            _ = backend.readable() => {}
            _ = tokio::time::sleep(due) => {}
            _ = settled => {}
        }
    });
    true
}
