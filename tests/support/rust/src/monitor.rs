//! The commands clients send to a server, seen through MONITOR.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Records the commands clients send (not those scripts run inside Redis),
/// in the order the server executed them.
pub struct Monitor {
    seen: Arc<Mutex<Vec<String>>>,
    marker: TcpStream,
    marks: usize,
    consumed: usize,
}

impl Monitor {
    pub(crate) fn start(port: u16) -> Self {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream.write_all(b"MONITOR\r\n").unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut ok = String::new();
        reader.read_line(&mut ok).unwrap();
        assert_eq!(ok.trim(), "+OK");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        std::thread::spawn(move || {
            for line in reader.lines() {
                let Ok(line) = line else { return };
                // `+ts [db addr] "cmd" ...`; script calls show `[db lua]`.
                let Some((source, rest)) = line.split_once("] ") else {
                    continue;
                };
                if source.ends_with(" lua") {
                    continue;
                }
                let cmd = rest.split('"').nth(1).unwrap_or("").to_ascii_lowercase();
                let arg = rest.split('"').nth(3).unwrap_or("").to_owned();
                sink.lock().unwrap().push(if cmd == "echo" {
                    format!("echo {arg}")
                } else {
                    cmd
                });
            }
        });
        let marker = TcpStream::connect(("127.0.0.1", port)).unwrap();
        Monitor {
            seen,
            marker,
            marks: 0,
            consumed: 0,
        }
    }

    /// The commands clients sent since the previous mark (or the start), made
    /// exact by a marker command the server executes after all of them.
    pub fn mark(&mut self) -> Vec<String> {
        self.marks += 1;
        let marker = format!("echo rlock-mark-{}", self.marks);
        let cmd = format!("ECHO rlock-mark-{}\r\n", self.marks);
        self.marker.write_all(cmd.as_bytes()).unwrap();
        let mut reply = [0u8; 64];
        let _ = self.marker.read(&mut reply).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            {
                let seen = self.seen.lock().unwrap();
                if let Some(at) = seen[self.consumed..].iter().position(|c| *c == marker) {
                    let out = seen[self.consumed..self.consumed + at].to_vec();
                    self.consumed += at + 1;
                    return out;
                }
            }
            assert!(Instant::now() < deadline, "MONITOR never showed the marker");
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}
