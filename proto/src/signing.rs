//! Bytes that off-chain parties sign and the chain checks, defined once here so the chain
//! (`gonka-inference`), the client library and the sidecar cannot drift apart.
//!
//! Every signed message starts with a versioned domain string and encodes its fields in a
//! fixed order: integers big-endian and fixed-width, 32-byte hashes as they are, and strings
//! as a u32 big-endian length followed by their UTF-8 bytes, so no two field lists encode to
//! the same bytes. The 32-byte SHA-256 of that encoding is what is signed (secp256k1 ECDSA
//! over SHA-256 of those 32 bytes, k256's `Signer`).
//!
//! | format              | signed by      | binds                                                   |
//! |---------------------|----------------|---------------------------------------------------------|
//! | `gonka/request/v3`  | the requester  | chain id, body hash, timestamp, commission, transfer agent, model, max price per token, max completion tokens, max prompt tokens, nonce |
//! | `gonka/receipt/v2`  | the ML node    | request hash, output commitment, prompt and completion tokens, node id, host |
//! | `gonka/node-key/v1` | the ML node    | proof of possession of a node key: chain id, host, node id, public key |
//! | `gonka/node-call/v1`| the caller of an ML node | node id, request hash, body hash, timestamp: a registered transfer agent or the node's own host |
//! | `gonka/bls-pop/v1`  | a participant's BLS key (BLS, `_POP_` DST) | chain id, address, BLS public key |
//!
//! Two hashes are commitments rather than signed messages, built the same way:
//! `gonka/output/text/v1` (the executor's salted answer, in the receipt and the record) and
//! `gonka/result/v1` (a validator's or committee member's own result, bound to its address).

use sha2::{Digest, Sha256};

/// Longest nonce a request may carry, in bytes (printable ASCII).
pub const MAX_NONCE_LEN: usize = 64;

/// Domain separator of the request hash.
pub const REQUEST_DOMAIN: &[u8] = b"gonka/request/v3";

/// Domain separator of an ML node's execution receipt.
pub const RECEIPT_DOMAIN: &[u8] = b"gonka/receipt/v2";

/// Domain separator of the output commitment of a text answer. A later output kind (integer
/// top-k log-probabilities of an inexact model) gets its own domain and fills the same
/// 32-byte `output_commitment` of the receipt.
pub const TEXT_OUTPUT_DOMAIN: &[u8] = b"gonka/output/text/v1";

/// Domain separator of a re-execution's result commitment.
pub const RESULT_DOMAIN: &[u8] = b"gonka/result/v1";

/// Domain separator of the message a BLS key's proof of possession signs.
pub const BLS_POP_DOMAIN: &[u8] = b"gonka/bls-pop/v1";

/// Domain separator of a node key's proof of possession.
pub const NODE_KEY_DOMAIN: &[u8] = b"gonka/node-key/v1";

/// Domain separator of a call to an ML node.
pub const NODE_CALL_DOMAIN: &[u8] = b"gonka/node-call/v1";

