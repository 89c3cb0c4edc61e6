//! Forwarding to an OpenAI-compatible server (vLLM, llama.cpp, or another ML node).
//!
//! The request is re-sent with `model` set to the upstream's name for the model and
//! `max_tokens` resolved; the answer comes back with `model` rewritten to the id this node
//! serves, so clients never see the upstream's name. Plain answers give their `usage` and
//! `choices[0].message.content`; streams are requested with `stream_options.include_usage`
//! so the final chunk carries the token counts, and are relayed event by event as they
//! arrive (the usage chunk is dropped again when the client did not ask for it). Anything
//! that goes wrong upstream is a 502.
//!
//! The HTTP client is hand-written over a tokio `TcpStream` (HTTP/1.1 with
//! `Connection: close`; `Content-Length`, chunked and close-delimited bodies).

use std::io;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::{Admitted, Answer, ApiError, StreamItem, Usage};
use gonka_client::http::authority;
use gonka_client::sse::SseParser;

/// Longest wait for the upstream to accept the connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest silence of the upstream while it owes bytes (a plain answer is silent for its
/// whole generation).
const IDLE_TIMEOUT: Duration = Duration::from_secs(600);
/// Largest response header block accepted.
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Largest plain answer (or error body) accepted.
const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;

/// An OpenAI-compatible server this ML node forwards its requests to.
#[derive(Clone)]
pub struct Upstream {
    /// The URL as configured, for logs and errors.
    url: String,
    /// `host:port` to connect to.
    authority: String,
    /// Path before `/v1/chat/completions` (empty for `http://HOST:PORT`).
    base_path: String,
    /// The model name sent upstream; the served model id when `None`.
    model: Option<String>,
    /// Sent as `Authorization: Bearer ...`.
    api_key: Option<String>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("url", &self.url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl Upstream {
    /// The server at `url` (`http://HOST:PORT`, optionally followed by a path prefix before
    /// `/v1/chat/completions`), asked for `model` instead of the served id when given, with
    /// `api_key` as bearer token when given.
    pub fn new(url: &str, model: Option<String>, api_key: Option<String>) -> Result<Self, String> {
        let authority = authority(url)?;
        let base_path = url
            .strip_prefix("http://")
            .unwrap_or(url)
            .strip_prefix(authority.as_str())
            .unwrap_or_default()
            .trim_end_matches('/')
            .to_string();
        Ok(Self {
            url: url.to_string(),
            authority,
            base_path,
            model,
            api_key,
        })
    }

    /// The URL as configured.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Forwards a plain request and returns the upstream's answer with `model` set to
    /// `served_model`.
    pub(super) async fn complete(
        &self,
        served_model: &str,
        admitted: Admitted,
    ) -> Result<Answer, ApiError> {
        let _permit = admitted.permit; // the slot is busy until the answer is in
        let body = self.request_body(&admitted.body, served_model, admitted.max_tokens, false)?;
        let reply = self.post(&body).await?;
        let status = reply.status;
        let bytes = reply
            .body
            .read_to_end(MAX_ANSWER_BYTES)
            .await
            .map_err(|e| self.failed(format!("reading the answer failed: {e}")))?;
        if status != 200 {
            return Err(self.refused(status, &bytes));
        }
        let mut body: Value = serde_json::from_slice(&bytes).map_err(|e| {
            self.failed(format!(
                "expected a JSON chat completion, found {} bytes that are not JSON: {e}",
                bytes.len()
            ))
        })?;
        let usage = body.get("usage").and_then(upstream_usage).ok_or_else(|| {
            self.failed(
                "the answer has no `usage` {prompt_tokens, completion_tokens, total_tokens}"
                    .to_string(),
            )
        })?;
        let content = body["choices"][0]["message"]["content"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        match body.as_object_mut() {
            Some(object) => object.insert("model".into(), json!(served_model)),
            None => return Err(self.failed("expected a JSON object".to_string())),
        };
        Ok(Answer {
            body,
            content,
            usage,
            scored: None,
        })
    }

    /// Forwards a streaming request and relays its events, as they arrive, on the returned
    /// channel. Fails with 502 if the upstream cannot be reached or refuses the request; a
    /// stream that breaks later ends without [`StreamItem::End`].
    pub(super) async fn stream(
        &self,
        served_model: &str,
        admitted: Admitted,
    ) -> Result<mpsc::Receiver<StreamItem>, ApiError> {
        let body = self.request_body(&admitted.body, served_model, admitted.max_tokens, true)?;
        let reply = self.post(&body).await?;
        if reply.status != 200 {
            let status = reply.status;
            let bytes = reply
                .body
                .read_to_end(MAX_ANSWER_BYTES)
                .await
                .unwrap_or_default();
            return Err(self.refused(status, &bytes));
        }
        let (tx, rx) = mpsc::channel(64);
        let relay = Relay {
            served_model: served_model.to_string(),
            include_usage: admitted.include_usage,
            usage: None,
        };
        let url = self.url.clone();
        let permit = admitted.permit;
        tokio::spawn(async move {
            let _permit = permit; // the slot is busy until the upstream stream is over
            if let Err(e) = relay.run(reply.body, tx).await {
                tracing::warn!(upstream = %url, "stream from the upstream broke off: {e}");
            }
        });
        Ok(rx)
    }

    /// The body sent upstream: the client's request with the upstream's model name, the
    /// resolved `max_tokens`, and `stream` (with usage) as asked.
    fn request_body(
        &self,
        body: &[u8],
        served_model: &str,
        max_tokens: usize,
        stream: bool,
    ) -> Result<Vec<u8>, ApiError> {
        let mut request: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::invalid_json(format!("expected a JSON object: {e}")))?;
        let object = request.as_object_mut().ok_or_else(|| {
            ApiError::invalid_json(
                "expected a JSON object {model, messages, ...}, found another JSON value"
                    .to_string(),
            )
        })?;
        let model = self.model.as_deref().unwrap_or(served_model);
        object.insert("model".into(), json!(model));
        object.remove("max_completion_tokens");
        object.insert("max_tokens".into(), json!(max_tokens));
        object.insert("stream".into(), json!(stream));
        if stream {
            object.insert("stream_options".into(), json!({"include_usage": true}));
        } else {
            object.remove("stream_options");
        }
        Ok(request.to_string().into_bytes())
    }

    /// 502 naming the upstream and what went wrong.
    fn failed(&self, what: String) -> ApiError {
        ApiError::upstream(format!("upstream {}: {what}", self.url))
    }

    /// 502 for a non-200 answer, quoting the upstream's error message when it sent one.
    fn refused(&self, status: u16, body: &[u8]) -> ApiError {
        let message = serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|v| {
                v["error"]["message"]
                    .as_str()
                    .or(v["message"].as_str())
                    .map(str::to_string)
            })
            .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned());
        self.failed(format!("expected status 200, got {status}: {message}"))
    }

