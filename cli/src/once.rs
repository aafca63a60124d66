//! `rlock once NAME CMD`: a run-once job. Every machine's cron may run it at
//! the same hour; CMD runs on the one that takes the job's lock, the others
//! skip at once (exit 0, or --skip-exit's CODE), and the lock stays taken
//! until --at-least seconds after CMD started, so a machine whose cron fires
//! a little later skips that period too (ShedLock's lockAtLeastFor). The
//! lock is taken for --at-most seconds, not renewed (lockAtMostFor).

use std::ffi::OsString;
use std::time::Duration;

use clap::Args;
use rlock_core::{validate, Error, JobArgs, JobOptions, Unit};

use crate::error::fail;
use crate::exec::{ended, run_under, Invocation};
use crate::{exit, Connection};

#[derive(Args, Debug)]
#[command(
    override_usage = "rlock once [OPTIONS] NAME [--] CMD [ARGS]...\n       rlock once [OPTIONS] -c COMMAND NAME"
)]
pub struct OnceArgs {
    #[command(flatten)]
    connection: Connection,
    /// Seconds from CMD's start during which the job is not run again,
    /// however soon CMD ends.
    #[arg(long, value_name = "SECS", default_value_t = 0.0)]
    at_least: f64,
    /// How long the job's lock is taken for while CMD runs (not renewed);
    /// past it another machine may run the job.
    #[arg(long, value_name = "SECS", default_value_t = rlock_core::DEFAULT_AT_MOST.as_secs_f64())]
    at_most: f64,
    /// The exit status when the job ran elsewhere this period.
    #[arg(long, value_name = "CODE", default_value_t = 0)]
    skip_exit: u8,
    /// Run COMMAND through `sh -c` instead of CMD [ARGS]...
    #[arg(short = 'c', long = "command", value_name = "COMMAND")]
    shell_command: Option<OsString>,
    /// Seconds between SIGTERM and SIGKILL when the job's lock is lost.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    grace: f64,
    /// The job's name, then the command to run and its arguments, with or
    /// without `--` between them. With -c, NAME alone.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "NAME [--] CMD [ARGS]"
    )]
    words: Vec<OsString>,
}

impl OnceArgs {
    /// Every flag checked, before any I/O.
    fn check(&self, name: &str) -> rlock_core::Result<(JobOptions, Duration)> {
        let options = JobArgs {
            at_least: Some(self.at_least),
            at_most: Some(self.at_most),
            ..JobArgs::new(Unit::Seconds)
        }
        .check()?;
        let grace = validate::span(self.grace, Unit::Seconds)
            .map_err(|problem| Error::invalid(format!("--grace {problem}")))?;
        validate::name(name)?;
        Ok((options, grace))
    }
}

pub async fn run(args: OnceArgs) -> u8 {
    let target = match Invocation::of(&args.words, args.shell_command.as_ref()) {
        Ok(t) => t,
        Err(problem) => {
            eprintln!("rlock: {problem}");
            return exit::USAGE;
        }
    };
    let (options, grace) = match args.check(&target.name) {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let (mut signals, client) = match args.connection.signals_and_client().await {
        Ok(both) => both,
        Err(code) => return code,
    };
    let job = match client.start_job(&target.name, options).await {
        Ok(Some(job)) => job,
        // The core logs the skip (`-vv` shows it).
        Ok(None) => return args.skip_exit,
        Err(e) => return fail(&e),
    };
    let fence = job.fencing_token();
    match run_under(job.lock(), &target, fence, grace, &mut signals).await {
        Ok(ran) => ended(job.finish().await, ran),
        // Not run: another machine may run it this period after all.
        Err(code) => {
            let _ = job.lock().release().await;
            code
        }
    }
}
