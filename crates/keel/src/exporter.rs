//! `/metrics` over HTTP: Prometheus's text exposition of a database's
//! metrics ([`Metrics::render_prometheus`]) served by a small HTTP server
//! (the `tiny_http` crate) on one address, loopback unless the caller
//! says otherwise; beside it `/status`, the status report's text
//! ([`Db::status`](crate::Db::status)), which `keel status ADDR` prints.
//! Built with the `prometheus` cargo feature.
//!
//! One thread answers the requests one at a time: `GET /metrics` (and
//! `HEAD`) the exposition, `/status` the report (503 when there is no
//! database to report on, 404 on a server started without one), `/` a
//! line pointing to both, anything else 404. Rendering the metrics reads
//! relaxed atomics and takes no engine lock, so a scrape never waits for
//! the engine and the engine never waits for a scrape; a report takes a
//! few leaf mutexes for copies (the `status` module's doc).
//! Dropping the [`MetricsServer`] unblocks that thread and joins it (a
//! scrape in progress finishes first); the listening socket closes a
//! moment later, when the server crate's accept thread ends.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::error::{Error, Result};
use crate::metrics::{Metrics, PROMETHEUS_CONTENT_TYPE};

/// A running `/metrics` endpoint; stopped when dropped.
pub struct MetricsServer {
    server: Arc<tiny_http::Server>,
    addr: SocketAddr,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for MetricsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsServer")
            .field("addr", &self.addr)
            .finish()
    }
}

impl MetricsServer {
    /// Serve `metrics` on `addr` (`host:port`; port 0 picks a free one,
    /// see [`MetricsServer::local_addr`]). The error names the address.
    pub fn start(metrics: Arc<Metrics>, addr: &str) -> Result<MetricsServer> {
        MetricsServer::start_with(addr, move || metrics.render_prometheus())
    }

    /// Serve what `render` returns (Prometheus's text format) on `addr`:
    /// for a process whose database changes while the endpoint stays (a
    /// benchmark opening one per run), or that adds series of its own.
    pub fn start_with(
        addr: &str,
        render: impl Fn() -> String + Send + 'static,
    ) -> Result<MetricsServer> {
        MetricsServer::listen(addr, Box::new(render), None)
    }

    /// [`MetricsServer::start_with`], and `/status` answered with what
    /// `status` returns (the status report's text), or 503 when it
    /// returns `None` (no database open now).
    pub fn start_with_status(
        addr: &str,
        render: impl Fn() -> String + Send + 'static,
        status: impl Fn() -> Option<String> + Send + 'static,
    ) -> Result<MetricsServer> {
        MetricsServer::listen(addr, Box::new(render), Some(Box::new(status)))
    }

    fn listen(addr: &str, render: Render, status: Option<StatusRender>) -> Result<MetricsServer> {
        let err = |reason: String| Error::MetricsListen {
            addr: addr.to_string(),
            reason,
        };
        let server = tiny_http::Server::http(addr).map_err(|e| err(e.to_string()))?;
        let local = match server.server_addr() {
            tiny_http::ListenAddr::IP(a) => a,
            other => return Err(err(format!("not an IP address: {other:?}"))),
        };
        let server = Arc::new(server);
        let s = Arc::clone(&server);
        let thread = std::thread::Builder::new()
            .name("keel-metrics".into())
            .spawn(move || serve(&s, &render, status.as_deref()))
            .map_err(|e| err(format!("cannot start its thread: {e}")))?;
        Ok(MetricsServer {
            server,
            addr: local,
            thread: Some(thread),
        })
    }