    /// Sends `POST {base}/v1/chat/completions` and reads the response header block.
    async fn post(&self, body: &[u8]) -> Result<Reply, ApiError> {
        let connect = TcpStream::connect(self.authority.as_str());
        let mut stream = tokio::time::timeout(CONNECT_TIMEOUT, connect)
            .await
            .map_err(|_| self.failed(format!("no connection within {CONNECT_TIMEOUT:?}")))?
            .map_err(|e| self.failed(format!("cannot connect ({e}); is it running?")))?;
        let mut head = format!(
            "POST {}/v1/chat/completions HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
            self.base_path,
            self.authority,
            body.len()
        );
        if let Some(key) = &self.api_key {
            head.push_str(&format!("Authorization: Bearer {key}\r\n"));
        }
        head.push_str("\r\n");
        let mut message = head.into_bytes();
        message.extend_from_slice(body);
        let io_failed = |e: io::Error| self.failed(format!("sending the request failed: {e}"));
        stream.write_all(&message).await.map_err(io_failed)?;
        stream.flush().await.map_err(io_failed)?;
        Reply::read(stream)
            .await
            .map_err(|e| self.failed(format!("reading the response head failed: {e}")))
    }
}

/// A response whose header block was read.
struct Reply {
    status: u16,
    body: BodyReader,
}

impl Reply {
    async fn read(mut stream: TcpStream) -> io::Result<Reply> {
        let mut buf = Vec::new();
        let split = loop {
            if let Some(pos) = find(&buf, b"\r\n\r\n") {
                break pos;
            }
            if buf.len() > MAX_HEAD_BYTES {
                return Err(invalid("response header block larger than 64 KiB"));
            }
            if read_some(&mut stream, &mut buf).await? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "connection closed before the response header block",
                ));
            }
        };
        let head = String::from_utf8_lossy(&buf[..split]).into_owned();
        buf.drain(..split + 4);
        let mut lines = head.split("\r\n");
        let status = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|s| s.parse::<u16>().ok())
            .ok_or_else(|| invalid("malformed status line"))?;
        let mut framing = Framing::Close;
        for (name, value) in lines.filter_map(|l| l.split_once(':')) {
            let (name, value) = (name.trim(), value.trim());
            if name.eq_ignore_ascii_case("transfer-encoding")
                && value.to_ascii_lowercase().contains("chunked")
            {
                framing = Framing::Chunked;
            } else if name.eq_ignore_ascii_case("content-length")
                && !matches!(framing, Framing::Chunked)
            {
                let length = value
                    .parse()
                    .map_err(|_| invalid("malformed Content-Length"))?;
                framing = Framing::Length(length);
            }
        }
        Ok(Reply {
            status,
            body: BodyReader {
                stream,
                buf,
                framing,
            },
        })
    }
}

