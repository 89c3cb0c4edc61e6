//! Server-sent events as OpenAI streams use them: one parser of the `data` of each event, for
//! the chat client, the ML node's forwarding backend and the transfer agent's settlement.

/// Splits a server-sent event stream, fed in arbitrary chunks, into the `data` of its events.
/// Lines end in `\n` or `\r\n`; comment lines (`:`) and fields other than `data` are
/// skipped; several `data` lines of one event are joined with `\n`; an event without `data`
/// yields nothing. Lines are decoded only once complete, so a UTF-8 character split across
/// chunks survives.
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    data: Option<String>,
}

impl SseParser {
    /// Feeds `bytes`; returns the data of every event they complete.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut events = Vec::new();
        for &byte in bytes {
            if byte == b'\n' {
                events.extend(self.end_line());
            } else {
                self.line.push(byte);
            }
        }
        events
    }

    /// The data of a last event the stream ended without a blank line after.
    pub fn finish(mut self) -> Option<String> {
        if !self.line.is_empty() {
            if let Some(event) = self.end_line() {
                return Some(event);
            }
        }
        self.data.take()
    }

    /// The data of every event of a complete stream, the unterminated last one included.
    pub fn parse_all(stream: &[u8]) -> Vec<String> {
        let mut parser = SseParser::default();
        let mut events = parser.push(stream);
        events.extend(parser.finish());
        events
    }

    /// Handles the line buffered so far; a blank line completes an event.
    fn end_line(&mut self) -> Option<String> {
        let mut line = std::mem::take(&mut self.line);
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if line.is_empty() {
            return self.data.take();
        }
        if line[0] == b':' {
            return None;
        }
        let line = String::from_utf8_lossy(&line);
        let (field, value) = line.split_once(':').unwrap_or((&line, ""));
        if field == "data" {
            let value = value.strip_prefix(' ').unwrap_or(value);
            match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_chunks(chunks: &[&[u8]]) -> Vec<String> {
        let mut parser = SseParser::default();
        let mut events: Vec<String> = chunks.iter().flat_map(|c| parser.push(c)).collect();
        events.extend(parser.finish());
        events
    }

    #[test]
    fn sse_skips_comments_and_survives_any_split() {
        let stream = "data: {\"a\":1}\n\n: gonka-receipt {\"x\":2}\n\nevent: ping\r\ndata: é€\r\n\r\n:keepalive\ndata: [DONE]\n\n";
        let expected = vec!["{\"a\":1}", "é€", "[DONE]"];
        assert_eq!(SseParser::parse_all(stream.as_bytes()), expected);
        // Every split point, including inside multi-byte characters and between `\r` and `\n`.
        let bytes = stream.as_bytes();
        for cut in 0..=bytes.len() {
            assert_eq!(
                parse_chunks(&[&bytes[..cut], &bytes[cut..]]),
                expected,
                "{cut}"
            );
        }
        let byte_by_byte: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(parse_chunks(&byte_by_byte), expected);
    }

    #[test]
    fn sse_joins_data_lines_and_keeps_an_unterminated_last_event() {
        assert_eq!(
            parse_chunks(&[b"data: a\ndata:b\n\ndata: [DONE]"]),
            ["a\nb", "[DONE]"]
        );
        assert_eq!(
            parse_chunks(&[b": only a comment\n\n"]),
            Vec::<String>::new()
        );
    }

    #[test]
    fn sse_events_complete_only_at_their_blank_line() {
        let mut sse = SseParser::default();
        assert!(sse.push(b"data: {\"a\"").is_empty());
        assert_eq!(
            sse.push(b":1}\r\n\r\n: comment\n\ndata: x\ndata: y\n\nda"),
            ["{\"a\":1}", "x\ny"]
        );
        assert_eq!(sse.push(b"ta:[DONE]\n\n"), ["[DONE]"]);
    }
}
