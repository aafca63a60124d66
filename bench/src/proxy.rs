//! A TCP proxy in front of Redis that counts round trips: a request that the
//! client sends while every command it sent before has been answered starts
//! a new round trip; commands sent while replies are still due (a pipeline)
//! belong to the trip in progress. Prints its port, then on each `report`
//! line of stdin prints every trip so far as `[start ns, commands]`.

use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::{now_ns, Result};

type Log = Arc<Mutex<Vec<(i64, u64)>>>;

pub(crate) fn run(runtime: &tokio::runtime::Runtime, upstream: &str) -> Result<()> {
    let log: Log = Arc::default();
    let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0"))?;
    println!("{}", listener.local_addr()?.port());
    std::io::stdout().flush()?;
    let upstream = upstream.to_owned();
    let accepting = log.clone();
    runtime.spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let (log, upstream) = (accepting.clone(), upstream.clone());
            tokio::spawn(async move {
                if let Ok(server) = TcpStream::connect(&upstream).await {
                    let _ = forward(client, server, log).await;
                }
            });
        }
    });
    let mut out = std::io::stdout().lock();
    for line in std::io::stdin().lock().lines() {
        if line?.trim() == "report" {
            let trips = log.lock().unwrap().clone();
            writeln!(out, "{}", json!({ "trips": trips }))?;
            out.flush()?;
        }
    }
    Ok(())
}

/// What one connection has sent and had answered.
#[derive(Default)]
struct Turns {
    sent: u64,
    answered: u64,
    /// The client is in the middle of a command.
    partial: bool,
    trip: usize,
}

async fn forward(client: TcpStream, server: TcpStream, log: Log) -> std::io::Result<()> {
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    let (mut client_rx, mut client_tx) = client.into_split();
    let (mut server_rx, mut server_tx) = server.into_split();
    let turns = Arc::new(Mutex::new(Turns::default()));
    let requests = {
        let turns = turns.clone();
        async move {
            let mut parser = Resp::default();
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = client_rx.read(&mut buf).await?;
                if n == 0 {
                    return server_tx.shutdown().await;
                }
                {
                    let mut t = turns.lock().unwrap();
                    let mut log = log.lock().unwrap();
                    if !t.partial && t.sent == t.answered {
                        log.push((now_ns(), 0));
                        t.trip = log.len() - 1;
                    }
                    let commands = parser.feed(&buf[..n]);
                    t.sent += commands;
                    t.partial = parser.pending();
                    log[t.trip].1 += commands;
                }
                server_tx.write_all(&buf[..n]).await?;
            }
        }
    };
    let replies = async move {
        let mut parser = Resp::default();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = server_rx.read(&mut buf).await?;
            if n == 0 {
                return client_tx.shutdown().await;
            }
            // Counted before the client can see them, so its next request
            // never looks like part of a trip already answered.
            turns.lock().unwrap().answered += parser.feed(&buf[..n]);
            client_tx.write_all(&buf[..n]).await?;
        }
    };
    let (a, b) = tokio::join!(requests, replies);
    a.and(b)
}

/// Counts complete RESP messages in a byte stream.
#[derive(Default)]
struct Resp {
    buf: Vec<u8>,
}

impl Resp {
    fn feed(&mut self, data: &[u8]) -> u64 {
        self.buf.extend_from_slice(data);
        let mut pos = 0;
        let mut count = 0;
        while let Some(len) = message(&self.buf[pos..]) {
            pos += len;
            count += 1;
        }
        self.buf.drain(..pos);
        count
    }

    fn pending(&self) -> bool {
        !self.buf.is_empty()
    }
}

/// The length of the complete message at the start of `b`, if it is complete.
fn message(b: &[u8]) -> Option<usize> {
    let cr = b.windows(2).position(|w| w == b"\r\n")?;
    let after = cr + 2;
    let number = || -> Option<i64> { std::str::from_utf8(&b[1..cr]).ok()?.parse().ok() };
    match *b.first()? {
        b'$' | b'!' | b'=' => match number()? {
            n if n < 0 => Some(after),
            n => {
                let end = after + n as usize + 2;
                (b.len() >= end).then_some(end)
            }
        },
        kind @ (b'*' | b'~' | b'>' | b'%' | b'|') => {
            let n = number()?;
            let items = if kind == b'%' || kind == b'|' {
                2 * n
            } else {
                n
            };
            let mut pos = after;
            for _ in 0..items.max(0) {
                pos += message(&b[pos..])?;
            }
            Some(pos)
        }
        // Simple types, and inline commands: one line.
        _ => Some(after),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_messages_split_anywhere() {
        let stream = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n+OK\r\n*2\r\n:1\r\n$-1\r\n";
        for cut in 0..stream.len() {
            let mut r = Resp::default();
            let n = r.feed(&stream[..cut]) + r.feed(&stream[cut..]);
            assert_eq!(n, 3);
            assert!(!r.pending());
        }
    }
}