/// How the end of a response body is marked.
#[derive(Debug, Clone, Copy)]
enum Framing {
    /// `Content-Length`: this many bytes are still owed.
    Length(usize),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Neither: the body ends when the server closes.
    Close,
    /// The body is complete.
    Done,
}

/// Reads a response body piece by piece, undoing its framing.
struct BodyReader {
    stream: TcpStream,
    /// Bytes read but not handed out yet (still framed).
    buf: Vec<u8>,
    framing: Framing,
}

impl BodyReader {
    /// The next piece of the body; `None` once it is complete.
    async fn next(&mut self) -> io::Result<Option<Vec<u8>>> {
        loop {
            match self.framing {
                Framing::Done | Framing::Length(0) => {
                    self.framing = Framing::Done;
                    return Ok(None);
                }
                Framing::Length(owed) if !self.buf.is_empty() => {
                    let n = owed.min(self.buf.len());
                    self.framing = Framing::Length(owed - n);
                    return Ok(Some(self.buf.drain(..n).collect()));
                }
                Framing::Close if !self.buf.is_empty() => {
                    return Ok(Some(std::mem::take(&mut self.buf)));
                }
                Framing::Chunked => {
                    if let Some(line_end) = find(&self.buf, b"\r\n") {
                        let size_line = String::from_utf8_lossy(&self.buf[..line_end]);
                        let size_text = size_line.split(';').next().unwrap_or_default().trim();
                        let size = usize::from_str_radix(size_text, 16)
                            .map_err(|_| invalid("malformed chunk size"))?;
                        if size == 0 {
                            self.framing = Framing::Done;
                            return Ok(None);
                        }
                        let start = line_end + 2;
                        if self.buf.len() >= start + size + 2 {
                            let piece = self.buf[start..start + size].to_vec();
                            self.buf.drain(..start + size + 2);
                            return Ok(Some(piece));
                        }
                    }
                }
                Framing::Length(_) | Framing::Close => {}
            }
            if read_some(&mut self.stream, &mut self.buf).await? == 0 {
                if matches!(self.framing, Framing::Close) {
                    self.framing = Framing::Done;
                    return Ok(None);
                }
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the connection closed in the middle of the body",
                ));
            }
        }
    }

    /// The rest of the body, at most `limit` bytes.
    async fn read_to_end(mut self, limit: usize) -> io::Result<Vec<u8>> {
        let mut body = Vec::new();
        while let Some(piece) = self.next().await? {
            body.extend_from_slice(&piece);
            if body.len() > limit {
                return Err(invalid("body larger than the limit"));
            }
        }
        Ok(body)
    }
}

/// Reads what is available (waiting at most [`IDLE_TIMEOUT`]) and appends it to `buf`.
async fn read_some(stream: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<usize> {
    let mut chunk = [0u8; 8192];
    let n = tokio::time::timeout(IDLE_TIMEOUT, stream.read(&mut chunk))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "the upstream went silent"))??;
    buf.extend_from_slice(&chunk[..n]);
    Ok(n)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

/// Turns the upstream's event stream into [`StreamItem`]s.
struct Relay {
    served_model: String,
    /// Whether the client asked for the usage chunk.
    include_usage: bool,
    /// The token counts of the usage chunk, once seen.
    usage: Option<Usage>,
}

