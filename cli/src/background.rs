//! Servers a `gonkad start` process runs beside the ABCI application (its metrics, its gRPC
//! endpoint), each on a thread of its own with a current-thread runtime, so they never
//! compete with the state machine's thread.

use std::future::Future;
use std::net::SocketAddr;

use anyhow::{Context, Result};

/// Binds `listen` now (so a taken address fails the start) and runs `serve` on it from a
/// thread named `name`; returns the bound address.
pub fn serve_in_thread<F, Fut>(name: &str, listen: &str, serve: F) -> Result<SocketAddr>
where
    F: FnOnce(tokio::net::TcpListener) -> Fut + Send + 'static,
    Fut: Future<Output = ()>,
{
    let listener = std::net::TcpListener::bind(listen)
        .with_context(|| format!("cannot listen for {name} on {listen}"))?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a tokio runtime for a background server");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener)
                    .expect("a bound, non-blocking listener");
                serve(listener).await
            })
        })
        .with_context(|| format!("starting the {name} thread"))?;
    Ok(addr)
}
