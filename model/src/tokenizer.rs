//! Byte-level tokenizer and the chat prompt format of the reference model.

/// Tokens `0..=255` are bytes; this token ends a completion.
pub const END_TOKEN: u32 = 256;
/// Number of tokens in the vocabulary (256 bytes plus [`END_TOKEN`]).
pub const VOCAB_SIZE: usize = 257;

/// One chat message as the tokenizer sees it.
#[derive(Debug, Clone, Copy)]
pub struct ChatTurn<'a> {
    /// `system`, `user`, `assistant`, ...
    pub role: &'a str,
    /// The message text.
    pub content: &'a str,
}

/// The chat-formatted prompt text: each turn as `<|role|>\ncontent\n`, then `<|assistant|>\n`
/// to cue the reply.
pub fn format_chat(turns: &[ChatTurn<'_>]) -> String {
    let mut out = String::new();
    for turn in turns {
        out.push_str("<|");
        out.push_str(turn.role);
        out.push_str("|>\n");
        out.push_str(turn.content);
        out.push('\n');
    }
    out.push_str("<|assistant|>\n");
    out
}

/// Prompt tokens of a chat: one token per byte of [`format_chat`]'s text.
pub fn encode_chat(turns: &[ChatTurn<'_>]) -> Vec<u32> {
    format_chat(turns).bytes().map(u32::from).collect()
}

/// Text of generated tokens. The model only ever emits ASCII (see the module docs of
/// [`crate`]); any other byte token is decoded lossily (U+FFFD) and [`END_TOKEN`] is
/// dropped, so the result is always valid UTF-8.
pub fn decode(tokens: &[u32]) -> String {
    let bytes: Vec<u8> = tokens
        .iter()
        .filter_map(|&t| u8::try_from(t).ok())
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_format_counts_bytes() {
        let turns = [ChatTurn {
            role: "user",
            content: "hi",
        }];
        assert_eq!(format_chat(&turns), "<|user|>\nhi\n<|assistant|>\n");
        assert_eq!(encode_chat(&turns).len(), format_chat(&turns).len());
    }

    #[test]
    fn decode_is_lossy_and_drops_end() {
        assert_eq!(decode(&[104, 105, END_TOKEN]), "hi");
        assert_eq!(decode(&[0xff]), "\u{fffd}");
    }
}
