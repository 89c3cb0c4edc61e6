//! A tiny CometBFT RPC client: one HTTP/1.0 GET over a `TcpStream`, JSON-RPC result decoded
//! with `serde_json`. Only what the localnet needs to see a node come up and make blocks.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;

/// Largest response body accepted (a `/status` answer is about 2 KiB).
const MAX_RESPONSE: u64 = 16 << 20;

/// GETs `path` (for example `/status` or `/block?height=3`) from the CometBFT RPC server at
/// `addr` and returns the JSON-RPC `result`. `timeout` bounds the connect and each read and write.
pub fn get(addr: SocketAddr, path: &str, timeout: Duration) -> Result<Value> {
    let raw = fetch(addr, path, timeout)?;
    parse_response(&raw).with_context(|| format!("GET http://{addr}{path}"))
}

/// Whether `GET path` from the HTTP server at `addr` answers 200 (any body): a readiness probe
/// for the sidecars.
pub fn answers_ok(addr: SocketAddr, path: &str, timeout: Duration) -> bool {
    fetch(addr, path, timeout)
        .is_ok_and(|raw| raw.starts_with(b"HTTP/1.0 200") || raw.starts_with(b"HTTP/1.1 200"))
}

/// The raw response to one HTTP/1.0 GET.
fn fetch(addr: SocketAddr, path: &str, timeout: Duration) -> Result<Vec<u8>> {
    let mut stream = TcpStream::connect_timeout(&addr, timeout)
        .with_context(|| format!("connecting to CometBFT RPC at {addr}"))?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let request = format!(
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\nAccept: application/json\r\nConnection: close\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .with_context(|| format!("sending GET {path} to {addr}"))?;
    let mut raw = Vec::new();
    stream
        .take(MAX_RESPONSE)
        .read_to_end(&mut raw)
        .with_context(|| format!("reading the answer to GET {path} from {addr}"))?;
    Ok(raw)
}

/// Splits an HTTP/1.x response, checks for status 200 and returns the JSON-RPC `result`.
fn parse_response(raw: &[u8]) -> Result<Value> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| anyhow!("incomplete HTTP response ({} bytes)", raw.len()))?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let body = &raw[split + 4..];
    let status_line = head.lines().next().unwrap_or_default();
    let code = status_line.split_whitespace().nth(1).unwrap_or_default();
    if code != "200" {
        bail!(
            "expected HTTP 200 but got {status_line:?}: {}",
            String::from_utf8_lossy(&body[..body.len().min(300)])
        );
    }
    let doc: Value = serde_json::from_slice(body).context("RPC answer is not JSON")?;
    if let Some(err) = doc.get("error").filter(|e| !e.is_null()) {
        bail!("RPC error: {err}");
    }
    doc.get("result")
        .cloned()
        .ok_or_else(|| anyhow!("RPC answer has no \"result\": {doc}"))
}

/// The `/status` result of the node at `addr`.
pub fn status(addr: SocketAddr, timeout: Duration) -> Result<Value> {
    get(addr, "/status", timeout)
}

/// `sync_info.latest_block_height` from a `/status` result (CometBFT sends it as a string).
pub fn latest_block_height(status: &Value) -> Result<u64> {
    let h = &status["sync_info"]["latest_block_height"];
    let parsed = match h {
        Value::String(s) => s.parse::<u64>().ok(),
        Value::Number(n) => n.as_u64(),
        _ => None,
    };
    parsed.ok_or_else(|| anyhow!("expected sync_info.latest_block_height in /status but found {h}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::thread;

    const STATUS_BODY: &str = r#"{"jsonrpc":"2.0","id":-1,"result":{"node_info":{"network":"gonka-test","moniker":"node0"},"sync_info":{"latest_block_hash":"AB","latest_block_height":"42","catching_up":false},"validator_info":{"voting_power":"1"}}}"#;

    /// Serves one connection with `response` and returns the request it read.
    fn serve_once(response: String) -> (SocketAddr, thread::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let handle = thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut buf = [0u8; 4096];
            let mut req = Vec::new();
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = conn.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                req.extend_from_slice(&buf[..n]);
            }
            conn.write_all(response.as_bytes()).unwrap();
            String::from_utf8(req).unwrap()
        });
        (addr, handle)
    }

    #[test]
    fn reads_latest_height_from_status() {
        let (addr, server) = serve_once(format!(
            "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{STATUS_BODY}"
        ));
        let st = status(addr, Duration::from_secs(5)).unwrap();
        assert_eq!(latest_block_height(&st).unwrap(), 42);
        assert_eq!(st["node_info"]["moniker"], "node0");
        let request = server.join().unwrap();
        assert!(request.starts_with("GET /status HTTP/1.0\r\n"), "{request}");
    }

    #[test]
    fn http_and_rpc_errors_are_reported() {
        let (addr, _server) = serve_once("HTTP/1.0 500 Internal Server Error\r\n\r\noops".into());
        let err = format!("{:#}", status(addr, Duration::from_secs(5)).unwrap_err());
        assert!(err.contains("500") && err.contains("oops"), "{err}");

        let body = r#"{"jsonrpc":"2.0","id":-1,"error":{"code":-32603,"message":"boom"}}"#;
        let (addr, _server) = serve_once(format!("HTTP/1.0 200 OK\r\n\r\n{body}"));
        let err = format!("{:#}", status(addr, Duration::from_secs(5)).unwrap_err());
        assert!(err.contains("boom"), "{err}");
    }

    #[test]
    fn nobody_listening_is_an_error() {
        let addr = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        assert!(status(addr, Duration::from_millis(500)).is_err());
    }

    #[test]
    fn height_must_be_a_number() {
        let bad = serde_json::json!({"sync_info": {"latest_block_height": "x"}});
        assert!(latest_block_height(&bad).is_err());
        let num = serde_json::json!({"sync_info": {"latest_block_height": 7}});
        assert_eq!(latest_block_height(&num).unwrap(), 7);
    }
}
