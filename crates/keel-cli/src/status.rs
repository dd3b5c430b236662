//! `keel status ADDR`: the engine status report of a running process,
//! fetched from its metrics endpoint (`GET /status`, served beside
//! `/metrics` by `keel bench oltp --metrics-listen` and `Db::serve_metrics`)
//! with a plain HTTP/1.0 request, and printed as it came.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;

#[derive(Args)]
#[command(after_help = "Example:\n  keel bench oltp --metrics-listen 9187 &\n  keel status 9187")]
pub struct StatusArgs {
    /// The metrics endpoint: HOST:PORT, a port alone for 127.0.0.1:PORT, or
    /// http://HOST:PORT (as given to --metrics-listen or Db::serve_metrics).
    #[arg(value_name = "ADDR")]
    addr: String,
    /// Seconds to wait for the connection, and then for the report.
    #[arg(long, default_value_t = 10.0)]
    timeout: f64,
}

/// The most a report may take (a few KiB normally; a list of many
/// transactions is cut at 100).
const MAX_BYTES: u64 = 16 << 20;

pub fn run(a: StatusArgs) -> Result<()> {
    if !(a.timeout.is_finite() && a.timeout > 0.0) {
        bail!(
            "--timeout must be a positive number of seconds, not {}",
            a.timeout
        );
    }
    let report = fetch(&a.addr, Duration::from_secs_f64(a.timeout))?;
    print!("{report}");
    Ok(())
}

/// `ADDR` as `HOST:PORT`: without a scheme or path, a port alone on
/// loopback.
fn host_port(addr: &str) -> String {
    let a = addr.trim();
    let a = a.strip_prefix("http://").unwrap_or(a);
    let a = a.split('/').next().unwrap_or(a);
    if a.parse::<u16>().is_ok() {
        format!("127.0.0.1:{a}")
    } else {
        a.to_string()
    }
}

/// The body of `GET /status` from `addr`.
fn fetch(addr: &str, timeout: Duration) -> Result<String> {
    let hp = host_port(addr);
    let targets: Vec<SocketAddr> = hp
        .to_socket_addrs()
        .with_context(|| format!("`{addr}` is not an address (HOST:PORT or a port)"))?
        .collect();
    let mut last = None;
    let mut stream = None;
    for t in &targets {
        match TcpStream::connect_timeout(t, timeout) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    let Some(mut s) = stream else {
        let why = last.map_or_else(|| "no address".to_string(), |e| e.to_string());
        bail!(
            "nothing answers at {hp} ({why}): is a Keel process serving its metrics there \
             (keel bench oltp --metrics-listen, Db::serve_metrics)?"
        );
    };
    let io = |what: &str| format!("{what} {hp}");
    s.set_read_timeout(Some(timeout))
        .and_then(|()| s.set_write_timeout(Some(timeout)))
        .with_context(|| io("cannot set a timeout on the connection to"))?;
    write!(
        s,
        "GET /status HTTP/1.0\r\nHost: {hp}\r\nAccept: text/plain\r\n\r\n"
    )
    .with_context(|| io("cannot send the request to"))?;
    let mut raw = Vec::new();
    s.take(MAX_BYTES)
        .read_to_end(&mut raw)
        .with_context(|| io("no complete answer from"))?;
    body(&hp, &String::from_utf8_lossy(&raw))
}

/// The report in the HTTP answer `resp` from `hp`, or why there is none.
fn body(hp: &str, resp: &str) -> Result<String> {
    let (head, body) = resp.split_once("\r\n\r\n").unwrap_or((resp, ""));
    let code = head
        .lines()
        .next()
        .filter(|l| l.starts_with("HTTP/"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse::<u16>().ok());
    let said = body.trim();
    match code {
        Some(200) => Ok(body.to_string()),
        Some(503) => bail!("{hp} has no database open now, so no status report (HTTP 503: {said})"),
        Some(404) => bail!(
            "{hp} answers but serves no status report (HTTP 404: {said}); a Keel metrics \
             endpoint of this version serves /status"
        ),
        Some(c) => bail!("{hp} answered HTTP {c} to GET /status: {said}"),
        None => bail!("{hp} did not answer in HTTP: is it a Keel metrics endpoint?"),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn addresses_take_a_port_alone_or_a_url() {
        assert_eq!(host_port("9187"), "127.0.0.1:9187");
        assert_eq!(host_port("db1:9187"), "db1:9187");
        assert_eq!(host_port(" http://[::1]:9187/status "), "[::1]:9187");
        assert_eq!(host_port("http://db1:80/"), "db1:80");
    }

    #[test]
    fn answers_give_the_report_or_say_why_not() {
        let ok = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nKEEL ENGINE STATUS\n";
        assert_eq!(body("h:1", ok).unwrap(), "KEEL ENGINE STATUS\n");
        let gone = "HTTP/1.1 503 Service Unavailable\r\n\r\nno database is open here now\n";
        let e = body("h:1", gone).unwrap_err().to_string();
        assert!(e.contains("h:1 has no database open now"), "{e}");
        let old = "HTTP/1.1 404 Not Found\r\n\r\nnot found: try /metrics\n";
        assert!(body("h:1", old)
            .unwrap_err()
            .to_string()
            .contains("serves no status report"));
        let e = body("h:1", "SSH-2.0-OpenSSH_9.6\r\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("did not answer in HTTP"), "{e}");
    }
}
