//! `gonkad explorer`: a web explorer served by the binary over a node's RPC.
//!
//! The page (HTML, script and style, embedded with `include_str!`: no CDN, nothing fetched at
//! run time) is a single-page app that reads the chain through this server only:
//!
//! - `/cosmos/...` and `/gonka/<module>/v1/<query>`: the REST routes of the node's API port
//!   ([`crate::rest`], the same code), for txs with their decoded messages, accounts,
//!   balances and every module query;
//! - `/rpc/<method>?...`: CometBFT's RPC for the read-only methods in [`RPC_METHODS`] (blocks,
//!   validators, tx search, status), passed through to `--node` as they are.
//!
//! Everything the chain holds is shown as text (the script never renders chain data as HTML),
//! and the page's Content-Security-Policy allows its own script and style only, so a memo or
//! moniker written by a stranger cannot run in a visitor's browser.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use gonka_client::Client;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};

use crate::Global;

/// CometBFT RPC methods the page may call: reads only, nothing that broadcasts or dials.
pub const RPC_METHODS: &[&str] = &[
    "status",
    "blockchain",
    "block",
    "block_results",
    "validators",
    "tx_search",
    "net_info",
    "num_unconfirmed_txs",
];

/// The embedded page: path, content type, body.
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "/",
        "text/html; charset=utf-8",
        include_str!("explorer/index.html"),
    ),
    (
        "/explorer.js",
        "text/javascript; charset=utf-8",
        include_str!("explorer/explorer.js"),
    ),
    (
        "/explorer.css",
        "text/css; charset=utf-8",
        include_str!("explorer/explorer.css"),
    ),
];

/// The page may load its own script, style and inline SVG charts, nothing else.
const CONTENT_SECURITY_POLICY: &str =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// How long a passed-through RPC call may take.
const RPC_TIMEOUT: Duration = Duration::from_secs(15);

/// Arguments of `gonkad explorer`.
#[derive(clap::Args)]
pub struct Args {
    /// Address to serve the explorer on (the chain is read from `--node`).
    #[arg(long, default_value = "127.0.0.1:26600")]
    pub listen: String,
}

/// What the explorer's connections share.
struct Explorer {
    client: Client,
    http: reqwest::Client,
    node: String,
}

/// `gonkad explorer`: serves until interrupted.
pub async fn run(global: &Global, args: Args) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    println!(
        "explorer of {} on http://{}/",
        global.node,
        listener.local_addr()?
    );
    serve(listener, &global.node).await
}

/// Serves the explorer of the node at `node` (its CometBFT RPC URL) on `listener`.
pub async fn serve(listener: tokio::net::TcpListener, node: &str) -> Result<()> {
    let explorer = Arc::new(Explorer {
        client: Client::new(node)?,
        http: reqwest::Client::builder().timeout(RPC_TIMEOUT).build()?,
        node: node.trim_end_matches('/').to_string(),
    });
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!(error = %e, "accepting an explorer connection");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let explorer = explorer.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let explorer = explorer.clone();
                async move { Ok::<_, Infallible>(explorer.answer(request).await) }
            });
            let served = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
            if let Err(e) = served {
                tracing::debug!(%peer, error = %e, "explorer connection ended");
            }
        });
    }
}

fn response(
    status: StatusCode,
    content_type: &str,
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .header("content-security-policy", CONTENT_SECURITY_POLICY)
        .header("x-content-type-options", "nosniff")
        .header("cache-control", "no-store")
        .body(Full::new(body.into()))
        .expect("a valid response")
}

fn json_error(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    let body = serde_json::json!({"code": status.as_u16(), "message": message, "details": []});
    response(status, "application/json", body.to_string())
}

impl Explorer {
    async fn answer(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
        let path = request.uri().path().to_string();
        if let Some(&(_, content_type, body)) = ASSETS.iter().find(|(p, _, _)| *p == path) {
            return match *request.method() {
                Method::GET | Method::HEAD => response(StatusCode::OK, content_type, body),
                _ => json_error(StatusCode::METHOD_NOT_ALLOWED, "the page is read with GET"),
            };
        }
        if path.starts_with("/cosmos/") || path.starts_with("/gonka/") {
            let (status, json) = crate::rest::answer(&self.client, request).await;
            return response(status, "application/json", json.to_string());
        }
        if let Some(method) = path.strip_prefix("/rpc/") {
            if request.method() != Method::GET {
                return json_error(StatusCode::METHOD_NOT_ALLOWED, "RPC calls are GET");
            }
            if !RPC_METHODS.contains(&method) {
                return json_error(
                    StatusCode::NOT_FOUND,
                    &format!(
                        "the explorer passes only these RPC methods: {}",
                        RPC_METHODS.join(", ")
                    ),
                );
            }
            let query = request.uri().query().unwrap_or_default();
            return self.rpc(method, query).await;
        }
        json_error(
            StatusCode::NOT_FOUND,
            &format!("no page {path}: open / for the explorer"),
        )
    }

    /// Passes one read-only RPC call through to the node.
    async fn rpc(&self, method: &str, query: &str) -> Response<Full<Bytes>> {
        let url = match query {
            "" => format!("{}/{method}", self.node),
            query => format!("{}/{method}?{query}", self.node),
        };
        let answer = async {
            let reply = self.http.get(&url).send().await?;
            let status = reply.status().as_u16();
            Ok::<_, reqwest::Error>((status, reply.bytes().await?))
        };
        match answer.await {
            Ok((status, body)) => response(
                StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY),
                "application/json",
                body,
            ),
            Err(e) => json_error(
                StatusCode::BAD_GATEWAY,
                &format!("the node at {} did not answer: {e}", self.node),
            ),
        }
    }
}
