//! How the commands that inspect locks show a holder or a waiter: its
//! host, pid and unit for a person (scripts get `Owner::to_json`), and
//! whether it is still there to hold anything.

use nix::errno::Errno;
use nix::sys::signal::kill;
use nix::unistd::Pid;
use rlock_core::{ClientInfo, Owner};

/// `host pid 4242 (python 3.11.4) unit 4242:t1:MainThread`, with a word on
/// a pid of this host that no process has any more (`(cli, exited: no such
/// process on this host)`); or the owner id alone when its client's
/// registration ran out (it was not renewed).
pub fn text(p: &Owner) -> String {
    match &p.client {
        Some(c) => {
            let pid = c.pid.map_or("?".to_owned(), |n| n.to_string());
            let gone = match alive_here(c) {
                Some(false) => ", exited: no such process on this host",
                _ => "",
            };
            format!("{} pid {pid} ({}{gone}) unit {}", c.host, c.face, p.unit)
        }
        None => format!(
            "owner {} (its client no longer registered: it exited or lost Redis)",
            p.owner
        ),
    }
}

/// Whether the registered process is running, when it registered from
/// this host (`None`: another host's, or no pid). A process of another
/// user counts as running.
fn alive_here(c: &ClientInfo) -> Option<bool> {
    let pid = i32::try_from(c.pid?).ok().filter(|p| *p > 0)?;
    if !c.on_this_host() {
        return None;
    }
    Some(!matches!(kill(Pid::from_raw(pid), None), Err(Errno::ESRCH)))
}
