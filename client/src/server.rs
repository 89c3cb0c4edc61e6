//! The accept loop of the sidecar roles' HTTP servers (transfer agent, ML node), in place of
//! `axum::serve`, which takes no limits: a client that sends its header block a byte at a
//! time (slow-loris), or opens connections and never sends anything, would hold a task and a
//! socket for ever.
//!
//! - **Header-read timeout**: a request's header block must arrive within
//!   [`ServerLimits::header_timeout`] of the server starting to read it, else the connection
//!   is closed. It also closes keep-alive connections idle that long.
//! - **Body-read timeout**: [`read_body`] reads a request body within
//!   [`ServerLimits::body_timeout`] (408 `request_timeout`), and at most a given size (413).
//! - **Connection cap**: at most [`ServerLimits::max_connections`] connections are served at
//!   once; further ones wait in the kernel's listen backlog until one closes.

use std::future::Future;
use std::io;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use crate::openai::ApiError;

/// Limits of a sidecar HTTP server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// Longest a client may take to send a request's header block (and longest a keep-alive
    /// connection may sit idle).
    pub header_timeout: Duration,
    /// Longest a client may take to send a request body, once its headers are in.
    pub body_timeout: Duration,
    /// Most connections served at once; more wait in the listen backlog.
    pub max_connections: usize,
}

impl Default for ServerLimits {
    /// 10 s for the header block, 30 s for a body, 1,024 connections.
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            max_connections: 1024,
        }
    }
}

/// The command-line flags of [`ServerLimits`], shared by the sidecar roles that serve HTTP.
#[derive(Debug, Clone, clap::Args)]
pub struct ServerArgs {
    /// Longest a client may take to send a request's header block (and to sit idle on a
    /// kept-alive connection) before the connection is closed, in milliseconds.
    #[arg(long, default_value_t = 10_000)]
    pub header_timeout_ms: u64,
    /// Longest a client may take to send a request body before 408, in milliseconds.
    #[arg(long, default_value_t = 30_000)]
    pub body_timeout_ms: u64,
    /// Most connections served at once; more wait in the listen backlog.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
}

impl ServerArgs {
    /// The limits the flags ask for.
    pub fn limits(&self) -> ServerLimits {
        ServerLimits {
            header_timeout: Duration::from_millis(self.header_timeout_ms),
            body_timeout: Duration::from_millis(self.body_timeout_ms),
            max_connections: self.max_connections as usize,
        }
    }
}

/// Serves `router` on `listener` within `limits` until `shutdown` completes; then stops
/// accepting, lets every open connection finish its request in flight, and returns.
pub async fn serve(
    listener: TcpListener,
    router: axum::Router,
    limits: ServerLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    // Dropped (closed) when the server shuts down; every connection holds a receiver, so
    // `closed()` on the sender resolves once the last one is gone.
    let (stop, stopped) = watch::channel(());
    let mut shutdown = pin!(shutdown);
    loop {
        // A slot first, then accept: beyond the cap, connections wait in the backlog.
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors and the like: wait rather than spin.
                    tracing::warn!(error = %e, "accepting a connection failed; retrying in 100 ms");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(router.clone());
        let mut stopped = stopped.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout);
            let mut conn = pin!(builder.serve_connection(TokioIo::new(stream), service));
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = stopped.changed() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
        });
    }
    drop(stopped);
    let _ = stop.send(());
    stop.closed().await;
    Ok(())
}

/// Reads a request body of at most `max_bytes` within `timeout`: 413 `request_too_large`
/// beyond the size, 408 `request_timeout` when the client is too slow to send it.
pub async fn read_body(body: Body, max_bytes: usize, timeout: Duration) -> Result<Bytes, ApiError> {
    match tokio::time::timeout(timeout, axum::body::to_bytes(body, max_bytes)).await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(_)) => Err(ApiError::too_large(
            "request_too_large",
            format!("request body must be at most {max_bytes} bytes"),
        )),
        Err(_) => Err(ApiError {
            status: StatusCode::REQUEST_TIMEOUT,
            message: format!(
                "the request body did not arrive within {} ms",
                timeout.as_millis()
            ),
            kind: "invalid_request_error",
            code: "request_timeout",
            retry_after_secs: None,
        }),
    }
}
