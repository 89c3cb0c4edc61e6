//! Minimal HTTP client for the sidecar roles' calls to ML nodes and transfer agents (TA → ML
//! node, validator → TA and ML node), hand-written over a tokio `TcpStream`. Unlike the
//! reqwest client of [`crate::chat`], it hands over the body's bytes exactly as they arrive.
//!
//! Requests are sent as HTTP/1.0 with `Connection: close`, so the server answers with either a
//! `Content-Length` body or a close-delimited body (never chunked): in both cases the body is
//! simply every byte after the header block until the connection closes. That keeps streaming
//! (server-sent events) a plain byte pass-through.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Largest response header block accepted.
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// A response whose header block was read; the body is still on the socket.
#[derive(Debug)]
pub struct UpstreamResponse {
    /// HTTP status code.
    pub status: u16,
    /// Headers in order, names as sent.
    pub headers: Vec<(String, String)>,
    /// Body bytes read together with the header block.
    pub leftover: Vec<u8>,
    /// The connection, positioned after `leftover`.
    pub stream: TcpStream,
}

impl UpstreamResponse {
    /// First header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Reads the rest of the body (until the server closes) and returns all of it.
    pub async fn read_body(mut self) -> io::Result<Vec<u8>> {
        let mut body = std::mem::take(&mut self.leftover);
        self.stream.read_to_end(&mut body).await?;
        Ok(body)
    }
}

/// `host:port` of a node URL such as `http://127.0.0.1:8080/` (only plain HTTP is supported).
pub fn authority(url: &str) -> Result<String, String> {
    let rest = url.strip_prefix("http://").unwrap_or(url);
    if url.starts_with("https://") {
        return Err(format!("`{url}`: only http:// node URLs are supported"));
    }
    let host = rest.split('/').next().unwrap_or_default();
    if host.is_empty() || !host.contains(':') {
        return Err(format!("`{url}`: expected http://HOST:PORT"));
    }
    Ok(host.to_string())
}

/// Sends `POST path` with a JSON `body` to `authority` and reads the response header block.
pub async fn post_json(
    authority: &str,
    path: &str,
    body: &[u8],
    connect_timeout: Duration,
) -> io::Result<UpstreamResponse> {
    request(authority, "POST", path, body, connect_timeout).await
}

/// Sends one request and reads the response header block.
pub async fn request(
    authority: &str,
    method: &str,
    path: &str,
    body: &[u8],
    connect_timeout: Duration,
) -> io::Result<UpstreamResponse> {
    request_with_headers(authority, method, path, &[], body, connect_timeout).await
}

/// Sends one request with extra headers (`name`, `value`; both must be header-safe ASCII)
/// and reads the response header block.
pub async fn request_with_headers(
    authority: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    connect_timeout: Duration,
) -> io::Result<UpstreamResponse> {
    let mut stream = tokio::time::timeout(connect_timeout, TcpStream::connect(authority))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))??;
    let extra: String = headers
        .iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect();
    let head = format!(
        "{method} {path} HTTP/1.0\r\nHost: {authority}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n",
        body.len()
    );
    let mut message = head.into_bytes();
    message.extend_from_slice(body);
    stream.write_all(&message).await?;
    stream.flush().await?;
    let mut buf = Vec::new();
    let split = loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos;
        }
        if buf.len() > MAX_HEAD_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "response header block too large",
            ));
        }
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed before the response header block",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..split]).into_owned();
    let leftover = buf[split + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "malformed status line"))?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    Ok(UpstreamResponse {
        status,
        headers,
        leftover,
        stream,
    })
}
