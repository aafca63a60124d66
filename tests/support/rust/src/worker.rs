//! A second process for a test: the test binary itself, running one of its
//! ignored tests as the worker.

use std::process::{Child, Command, Stdio};

/// Runs `test` of the current test binary as a separate process, with
/// `args` in the environment: for tests that need a second process. The
/// worker is an ignored test, so it never runs (or counts) on its own.
pub fn worker_process(test: &str, args: &[String]) -> Child {
    worker_command(test, args)
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

/// The command [`worker_process`] runs, for a caller that wires its stdio.
pub fn worker_command(test: &str, args: &[String]) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([
        "--ignored",
        "--exact",
        test,
        "--nocapture",
        "--test-threads",
        "1",
        "--quiet",
    ])
    .env("RLOCK_WORKER_ARGS", args.join(" "));
    c
}

/// The arguments a [`worker_process`] was started with.
pub fn worker_args() -> Vec<String> {
    std::env::var("RLOCK_WORKER_ARGS")
        .expect("started by worker_process")
        .split(' ')
        .map(str::to_owned)
        .collect()
}
