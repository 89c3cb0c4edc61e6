//! Minimal HTTP client for the sidecar roles' calls to ML nodes and transfer agents (TA → ML
//! node, validator → TA and ML node), hand-written over a tokio `TcpStream`. Unlike the
//! reqwest client of [`crate::chat`], it hands over the body's bytes exactly as they arrive.
//!
//! Requests are sent as HTTP/1.0 with `Connection: close`, so the server answers with either a
//! `Content-Length` body or a close-delimited body (never chunked): in both cases the body is
//! simply every byte after the header block until the connection closes. That keeps streaming
//! (server-sent events) a plain byte pass-through.
//!
//! Every exchange runs within [`Limits`]: connect, first byte (the whole header block),
//! silence between body reads, the whole exchange, and body size.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{timeout_at, Instant};

/// Largest response header block accepted: 64 KiB beside the largest scored receipt an ML
/// node may send with a plain answer ([`crate::receipt::MAX_SCORED_HEX`]; bodies may be far
/// larger, so this bounds nothing a server could not send anyway).
const MAX_HEAD_BYTES: usize = 64 * 1024 + crate::receipt::MAX_SCORED_HEX;

/// How long the client waits for a server and how much it reads from it, so that a server
/// that never answers, trickles its answer or sends without end costs a bounded wait and
/// bounded memory. Every limit that is hit fails the exchange with an `io::Error`
/// (`TimedOut`, or `InvalidData` for size).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connecting.
    pub connect: Duration,
    /// From connected to the end of the response header block: sending the request, then
    /// the server's first byte and the rest of its headers.
    pub first_byte: Duration,
    /// Longest silence between two reads of the body.
    pub idle: Duration,
    /// The whole exchange, from connecting to the body's last byte.
    pub total: Duration,
    /// Most body bytes read.
    pub max_body: usize,
}

impl Default for Limits {
    /// Connect 2 s, headers 120 s (a non-streaming answer comes after the whole
    /// generation), 30 s of silence, 10 min in all, 16 MiB of body.
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(2),
            first_byte: Duration::from_secs(120),
            idle: Duration::from_secs(30),
            total: Duration::from_secs(600),
            max_body: 16 * 1024 * 1024,
        }
    }
}

impl Limits {
    /// The default limits with a connect timeout of `connect`.
    pub fn connect(connect: Duration) -> Self {
        Self {
            connect,
            ..Self::default()
        }
    }
}

fn timed_out(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, what)
}

/// The first of `headers` named `name` (case-insensitive).
pub fn header_in<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

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
    limits: Limits,
    /// When the whole exchange must be over.
    deadline: Instant,
    /// Body bytes handed out so far.
    body_read: usize,
}

impl UpstreamResponse {
    /// First header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        header_in(&self.headers, name)
    }

    /// The next piece of the body (the bytes read with the header block first), `None` at
    /// its end. Fails when the server is silent longer than [`Limits::idle`], the exchange
    /// outlasts [`Limits::total`], or the body grows past [`Limits::max_body`].
    pub async fn next_chunk(&mut self) -> io::Result<Option<Vec<u8>>> {
        let chunk = if self.leftover.is_empty() {
            let mut buf = vec![0u8; 8192];
            let idle = Instant::now() + self.limits.idle;
            let n = match timeout_at(idle.min(self.deadline), self.stream.read(&mut buf)).await {
                Ok(read) => read?,
                Err(_) if idle < self.deadline => {
                    return Err(timed_out(format!(
                        "the server sent nothing for {} ms",
                        self.limits.idle.as_millis()
                    )))
                }
                Err(_) => {
                    return Err(timed_out(format!(
                        "the answer took longer than {} ms in all",
                        self.limits.total.as_millis()
                    )))
                }
            };
            if n == 0 {
                return Ok(None);
            }
            buf.truncate(n);
            buf
        } else {
            std::mem::take(&mut self.leftover)
        };
        self.body_read += chunk.len();
        if self.body_read > self.limits.max_body {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the answer is larger than {} bytes", self.limits.max_body),
            ));
        }
        Ok(Some(chunk))
    }

    /// Reads the rest of the body (until the server closes) within the limits and returns
    /// all of it.
    pub async fn read_body(mut self) -> io::Result<Vec<u8>> {
        let mut body = Vec::new();
        while let Some(chunk) = self.next_chunk().await? {
            body.extend_from_slice(&chunk);
        }
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

/// `GET url` (`http://HOST:PORT/path`) within `limits`: the body of a 200 answer, or an
/// error naming the URL and what the server said.
pub async fn get_bytes(url: &str, limits: Limits) -> anyhow::Result<Vec<u8>> {
    let authority = authority(url).map_err(|e| anyhow::anyhow!(e))?;
    let after_scheme = url.strip_prefix("http://").unwrap_or(url);
    let path = after_scheme.find('/').map_or("/", |at| &after_scheme[at..]);
    let response = request(&authority, "GET", path, &[], limits)
        .await
        .map_err(|e| anyhow::anyhow!("GET {url}: {e}"))?;
    let status = response.status;
    let body = response
        .read_body()
        .await
        .map_err(|e| anyhow::anyhow!("reading {url}: {e}"))?;
    if status != 200 {
        anyhow::bail!(
            "GET {url} answered {status}: {}",
            String::from_utf8_lossy(&body)
        );
    }
    Ok(body)
}

/// Sends `POST path` with a JSON `body` to `authority` and reads the response header block.
pub async fn post_json(
    authority: &str,
    path: &str,
    body: &[u8],
    limits: Limits,
) -> io::Result<UpstreamResponse> {
    request(authority, "POST", path, body, limits).await
}

/// Sends one request and reads the response header block.
pub async fn request(
    authority: &str,
    method: &str,
    path: &str,
    body: &[u8],
    limits: Limits,
) -> io::Result<UpstreamResponse> {
    request_with_headers(authority, method, path, &[], body, limits).await
}

/// Sends one request with extra headers (`name`, `value`; both must be header-safe ASCII)
/// and reads the response header block, within `limits`.
pub async fn request_with_headers(
    authority: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    limits: Limits,
) -> io::Result<UpstreamResponse> {
    let start = Instant::now();
    let deadline = start + limits.total;
    let stream = timeout_at(
        (start + limits.connect).min(deadline),
        TcpStream::connect(authority),
    )
    .await
    .map_err(|_| {
        timed_out(format!(
            "connect timed out after {} ms",
            limits.connect.as_millis()
        ))
    })??;
    let head_deadline = (Instant::now() + limits.first_byte).min(deadline);
    let (status, headers, leftover, stream) = timeout_at(
        head_deadline,
        exchange_head(stream, authority, method, path, headers, body),
    )
    .await
    .map_err(|_| {
        timed_out(format!(
            "no whole response header block within {} ms",
            limits.first_byte.as_millis()
        ))
    })??;
    Ok(UpstreamResponse {
        status,
        headers,
        leftover,
        stream,
        limits,
        deadline,
        body_read: 0,
    })
}

type Head = (u16, Vec<(String, String)>, Vec<u8>, TcpStream);

/// Writes the request and reads the response header block.
async fn exchange_head(
    mut stream: TcpStream,
    authority: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> io::Result<Head> {
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
    Ok((status, headers, leftover, stream))
}