    /// The address it listens on (with the port chosen for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

type Render = Box<dyn Fn() -> String + Send>;
type StatusRender = Box<dyn Fn() -> Option<String> + Send>;

const TEXT: &str = "text/plain; charset=utf-8";

fn serve(
    server: &tiny_http::Server,
    render: &dyn Fn() -> String,
    status: Option<&(dyn Fn() -> Option<String> + Send)>,
) {
    for req in server.incoming_requests() {
        let get = matches!(
            req.method(),
            tiny_http::Method::Get | tiny_http::Method::Head
        );
        let path = req.url().split('?').next().unwrap_or("");
        let resp = match (get, path) {
            (true, "/metrics") => text(render(), PROMETHEUS_CONTENT_TYPE, 200),
            (true, "/status") => match status.map(|s| s()) {
                Some(Some(report)) => text(report, TEXT, 200),
                Some(None) => text(
                    "no database is open here now: no status report\n".into(),
                    TEXT,
                    503,
                ),
                None => text(
                    "this endpoint serves no status report: try /metrics\n".into(),
                    TEXT,
                    404,
                ),
            },
            (true, "/") => text(
                "Keel: the metrics are at /metrics, the status report at /status\n".into(),
                TEXT,
                200,
            ),
            (false, _) => text("only GET\n".into(), TEXT, 405),
            _ => text("not found: try /metrics or /status\n".into(), TEXT, 404),
        };
        if let Err(e) = req.respond(resp) {
            log::debug!("metrics: cannot answer a request: {e}");
        }
    }
}

fn text(
    body: String,
    content_type: &str,
    code: u16,
) -> tiny_http::Response<std::io::Cursor<Vec<u8>>> {
    let mut r = tiny_http::Response::from_string(body).with_status_code(code);
    if let Ok(h) = tiny_http::Header::from_bytes(&b"Content-Type"[..], content_type.as_bytes()) {
        r.add_header(h);
    }
    r
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    fn get(addr: SocketAddr, path: &str) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn serves_the_exposition_on_metrics_and_404_elsewhere_then_stops() {
        let m = Arc::new(Metrics::default());
        Metrics::add(&m.trx_commits, 3);
        let srv = MetricsServer::start(Arc::clone(&m), "127.0.0.1:0").unwrap();
        let addr = srv.local_addr();
        assert!(addr.ip().is_loopback() && addr.port() != 0);
        let r = get(addr, "/metrics");
        assert!(
            r.starts_with("HTTP/1.0 200") || r.starts_with("HTTP/1.1 200"),
            "{r}"
        );
        assert!(r.contains("text/plain; version=0.0.4"), "{r}");
        assert!(r.contains("\nkeel_trx_commits_total 3\n"), "{r}");
        Metrics::add(&m.trx_commits, 1);
        assert!(get(addr, "/metrics").contains("\nkeel_trx_commits_total 4\n"));
        assert!(get(addr, "/nope").contains(" 404 "));
        drop(srv);
        // tiny_http's accept thread closes the socket just after the drop.
        let t0 = std::time::Instant::now();
        while TcpStream::connect(addr).is_ok() {
            assert!(t0.elapsed().as_secs() < 10, "still listening");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// `/status` serves what its renderer gives, 503 when it has nothing,
    /// and 404 on a server started without one.
    #[test]
    fn status_is_served_beside_metrics() {
        let open = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let o = Arc::clone(&open);
        let srv = MetricsServer::start_with_status("127.0.0.1:0", String::new, move || {
            o.load(std::sync::atomic::Ordering::Relaxed)
                .then(|| "KEEL ENGINE STATUS (x)\n".to_string())
        })
        .unwrap();
        let r = get(srv.local_addr(), "/status");
        assert!(
            r.contains(" 200 ") && r.ends_with("\r\n\r\nKEEL ENGINE STATUS (x)\n"),
            "{r}"
        );
        assert!(get(srv.local_addr(), "/").contains("/status"));
        open.store(false, std::sync::atomic::Ordering::Relaxed);
        let r = get(srv.local_addr(), "/status");
        assert!(
            r.contains(" 503 ") && r.contains("no database is open"),
            "{r}"
        );
        let bare = MetricsServer::start_with("127.0.0.1:0", String::new).unwrap();
        let r = get(bare.local_addr(), "/status");
        assert!(r.contains(" 404 ") && r.contains("no status report"), "{r}");
    }

    #[test]
    fn an_address_in_use_or_malformed_is_an_error_naming_it() {
        let a = MetricsServer::start(Arc::new(Metrics::default()), "127.0.0.1:0").unwrap();
        let taken = a.local_addr().to_string();
        let e = MetricsServer::start(Arc::new(Metrics::default()), &taken).unwrap_err();
        assert!(e.to_string().contains(&taken), "{e}");
        let e = MetricsServer::start(Arc::new(Metrics::default()), "not an address").unwrap_err();
        assert!(e.to_string().contains("`not an address`"), "{e}");
    }
}
