//! The model's tokenizer, built from the GGUF's own metadata: GPT-2 byte-level BPE
//! (`tokenizer.ggml.tokens`, `tokenizer.ggml.merges`, `tokenizer.ggml.token_type`) behind the
//! `smollm` pre-tokenizer of llama.cpp (every digit on its own, then the GPT-2 split regex).

use std::collections::HashMap;

use candle_core::quantized::gguf_file::{Content, Value};

use crate::Error;

/// The GPT-2 split regex as llama.cpp and Hugging Face tokenizers apply it. llama.cpp writes it
/// without the final `|\s+`, but its hand-written matcher for this pattern behaves as if it were
/// there (a lone whitespace before a non-space becomes its own piece), and so does this one.
const GPT2_SPLIT: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

/// llama.cpp's `LLAMA_TOKEN_TYPE_CONTROL` and `LLAMA_TOKEN_TYPE_USER_DEFINED`.
const TOKEN_TYPE_CONTROL: i64 = 3;
const TOKEN_TYPE_USER_DEFINED: i64 = 4;

/// A byte-level BPE tokenizer read from a GGUF file.
#[derive(Debug)]
pub struct Tokenizer {
    /// The bytes each token stands for (a control token stands for its own text).
    token_bytes: Vec<Vec<u8>>,
    /// Byte-level vocabulary string -> token id.
    vocab: HashMap<String, u32>,
    /// (left id, right id) -> (merge rank, merged id).
    merges: HashMap<(u32, u32), (u32, u32)>,
    /// The token of each byte's single-character byte-level string; a few bytes have none in
    /// this vocabulary (0x04, 0xc0, 0xff…).
    byte_token: [Option<u32>; 256],
    /// Control and user-defined tokens, longest text first (the order they are matched in).
    special: Vec<(String, u32)>,
    /// Whether each id is a control token.
    control: Vec<bool>,
    bos: Option<u32>,
    eos: u32,
    /// End-of-generation tokens: the eos token and `<|endoftext|>`/`<|im_end|>` when present.
    eog: Vec<u32>,
    split: fancy_regex::Regex,
}

/// GPT-2's reversible map from bytes to printable characters.
fn byte_to_char() -> [char; 256] {
    let mut map = ['\0'; 256];
    let mut next = 256u32;
    for b in 0..256u32 {
        let printable = (0x21..=0x7e).contains(&b) || (0xa1..=0xac).contains(&b) || b >= 0xae;
        map[b as usize] = if printable {
            char::from_u32(b).expect("a byte is a valid char")
        } else {
            let c = char::from_u32(next).expect("256..324 are valid chars");
            next += 1;
            c
        };
    }
    map
}

fn strings(ct: &Content, key: &str) -> Result<Vec<String>, Error> {
    let arr = ct
        .metadata
        .get(key)
        .ok_or_else(|| Error::Format(format!("GGUF metadata has no `{key}`")))?
        .to_vec()
        .map_err(|e| Error::Format(format!("`{key}` is not an array: {e}")))?;
    arr.iter()
        .map(|v| {
            v.to_string()
                .cloned()
                .map_err(|e| Error::Format(format!("`{key}` holds a non-string: {e}")))
        })
        .collect()
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::U8(x) => Some(*x as i64),
        Value::I8(x) => Some(*x as i64),
        Value::U16(x) => Some(*x as i64),
        Value::I16(x) => Some(*x as i64),
        Value::U32(x) => Some(*x as i64),
        Value::I32(x) => Some(*x as i64),
        Value::U64(x) => Some(*x as i64),
        Value::I64(x) => Some(*x),
        _ => None,
    }
}

fn token_id(ct: &Content, key: &str) -> Option<u32> {
    ct.metadata.get(key).and_then(int).map(|x| x as u32)
}

