//! How the commands that inspect locks show a holder or a waiter: its
//! host, pid and unit for a person (scripts get `Party::to_json`).

use rlock_core::Party;

/// `host pid 4242 (python 3.11.4) unit 4242:t1:MainThread`, or the owner id
/// alone when its client left no registration.
pub fn text(p: &Party) -> String {
    match &p.client {
        Some(c) => {
            let pid = c.pid.map_or("?".to_owned(), |n| n.to_string());
            format!("{} pid {pid} ({}) unit {}", c.host, c.face, p.unit)
        }
        None => format!("owner {} (no registration)", p.owner),
    }
}