impl Relay {
    /// Relays every event of `body` until `data: [DONE]`, then sends the end.
    async fn run(mut self, mut body: BodyReader, tx: mpsc::Sender<StreamItem>) -> io::Result<()> {
        let mut events = SseParser::default();
        while let Some(piece) = body.next().await? {
            for data in events.push(&piece) {
                if data == "[DONE]" {
                    let end = StreamItem::End {
                        usage: self.usage,
                        scored: None,
                    };
                    let _ = tx.send(end).await;
                    return Ok(());
                }
                let Some(item) = self.chunk(&data)? else {
                    continue;
                };
                if tx.send(item).await.is_err() {
                    return Ok(()); // the client went away
                }
            }
        }
        Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the stream ended without `data: [DONE]`",
        ))
    }

    /// One `chat.completion.chunk` to relay with its `model` rewritten, or `None` for the
    /// usage chunk the client did not ask for. Records the usage it carries.
    fn chunk(&mut self, data: &str) -> io::Result<Option<StreamItem>> {
        let mut chunk: Value = serde_json::from_str(data)
            .map_err(|e| invalid(&format!("expected a JSON chunk, found {data:?}: {e}")))?;
        let object = chunk
            .as_object_mut()
            .ok_or_else(|| invalid(&format!("expected a JSON object chunk, found {data}")))?;
        if let Some(usage) = object.get("usage").filter(|u| !u.is_null()) {
            let counts = upstream_usage(usage)
                .ok_or_else(|| invalid(&format!("malformed usage {usage}")))?;
            self.usage = Some(counts);
        }
        object.insert("model".into(), json!(self.served_model));
        if !self.include_usage {
            object.remove("usage");
            if object
                .get("choices")
                .and_then(Value::as_array)
                .is_some_and(Vec::is_empty)
            {
                return Ok(None);
            }
        }
        let content = chunk["choices"][0]["delta"]["content"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        Ok(Some(StreamItem::Chunk {
            data: chunk.to_string(),
            content,
        }))
    }
}

/// The token counts of an upstream's `usage`, which must give all three counts: the node
/// signs them in its receipt, so a count the upstream left out is not guessed as 0.
fn upstream_usage(usage: &Value) -> Option<Usage> {
    let count = |name: &str| usage.get(name).and_then(Value::as_u64);
    Some(Usage {
        prompt_tokens: count("prompt_tokens")?,
        completion_tokens: count("completion_tokens")?,
        total_tokens: count("total_tokens")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_urls_split_into_authority_and_path() {
        let plain = Upstream::new("http://127.0.0.1:8000", None, None).unwrap();
        assert_eq!(
            (plain.authority.as_str(), plain.base_path.as_str()),
            ("127.0.0.1:8000", "")
        );
        let prefixed =
            Upstream::new("http://gpu:8000/openai/", None, Some("sk-secret".into())).unwrap();
        assert_eq!(prefixed.base_path, "/openai");
        let debug = format!("{prefixed:?}");
        assert!(debug.contains("<redacted>") && !debug.contains("sk-secret"));
        assert!(Upstream::new("https://gpu:8000", None, None).is_err());
        assert!(Upstream::new("http://gpu", None, None).is_err());
    }

    #[test]
    fn relayed_chunks_get_the_served_model_and_usage_only_when_asked() {
        let usage_chunk = r#"{"id":"c","model":"up","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}"#;
        let content_chunk = r#"{"id":"c","model":"up","choices":[{"index":0,"delta":{"content":"hi"}}],"usage":null}"#;
        let mut relay = Relay {
            served_model: "served".into(),
            include_usage: false,
            usage: None,
        };
        let Some(StreamItem::Chunk { data, content }) = relay.chunk(content_chunk).unwrap() else {
            panic!("a content chunk is relayed");
        };
        assert_eq!(content, "hi");
        let v: Value = serde_json::from_str(&data).unwrap();
        assert_eq!(v["model"], "served");
        assert!(v.get("usage").is_none());
        assert!(relay.chunk(usage_chunk).unwrap().is_none());
        assert_eq!(relay.usage.map(|u| u.total_tokens), Some(5));

        relay.include_usage = true;
        assert!(matches!(
            relay.chunk(usage_chunk).unwrap(),
            Some(StreamItem::Chunk { .. })
        ));
        assert!(relay.chunk("not json").is_err());
    }

    #[test]
    fn an_upstream_usage_missing_a_count_is_refused_not_read_as_zero() {
        let full = json!({"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5});
        assert_eq!(
            upstream_usage(&full),
            Some(Usage {
                prompt_tokens: 3,
                completion_tokens: 2,
                total_tokens: 5
            })
        );
        for partial in [
            json!({"prompt_tokens": 3, "total_tokens": 5}),
            json!({"completion_tokens": 2, "total_tokens": 5}),
            json!({"prompt_tokens": 3, "completion_tokens": "2", "total_tokens": 5}),
        ] {
            assert_eq!(upstream_usage(&partial), None, "{partial}");
        }
    }
}