/// The inference id of a request: the lowercase hex of its 32-byte `request_hash`.
pub fn inference_id(request_hash: &[u8]) -> String {
    request_hash.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `text` has the shape of an inference id: 64 lowercase hex characters.
pub fn is_inference_id(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// SHA-256 of a request body: a work record's `prompt_hash`.
pub fn body_hash(body: &[u8]) -> [u8; 32] {
    Sha256::digest(body).into()
}

/// SHA-256 of a completion's generated text (UTF-8): what a validator's re-execution is
/// compared by.
pub fn response_hash(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

/// The unambiguous encoder of signed messages (see the module docs).
struct Signed(Sha256);

impl Signed {
    fn new(domain: &[u8]) -> Signed {
        let mut hasher = Sha256::new();
        hasher.update(domain);
        Signed(hasher)
    }

    fn fixed(mut self, bytes: &[u8]) -> Signed {
        self.0.update(bytes);
        self
    }

    fn text(mut self, text: &str) -> Signed {
        let len = u32::try_from(text.len()).unwrap_or(u32::MAX);
        self.0.update(len.to_be_bytes());
        self.0.update(text.as_bytes());
        self
    }

    fn finish(self) -> [u8; 32] {
        self.0.finalize().into()
    }
}

/// What a requester agrees to for one request: every field the transfer agent, the ML node
/// and the chain read from the request, bound by one signature. The model and `max_tokens`
/// inside the body are not enough: the transfer agent and the ML node refuse a body whose
/// `model` differs from [`RequestTerms::model`] or whose `max_tokens` exceeds
/// [`RequestTerms::max_completion_tokens`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestTerms {
    /// The chain whose transfer agent and prices are meant (a request cannot be replayed on
    /// another chain).
    pub chain_id: String,
    /// SHA-256 of the exact request body ([`body_hash`]).
    pub body_hash: [u8; 32],
    /// Unix seconds when the requester signed.
    pub timestamp: u64,
    /// 1 to [`MAX_NONCE_LEN`] printable ASCII characters, unique per request.
    pub nonce: String,
    /// ngnk the requester pays the transfer agent.
    pub commission: u128,
    /// Address of the only transfer agent that may submit the request's work record (and
    /// earn its commission).
    pub transfer_agent: String,
    /// The model id that must serve the request.
    pub model: String,
    /// Most ngnk per token the requester pays; the chain refuses a record of a model priced
    /// higher.
    pub max_price_per_token: u128,
    /// Most completion tokens the requester pays for; the chain refuses a record claiming
    /// more.
    pub max_completion_tokens: u64,
    /// Most prompt tokens the requester pays for (the prompt as the model tokenizes it, chat
    /// template included); the ML node refuses a longer prompt and the chain a record
    /// claiming more. A requester that cannot tokenize signs the body's length in bytes,
    /// which no chat-formatted prompt of it exceeds.
    pub max_prompt_tokens: u64,
}

impl RequestTerms {
    /// The 32 bytes the requester signs: SHA-256 of `"gonka/request/v3"` ‖ chain id ‖
    /// body hash ‖ timestamp (u64) ‖ commission (u128) ‖ transfer agent ‖ model ‖ max price
    /// per token (u128) ‖ max completion tokens (u64) ‖ max prompt tokens (u64) ‖ nonce,
    /// encoded as the module docs say.
    /// Its lowercase hex is the inference id.
    pub fn hash(&self) -> [u8; 32] {
        Signed::new(REQUEST_DOMAIN)
            .text(&self.chain_id)
            .fixed(&self.body_hash)
            .fixed(&self.timestamp.to_be_bytes())
            .fixed(&self.commission.to_be_bytes())
            .text(&self.transfer_agent)
            .text(&self.model)
            .fixed(&self.max_price_per_token.to_be_bytes())
            .fixed(&self.max_completion_tokens.to_be_bytes())
            .fixed(&self.max_prompt_tokens.to_be_bytes())
            .text(&self.nonce)
            .finish()
    }
}

/// Room a chat template needs beyond the body's own bytes (a default system prompt and the
/// turn markers), in tokens.
pub const TEMPLATE_TOKENS: u64 = 64;

/// The prompt tokens a requester that cannot tokenize signs for a chat `body`
/// ([`RequestTerms::max_prompt_tokens`]): its length in bytes plus [`TEMPLATE_TOKENS`]. The
/// network's tokenizers make at most one token per byte of text, and the JSON around each
/// message is longer than a template's markers for it.
pub fn prompt_token_bound(body: &[u8]) -> u64 {
    (body.len() as u64).saturating_add(TEMPLATE_TOKENS)
}

/// Whether `nonce` is 1 to [`MAX_NONCE_LEN`] printable ASCII characters.
pub fn nonce_ok(nonce: &str) -> bool {
    !nonce.is_empty() && nonce.len() <= MAX_NONCE_LEN && nonce.bytes().all(|b| b.is_ascii_graphic())
}

/// The salted commitment to a text answer: SHA-256(`"gonka/output/text/v1"` ‖ salt (32) ‖
/// SHA-256(text) (32)). The salt is known to the executing ML node and the transfer agent
/// only, so the commitment tells nobody else what the answer was.
pub fn text_output_commitment(salt: &[u8; 32], response_hash: &[u8; 32]) -> [u8; 32] {
    Signed::new(TEXT_OUTPUT_DOMAIN)
        .fixed(salt)
        .fixed(response_hash)
        .finish()
}

/// What an ML node signs for one executed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptTerms {
    /// The request's [`RequestTerms::hash`], which the node computed itself from the body it
    /// executed and the requester's signed terms.
    pub request_hash: [u8; 32],
    /// The salted commitment to the output ([`text_output_commitment`]).
    pub output_commitment: [u8; 32],
    /// Prompt tokens as the node counted them.
    pub prompt_tokens: u64,
    /// Completion tokens as the node counted them.
    pub completion_tokens: u64,
    /// The executing node's registered id.
    pub node_id: String,
    /// The node's registered host (the participant paid for the work).
    pub host: String,
}

impl ReceiptTerms {
    /// The 32 bytes the node signs: SHA-256 of `"gonka/receipt/v2"` ‖ request hash ‖ output
    /// commitment ‖ prompt tokens (u64) ‖ completion tokens (u64) ‖ node id ‖ host.
    pub fn sign_bytes(&self) -> [u8; 32] {
        Signed::new(RECEIPT_DOMAIN)
            .fixed(&self.request_hash)
            .fixed(&self.output_commitment)
            .fixed(&self.prompt_tokens.to_be_bytes())
            .fixed(&self.completion_tokens.to_be_bytes())
            .text(&self.node_id)
            .text(&self.host)
            .finish()
    }
}

/// What a node key signs when it is registered: SHA-256 of `"gonka/node-key/v1"` ‖ chain id ‖
/// host ‖ node id ‖ public key (SEC1). It proves the host holds the key, so nobody can
/// register another host's key and claim its signatures.
pub fn node_key_proof_bytes(chain_id: &str, host: &str, node_id: &str, pubkey: &[u8]) -> [u8; 32] {
    let len = u32::try_from(pubkey.len()).unwrap_or(u32::MAX);
    Signed::new(NODE_KEY_DOMAIN)
        .text(chain_id)
        .text(host)
        .text(node_id)
        .fixed(&len.to_be_bytes())
        .fixed(pubkey)
        .finish()
}

/// What the caller of an ML node signs per call: SHA-256 of `"gonka/node-call/v1"` ‖ node id
/// ‖ request hash (32 zero bytes for an unreceipted call) ‖ body hash ‖ timestamp (u64).
pub fn node_call_bytes(
    node_id: &str,
    request_hash: &[u8; 32],
    body_hash: &[u8; 32],
    timestamp: u64,
) -> [u8; 32] {
    Signed::new(NODE_CALL_DOMAIN)
        .text(node_id)
        .fixed(request_hash)
        .fixed(body_hash)
        .fixed(&timestamp.to_be_bytes())
        .finish()
}

/// What a participant's BLS proof of possession signs (under the `_POP_` DST): SHA-256 of
/// `"gonka/bls-pop/v1"` ‖ chain id ‖ address ‖ public key (48 bytes, length-prefixed), so
/// a proof copied from another registration proves nothing for a second registrant.
pub fn bls_pop_bytes(chain_id: &str, address: &str, pubkey: &[u8]) -> [u8; 32] {
    let len = u32::try_from(pubkey.len()).unwrap_or(u32::MAX);
    Signed::new(BLS_POP_DOMAIN)
        .text(chain_id)
        .text(address)
        .fixed(&len.to_be_bytes())
        .fixed(pubkey)
        .finish()
}

/// What a key generation dealer's shares are encrypted under (`gonka_bls_crypto::dkg`), so a
/// ciphertext means nothing in another chain, round or dealing: `"gonka/dkg/v1"` ‖ chain id
/// ‖ round (u64) ‖ dealer, each length-prefixed. The bytes themselves, not their hash: they
/// feed the share pads.
pub fn dkg_dealing_context(chain_id: &str, round: u64, dealer: &str) -> Vec<u8> {
    let mut context = b"gonka/dkg/v1".to_vec();
    for part in [chain_id.as_bytes(), &round.to_be_bytes(), dealer.as_bytes()] {
        context.extend_from_slice(&(part.len() as u32).to_be_bytes());
        context.extend_from_slice(part);
    }
    context
}

/// What the group signs for the randomness beacon of `height` (each validator's partial in
/// its vote extension of that height): `"gonka/beacon/v1"` ‖ chain id ‖ height (u64), each
/// length-prefixed like [`dkg_dealing_context`].
pub fn beacon_message(chain_id: &str, height: u64) -> Vec<u8> {
    let mut message = b"gonka/beacon/v1".to_vec();
    for part in [chain_id.as_bytes(), &height.to_be_bytes()] {
        message.extend_from_slice(&(part.len() as u32).to_be_bytes());
        message.extend_from_slice(part);
    }
    message
}

/// Domain of epoch certificates.
pub const CERTIFICATE_DOMAIN: &[u8] = b"gonka/epoch-certificate/v1";
/// Domain of group handovers.
pub const HANDOVER_DOMAIN: &[u8] = b"gonka/group-handover/v1";

/// What an epoch certificate signs: SHA-256(`"gonka/epoch-certificate/v1"` ‖ the summary's
/// protobuf encoding). A light client recomputes it from the summary it was given.
pub fn certificate_digest(summary: &crate::bls::EpochSummary) -> [u8; 32] {
    domain_digest(CERTIFICATE_DOMAIN, summary)
}

/// What a group handover signs: SHA-256(`"gonka/group-handover/v1"` ‖ the handover's
/// protobuf encoding).
pub fn handover_digest(handover: &crate::bls::GroupHandover) -> [u8; 32] {
    domain_digest(HANDOVER_DOMAIN, handover)
}

fn domain_digest(domain: &[u8], message: &impl prost::Message) -> [u8; 32] {
    Sha256::new()
        .chain_update(domain)
        .chain_update(message.encode_to_vec())
        .finalize()
        .into()
}

/// What a validator or committee member commits on chain for its re-execution of a record:
/// SHA-256(`"gonka/result/v1"` ‖ its address ‖ SHA-256 of its answer text ‖ prompt tokens
/// (u64) ‖ completion tokens (u64)). The address binds it to its author (nobody can submit a
/// copy of another's commitment as its own) and the answer stays hidden until the record's
/// output is revealed, when the chain recomputes this from the revealed answer.
pub fn result_commitment(
    address: &str,
    result_hash: &[u8; 32],
    prompt_tokens: u64,
    completion_tokens: u64,
) -> [u8; 32] {
    Signed::new(RESULT_DOMAIN)
        .text(address)
        .fixed(result_hash)
        .fixed(&prompt_tokens.to_be_bytes())
        .fixed(&completion_tokens.to_be_bytes())
        .finish()
}

/// Whether `salt` and `response_hash` open the record's `output_commitment`.
pub fn opens(
    record: &crate::inference::WorkRecord,
    salt: &[u8; 32],
    response_hash: &[u8; 32],
) -> bool {
    text_output_commitment(salt, response_hash).as_slice() == record.output_commitment
}

/// Whether the result `address` committed to (`commitment`) is the record's revealed answer
/// `revealed` with the record's token counts. A wrong token count is a fault like a wrong
/// answer.
pub fn result_matches(
    record: &crate::inference::WorkRecord,
    revealed: &[u8; 32],
    address: &str,
    commitment: &[u8],
) -> bool {
    result_commitment(
        address,
        revealed,
        record.prompt_tokens,
        record.completion_tokens,
    )
    .as_slice()
        == commitment
}

/// Domain of batch co-signatures.
pub const BATCH_DOMAIN: &[u8] = b"gonka/batch/v1";

/// What every host of a settled batch signs with its registered BLS key: SHA-256 of
/// `"gonka/batch/v1"` ‖ chain id ‖ the protobuf `MsgSettleBatch` with `host_signature`
/// empty. One message for all hosts, so the chain checks the aggregate with one
/// fast-aggregate verification; it binds every total, the root, the transfer agent and its
/// batch number (a replayed batch has a used number).
pub fn batch_sign_bytes(chain_id: &str, batch: &crate::settlement::MsgSettleBatch) -> [u8; 32] {
    let unsigned = crate::settlement::MsgSettleBatch {
        host_signature: Vec::new(),
        ..batch.clone()
    };
    Signed::new(BATCH_DOMAIN)
        .text(chain_id)
        .fixed(&prost::Message::encode_to_vec(&unsigned))
        .finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms() -> RequestTerms {
        RequestTerms {
            chain_id: "c".into(),
            body_hash: [1; 32],
            timestamp: 7,
            nonce: "n".into(),
            commission: 3,
            transfer_agent: "ta".into(),
            model: "m".into(),
            max_price_per_token: 10,
            max_completion_tokens: 256,
            max_prompt_tokens: 512,
        }
    }

    #[test]
    fn request_hash_follows_the_documented_layout_and_binds_every_field() {
        let mut layout = b"gonka/request/v3".to_vec();
        layout.extend_from_slice(&[0, 0, 0, 1, b'c']);
        layout.extend_from_slice(&[1; 32]);
        layout.extend_from_slice(&7u64.to_be_bytes());
        layout.extend_from_slice(&3u128.to_be_bytes());
        layout.extend_from_slice(&[0, 0, 0, 2, b't', b'a']);
        layout.extend_from_slice(&[0, 0, 0, 1, b'm']);
        layout.extend_from_slice(&10u128.to_be_bytes());
        layout.extend_from_slice(&256u64.to_be_bytes());
        layout.extend_from_slice(&512u64.to_be_bytes());
        layout.extend_from_slice(&[0, 0, 0, 1, b'n']);
        let expected: [u8; 32] = Sha256::digest(&layout).into();
        assert_eq!(terms().hash(), expected);

        let changes: [fn(&mut RequestTerms); 10] = [
            |t| t.chain_id.push('x'),
            |t| t.body_hash[0] = 2,
            |t| t.timestamp += 1,
            |t| t.nonce.push('x'),
            |t| t.commission += 1,
            |t| t.transfer_agent.push('x'),
            |t| t.model.push('x'),
            |t| t.max_price_per_token += 1,
            |t| t.max_completion_tokens += 1,
            |t| t.max_prompt_tokens += 1,
        ];
        for change in changes {
            let mut t = terms();
            change(&mut t);
            assert_ne!(t.hash(), expected, "{t:?}");
        }
        // Length prefixes: moving a character between neighbouring strings changes the hash.
        let mut shifted = terms();
        shifted.transfer_agent = "tam".into();
        shifted.model = String::new();
        assert_ne!(shifted.hash(), expected);
    }

    #[test]
    fn receipt_bytes_bind_every_field() {
        let receipt = ReceiptTerms {
            request_hash: [1; 32],
            output_commitment: [2; 32],
            prompt_tokens: 3,
            completion_tokens: 4,
            node_id: "n".into(),
            host: "h".into(),
        };
        let mut layout = b"gonka/receipt/v2".to_vec();
        layout.extend_from_slice(&[1; 32]);
        layout.extend_from_slice(&[2; 32]);
        layout.extend_from_slice(&3u64.to_be_bytes());
        layout.extend_from_slice(&4u64.to_be_bytes());
        layout.extend_from_slice(&[0, 0, 0, 1, b'n', 0, 0, 0, 1, b'h']);
        let expected: [u8; 32] = Sha256::digest(&layout).into();
        assert_eq!(receipt.sign_bytes(), expected);
        let changes: [fn(&mut ReceiptTerms); 6] = [
            |r| r.request_hash[0] = 0,
            |r| r.output_commitment[0] = 0,
            |r| r.prompt_tokens += 1,
            |r| r.completion_tokens += 1,
            |r| r.node_id.push('x'),
            |r| r.host.push('x'),
        ];
        for change in changes {
            let mut r = receipt.clone();
            change(&mut r);
            assert_ne!(r.sign_bytes(), expected, "{r:?}");
        }
    }

    #[test]
    fn output_commitment_depends_on_salt_and_answer() {
        let c = text_output_commitment(&[1; 32], &response_hash("a"));
        assert_ne!(c, text_output_commitment(&[2; 32], &response_hash("a")));
        assert_ne!(c, text_output_commitment(&[1; 32], &response_hash("b")));
        assert_ne!(c, response_hash("a"));
    }

    #[test]
    fn node_key_proof_and_call_bytes_are_domain_separated() {
        let proof = node_key_proof_bytes("c", "h", "n", &[2; 33]);
        assert_ne!(proof, node_key_proof_bytes("c2", "h", "n", &[2; 33]));
        assert_ne!(proof, node_key_proof_bytes("c", "h2", "n", &[2; 33]));
        assert_ne!(proof, node_key_proof_bytes("c", "h", "n", &[3; 33]));
        let call = node_call_bytes("n", &[1; 32], &[2; 32], 5);
        assert_ne!(call, node_call_bytes("n", &[1; 32], &[2; 32], 6));
        assert_ne!(call, node_call_bytes("m", &[1; 32], &[2; 32], 5));
        assert_ne!(call, node_call_bytes("n", &[0; 32], &[2; 32], 5));
    }

    #[test]
    fn dkg_contexts_differ_by_chain_round_and_dealer() {
        let c = dkg_dealing_context("c", 1, "d");
        assert_ne!(c, dkg_dealing_context("c", 2, "d"));
        assert_ne!(c, dkg_dealing_context("c", 1, "e"));
        assert_ne!(c, dkg_dealing_context("cc", 1, "d"));
    }

    #[test]
    fn inference_id_is_lowercase_hex() {
        assert_eq!(inference_id(&[0xAB; 2]), "abab");
        assert!(is_inference_id(&inference_id(&[0xAB; 32])));
        assert!(!is_inference_id(&"AB".repeat(32)));
        assert!(!is_inference_id("abab"));
    }

    #[test]
    fn nonces_are_printable_and_bounded() {
        assert!(nonce_ok("a-1"));
        assert!(!nonce_ok(""));
        assert!(!nonce_ok("a b"));
        assert!(!nonce_ok(&"x".repeat(MAX_NONCE_LEN + 1)));
    }
    #[test]
    fn a_result_matches_only_its_author_the_revealed_answer_and_counts() {
        let salt = [7u8; 32];
        let answer = response_hash("the answer");
        let record = crate::inference::WorkRecord {
            output_commitment: text_output_commitment(&salt, &answer).to_vec(),
            prompt_tokens: 10,
            completion_tokens: 5,
            ..Default::default()
        };
        assert!(opens(&record, &salt, &answer));
        assert!(!opens(&record, &[8; 32], &answer), "another salt");
        assert!(
            !opens(&record, &salt, &response_hash("x")),
            "another answer"
        );
        let mine = result_commitment("gonka1v", &answer, 10, 5);
        assert!(result_matches(&record, &answer, "gonka1v", &mine));
        assert!(
            !result_matches(&record, &answer, "gonka1copier", &mine),
            "a copied commitment is another's"
        );
        let wrong = result_commitment("gonka1v", &response_hash("another"), 10, 5);
        assert!(!result_matches(&record, &answer, "gonka1v", &wrong));
        let inflated = result_commitment("gonka1v", &answer, 10, 6);
        assert!(!result_matches(&record, &answer, "gonka1v", &inflated));
        let prompt = result_commitment("gonka1v", &answer, 11, 5);
        assert!(!result_matches(&record, &answer, "gonka1v", &prompt));
    }
}