impl Tokenizer {
    /// Builds the tokenizer from a GGUF file's metadata.
    pub(crate) fn from_gguf(ct: &Content) -> Result<Self, Error> {
        let model = ct
            .metadata
            .get("tokenizer.ggml.model")
            .and_then(|v| v.to_string().ok())
            .map(String::as_str);
        if model != Some("gpt2") {
            return Err(Error::Format(format!(
                "tokenizer.ggml.model is {model:?}, expected \"gpt2\" (byte-level BPE)"
            )));
        }
        let pre = ct
            .metadata
            .get("tokenizer.ggml.pre")
            .and_then(|v| v.to_string().ok())
            .map(String::as_str);
        if pre != Some("smollm") {
            return Err(Error::Format(format!(
                "tokenizer.ggml.pre is {pre:?}, expected \"smollm\" (the only pre-tokenizer implemented)"
            )));
        }
        let tokens = strings(ct, "tokenizer.ggml.tokens")?;
        let merges_text = strings(ct, "tokenizer.ggml.merges")?;
        let types: Vec<i64> = match ct.metadata.get("tokenizer.ggml.token_type") {
            Some(v) => v
                .to_vec()
                .map_err(|e| Error::Format(format!("tokenizer.ggml.token_type: {e}")))?
                .iter()
                .map(|v| int(v).unwrap_or(1))
                .collect(),
            None => vec![1; tokens.len()],
        };
        if types.len() != tokens.len() {
            return Err(Error::Format(format!(
                "{} token types for {} tokens",
                types.len(),
                tokens.len()
            )));
        }

        let to_char = byte_to_char();
        let mut from_char = HashMap::new();
        for (b, c) in to_char.iter().enumerate() {
            from_char.insert(*c, b as u8);
        }
        let mut vocab = HashMap::with_capacity(tokens.len());
        let mut token_bytes = Vec::with_capacity(tokens.len());
        let mut special = Vec::new();
        let mut control = Vec::with_capacity(tokens.len());
        for (id, (text, ty)) in tokens.iter().zip(&types).enumerate() {
            vocab.insert(text.clone(), id as u32);
            let is_special = *ty == TOKEN_TYPE_CONTROL || *ty == TOKEN_TYPE_USER_DEFINED;
            control.push(*ty == TOKEN_TYPE_CONTROL);
            if is_special {
                special.push((text.clone(), id as u32));
                token_bytes.push(text.as_bytes().to_vec());
            } else {
                // Byte-level text back to bytes; a character outside the map (none in a
                // well-formed vocabulary) keeps its UTF-8 bytes.
                let mut bytes = Vec::with_capacity(text.len());
                for c in text.chars() {
                    match from_char.get(&c) {
                        Some(b) => bytes.push(*b),
                        None => bytes.extend_from_slice(c.to_string().as_bytes()),
                    }
                }
                token_bytes.push(bytes);
            }
        }
        special.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.1.cmp(&b.1)));

        let mut byte_token = [None; 256];
        for (b, c) in to_char.iter().enumerate() {
            byte_token[b] = vocab.get(&c.to_string()).copied();
        }

        let mut merges = HashMap::with_capacity(merges_text.len());
        for (rank, m) in merges_text.iter().enumerate() {
            let (a, b) = m
                .split_once(' ')
                .ok_or_else(|| Error::Format(format!("merge {rank} `{m}` has no space")))?;
            let (Some(&ia), Some(&ib), Some(&im)) =
                (vocab.get(a), vocab.get(b), vocab.get(&format!("{a}{b}")))
            else {
                // A merge whose parts or result are not tokens can never apply.
                continue;
            };
            merges.entry((ia, ib)).or_insert((rank as u32, im));
        }

        let eos = token_id(ct, "tokenizer.ggml.eos_token_id")
            .ok_or_else(|| Error::Format("GGUF metadata has no eos token id".into()))?;
        let mut eog = vec![eos];
        for t in ["<|endoftext|>", "<|im_end|>", "<|eot_id|>"] {
            if let Some(&id) = vocab.get(t) {
                if !eog.contains(&id) {
                    eog.push(id);
                }
            }
        }
        let split = fancy_regex::Regex::new(GPT2_SPLIT).expect("the split regex is valid");
        Ok(Self {
            token_bytes,
            vocab,
            merges,
            byte_token,
            special,
            control,
            bos: token_id(ct, "tokenizer.ggml.bos_token_id"),
            eos,
            eog,
            split,
        })
    }

    /// The number of tokens in the vocabulary.
    pub fn vocab_size(&self) -> usize {
        self.token_bytes.len()
    }

    /// The beginning-of-sequence token, if the model has one.
    pub fn bos(&self) -> Option<u32> {
        self.bos
    }

    /// The end-of-sequence token.
    pub fn eos(&self) -> u32 {
        self.eos
    }

    /// Whether generation stops at `token` (eos, `<|endoftext|>`, `<|im_end|>`).
    pub fn is_end_of_generation(&self, token: u32) -> bool {
        self.eog.contains(&token)
    }

    /// Whether `token` is a control token (`<|im_start|>`, `<|im_end|>`…).
    pub fn is_control(&self, token: u32) -> bool {
        self.control.get(token as usize).copied().unwrap_or(false)
    }

    /// The id of a token given its vocabulary string (`"<|im_end|>"`, `"Ġthe"`).
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.vocab.get(text).copied()
    }

    /// Encodes text into token ids, adding no BOS. With `parse_special`, control tokens written
    /// in the text (`<|im_start|>`) become their ids, as llama.cpp's `tokenize(special=True)`
    /// does; otherwise they are tokenized as plain text.
    pub fn encode(&self, text: &str, parse_special: bool) -> Vec<u32> {
        let mut out = Vec::new();
        if !parse_special {
            self.encode_plain(text, &mut out);
            return out;
        }
        let mut rest = text;
        while !rest.is_empty() {
            // The earliest special token in the rest; at one position, the longest.
            let mut best: Option<(usize, &str, u32)> = None;
            for (s, id) in &self.special {
                if let Some(at) = rest.find(s.as_str()) {
                    if best.is_none_or(|(b, _, _)| at < b) {
                        best = Some((at, s, *id));
                    }
                }
            }
            match best {
                Some((at, s, id)) => {
                    self.encode_plain(&rest[..at], &mut out);
                    out.push(id);
                    rest = &rest[at + s.len()..];
                }
                None => {
                    self.encode_plain(rest, &mut out);
                    break;
                }
            }
        }
        out
    }

    /// Encodes text with no special-token parsing: digits split one by one, then the GPT-2
    /// regex, then byte-level BPE on each piece.
    fn encode_plain(&self, text: &str, out: &mut Vec<u32>) {
        let mut start = 0;
        for (i, c) in text.char_indices() {
            // `char::is_numeric` is exactly the general categories Nd, Nl and No, i.e. \p{N}.
            if c.is_numeric() {
                self.encode_segment(&text[start..i], out);
                self.encode_segment(&text[i..i + c.len_utf8()], out);
                start = i + c.len_utf8();
            }
        }
        self.encode_segment(&text[start..], out);
    }

    fn encode_segment(&self, text: &str, out: &mut Vec<u32>) {
        for piece in self.split.find_iter(text) {
            // The pattern cannot fail to match (no backtracking limit is reachable on
            // pre-split text of these shapes); a failure would drop no text silently though,
            // so fall back to the whole segment.
            match piece {
                Ok(m) => self.bpe(m.as_str().as_bytes(), out),
                Err(_) => {
                    self.bpe(text.as_bytes(), out);
                    return;
                }
            }
        }
    }

    /// Byte-level BPE of one piece: start from one token per byte and repeatedly merge the
    /// adjacent pair of lowest merge rank (leftmost on ties). A byte with no token of its own
    /// never merges and is dropped, as llama.cpp drops it.
    fn bpe(&self, bytes: &[u8], out: &mut Vec<u32>) {
        let mut syms: Vec<Option<u32>> =
            bytes.iter().map(|b| self.byte_token[*b as usize]).collect();
        loop {
            let mut best: Option<(u32, usize, u32)> = None;
            for i in 0..syms.len().saturating_sub(1) {
                let (Some(a), Some(b)) = (syms[i], syms[i + 1]) else {
                    continue;
                };
                if let Some(&(rank, merged)) = self.merges.get(&(a, b)) {
                    if best.is_none_or(|(r, _, _)| rank < r) {
                        best = Some((rank, i, merged));
                    }
                }
            }
            let Some((_, i, merged)) = best else { break };
            syms[i] = Some(merged);
            syms.remove(i + 1);
        }
        out.extend(syms.into_iter().flatten());
    }

    /// The bytes a token stands for (a control token: its own text); empty for an unknown id.
    pub fn token_bytes(&self, token: u32) -> &[u8] {
        self.token_bytes
            .get(token as usize)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// Decodes token ids to text (control tokens as their text; invalid UTF-8 replaced).
    pub fn decode(&self, tokens: &[u32]) -> String {
        let mut bytes = Vec::new();
        for t in tokens {
            bytes.extend_from_slice(self.token_bytes(*t));
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// Turns a stream of token bytes into text pieces that never split a UTF-8 character: bytes
/// of an unfinished character wait for the next token.
#[derive(Debug, Default)]
pub(crate) struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    /// Adds a token's bytes and returns the text completed so far.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        match std::str::from_utf8(&self.pending) {
            Ok(s) => {
                let s = s.to_string();
                self.pending.clear();
                s
            }
            // An unfinished character at the end: keep it for the next token.
            Err(e) if e.error_len().is_none() => {
                let done = e.valid_up_to();
                let s = String::from_utf8_lossy(&self.pending[..done]).into_owned();
                self.pending.drain(..done);
                s
            }
            // Bytes that can never become valid: replaced, as `decode` does.
            Err(_) => {
                let s = String::from_utf8_lossy(&self.pending).into_owned();
                self.pending.clear();
                s
            }
        }
    }

    /// Whatever is still pending, replaced where invalid.
    pub(crate) fn finish(&mut self) -> String {
        let s = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_map_is_a_bijection() {
        let m = byte_to_char();
        let mut seen: Vec<char> = m.to_vec();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 256);
        assert_eq!(m[b' ' as usize], 'Ġ');
        assert_eq!(m[b'\n' as usize], 'Ċ');
    }

    #[test]
    fn split_keeps_the_last_space_for_the_next_word() {
        let re = fancy_regex::Regex::new(GPT2_SPLIT).unwrap();
        let pieces: Vec<&str> = re
            .find_iter("a   b\tc \n")
            .map(|m| m.unwrap().as_str())
            .collect();
        assert_eq!(pieces, ["a", "  ", " b", "\t", "c", " \n"]);
    }

    #[test]
    fn utf8_stream_waits_for_whole_characters() {
        let mut s = Utf8Stream::default();
        let e = "é".as_bytes();
        assert_eq!(s.push(b"a"), "a");
        assert_eq!(s.push(&e[..1]), "");
        assert_eq!(s.push(&e[1..]), "é");
        assert_eq!(s.push(&[0xff]), "\u{fffd}");
        assert_eq!(s.push(&e[..1]), "");
        assert_eq!(s.finish(), "\u{fffd}");
    }
}
