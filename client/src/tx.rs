//! Building and signing transactions (SIGN_MODE_DIRECT, one signer).

use anyhow::{anyhow, Result};
use cosmrs::tx::{Body, Fee, SignDoc, SignerInfo};
use cosmrs::{Any, Coin, Denom};
use gonka_proto::auth::SignDocHint;
use gonka_proto::bank::{Coin as ProtoCoin, MsgSend};
use gonka_proto::inference::{
    MsgRegisterNode, MsgRegisterTransferAgent, MsgRemoveNode, MsgUpdateNode, Node, WorkRecord,
};
use gonka_proto::stake::{MsgStake, MsgUnjail, MsgUnstake};
use prost::{Message, Name};

use crate::{Key, DENOM};

/// What the signature commits to besides the body and fee.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignerData {
    /// Chain id of the target chain.
    pub chain_id: String,
    /// The signer's account number.
    pub account_number: u64,
    /// The signer's next sequence.
    pub sequence: u64,
}

/// `msg` as an `Any` with its `/<package>.<Message>` type URL.
pub fn any_of<M: Message + Name>(msg: &M) -> Any {
    Any {
        type_url: format!("/{}", M::full_name()),
        value: msg.encode_to_vec(),
    }
}

/// Bytes of messages one transaction carries at most when [`pack`] splits them: a quarter
/// below auth's default `max_tx_bytes` (64 KiB), leaving room for the signature, fee and
/// framing.
pub const TX_MSG_BUDGET: usize = 48 * 1024;

/// Messages one transaction carries at most: auth's default `max_msgs_per_tx`.
pub const TX_MAX_MSGS: usize = 32;

/// Splits `msgs`, in order, into groups of at most `max_msgs` whose encoded sizes add up to
/// at most `budget` bytes (a message larger than the budget goes alone), one transaction each.
pub fn pack(msgs: Vec<Any>, max_msgs: usize, budget: usize) -> Vec<Vec<Any>> {
    let mut groups: Vec<Vec<Any>> = Vec::new();
    let mut size = 0;
    for msg in msgs {
        let len = msg.type_url.len() + msg.value.len() + 8;
        match groups.last_mut() {
            Some(group) if group.len() < max_msgs.max(1) && size + len <= budget => {
                size += len;
                group.push(msg);
            }
            _ => {
                size = len;
                groups.push(vec![msg]);
            }
        }
    }
    groups
}

/// `/gonka.bank.v1.MsgSend` of `amount` ngnk.
pub fn msg_send(from: &str, to: &str, amount: u128) -> Any {
    any_of(&MsgSend {
        from_address: from.into(),
        to_address: to.into(),
        amount: vec![ProtoCoin {
            denom: DENOM.into(),
            amount: amount.to_string(),
        }],
    })
}

/// `/gonka.stake.v1.MsgStake` bonding `amount` ngnk of `operator`. The first stake creates
/// the participant (and must be at least the chain's `min_stake`); later ones add to it. An
/// empty `moniker` keeps the current one; `consensus_pubkey` (a CometBFT ed25519 public key)
/// makes the participant a validator candidate and can be set only once.
pub fn msg_stake(
    operator: &str,
    amount: u128,
    moniker: &str,
    consensus_pubkey: Option<[u8; 32]>,
) -> Any {
    any_of(&MsgStake {
        operator: operator.into(),
        amount: amount.to_string(),
        moniker: moniker.into(),
        consensus_pubkey: consensus_pubkey.map(Vec::from).unwrap_or_default(),
    })
}

/// `/gonka.stake.v1.MsgUnstake` moving `amount` ngnk of `operator` from bonded to
/// unbonding; it is paid back after the chain's `unbonding_epochs`.
pub fn msg_unstake(operator: &str, amount: u128) -> Any {
    any_of(&MsgUnstake {
        operator: operator.into(),
        amount: amount.to_string(),
    })
}

/// `/gonka.stake.v1.MsgUnjail` ending the jailing of `operator` once its jail time is over.
pub fn msg_unjail(operator: &str) -> Any {
    any_of(&MsgUnjail {
        operator: operator.into(),
    })
}

pub use gonka_proto::gas::GasPrice;

/// A tx's gas limit and the fee, in ngnk, that pays for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GasFee {
    /// Most gas the tx may use; the chain reports it as `gas_wanted`.
    pub gas_limit: u64,
    /// Fee in ngnk; the chain accepts at least ceil(gas_limit × its minimum gas price).
    pub amount: u128,
}

impl GasFee {
    /// What a tx signed only to be simulated carries: no limit and no fee.
    pub const SIMULATION: GasFee = GasFee {
        gas_limit: 0,
        amount: 0,
    };

    /// `gas_limit` paid at `price` per gas unit: ceil(gas_limit × price), the least fee a
    /// chain whose minimum gas price is `price` accepts for that limit.
    pub fn at_price(gas_limit: u64, price: &GasPrice) -> Result<GasFee> {
        let amount = price.fee_for(gas_limit).ok_or_else(|| {
            anyhow!(
                "gas limit {gas_limit} at {price}ngnk per gas unit overflows; lower the gas limit"
            )
        })?;
        Ok(GasFee { gas_limit, amount })
    }
}

/// A multiplier applied to simulated gas before it becomes a gas limit, so the tx still fits
/// if the state moves a little between the simulation and the block (Cosmos
/// `--gas-adjustment`). Held in thousandths; no floats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GasAdjustment {
    per_mille: u64,
}

impl GasAdjustment {
    /// 1.3, as Cosmos guides recommend with `--gas auto`.
    pub const DEFAULT: GasAdjustment = GasAdjustment { per_mille: 1_300 };

    /// Parses a decimal of at least 1 with up to 3 fractional digits, e.g. `1.3`.
    pub fn parse(text: &str) -> Result<GasAdjustment> {
        let bad = || {
            anyhow!("gas adjustment {text:?} must be a decimal of at least 1 with up to 3 fractional digits, such as 1.3")
        };
        let (whole, fraction) = text.trim().split_once('.').unwrap_or((text.trim(), ""));
        let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if whole.is_empty() || !digits(whole) || !digits(fraction) || fraction.len() > 3 {
            return Err(bad());
        }
        let whole: u64 = whole.parse().map_err(|_| bad())?;
        let fraction: u64 = format!("{fraction:0<3}").parse().map_err(|_| bad())?;
        let per_mille = whole
            .checked_mul(1_000)
            .and_then(|w| w.checked_add(fraction))
            .filter(|p| *p >= 1_000)
            .ok_or_else(bad)?;
        Ok(GasAdjustment { per_mille })
    }

    /// ceil(gas × adjustment), saturating at `u64::MAX`.
    pub fn apply(&self, gas: u64) -> u64 {
        // Rounded up: an estimate must not shrink.
        let adjusted = (u128::from(gas) * u128::from(self.per_mille)).div_ceil(1_000);
        u64::try_from(adjusted).unwrap_or(u64::MAX)
    }
}

/// Signs `msgs` into `TxRaw` bytes with `fee`'s gas limit and amount. The body carries a
/// `/gonka.auth.v1.SignDocHint` so the chain can name a chain-id or account-number mismatch.
pub fn sign(
    key: &Key,
    msgs: Vec<Any>,
    signer: &SignerData,
    fee: GasFee,
    memo: &str,
) -> Result<Vec<u8>> {
    let mut body = Body::new(msgs, memo, 0u32);
    body.non_critical_extension_options
        .push(any_of(&SignDocHint {
            chain_id: signer.chain_id.clone(),
            account_number: signer.account_number,
        }));
    let denom: Denom = DENOM.parse().map_err(|e| anyhow!("{e}"))?;
    // A zero fee is no coin at all: the chain, like the Cosmos SDK, refuses a "0ngnk" coin.
    let amount = (fee.amount > 0)
        .then_some(Coin {
            denom,
            amount: fee.amount,
        })
        .into_iter()
        .collect();
    let fee = Fee {
        amount,
        gas_limit: fee.gas_limit,
        payer: None,
        granter: None,
    };
    let auth_info =
        SignerInfo::single_direct(Some(key.public_key()), signer.sequence).auth_info(fee);
    let doc = SignDoc::new(
        &body,
        &auth_info,
        &signer
            .chain_id
            .parse()
            .map_err(|e| anyhow!("invalid chain id: {e}"))?,
        signer.account_number,
    )
    .map_err(|e| anyhow!("cannot build sign doc: {e}"))?;
    let raw = doc
        .sign(key.signing_key())
        .map_err(|e| anyhow!("signing failed: {e}"))?;
    raw.to_bytes().map_err(|e| anyhow!("cannot encode tx: {e}"))
}

/// What an ML node declares in `MsgRegisterNode` / `MsgUpdateNode`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    /// Globally unique node id: 1 to 64 of `[A-Za-z0-9._-]`.
    pub node_id: String,
    /// Model ids served; each must be priced by the chain and fit `vram_mib`.
    pub models: Vec<String>,
    /// VRAM in MiB.
    pub vram_mib: u64,
    /// Bandwidth in Mbit/s.
    pub bandwidth_mbps: u64,
    /// Most requests served at once (at least 1).
    pub max_concurrency: u64,
    /// `http://` or `https://` URL transfer agents reach the node at.
    pub endpoint: String,
    /// Compressed (33-byte) secp256k1 public key that signs the node's receipts.
    pub pubkey: Vec<u8>,
    /// The node key's proof of possession ([`node_key_proof`]).
    pub key_proof: Vec<u8>,
}

impl NodeSpec {
    /// What `node` declares (its host aside, which signs the message).
    pub fn of(node: &Node) -> NodeSpec {
        NodeSpec {
            node_id: node.id.clone(),
            models: node.models.clone(),
            vram_mib: node.vram_mib,
            bandwidth_mbps: node.bandwidth_mbps,
            max_concurrency: node.max_concurrency,
            endpoint: node.endpoint.clone(),
            pubkey: node.pubkey.clone(),
            key_proof: node.key_proof.clone(),
        }
    }
}

/// The proof that the holder of node key `key` registers it as node `node_id` of `host` on
/// chain `chain_id`: its signature over [`gonka_proto::signing::node_key_proof_bytes`].
pub fn node_key_proof(
    key: &k256::ecdsa::SigningKey,
    chain_id: &str,
    host: &str,
    node_id: &str,
) -> Vec<u8> {
    use k256::ecdsa::signature::Signer;
    let pubkey = key.verifying_key().to_encoded_point(true);
    let bytes =
        gonka_proto::signing::node_key_proof_bytes(chain_id, host, node_id, pubkey.as_bytes());
    let signature: k256::ecdsa::Signature = key.sign(&bytes);
    signature.to_bytes().to_vec()
}

/// The node `host` declares in `MsgRegisterNode` / `MsgUpdateNode`.
fn node_of(host: &str, spec: &NodeSpec) -> Node {
    Node {
        id: spec.node_id.clone(),
        host: host.into(),
        models: spec.models.clone(),
        vram_mib: spec.vram_mib,
        bandwidth_mbps: spec.bandwidth_mbps,
        max_concurrency: spec.max_concurrency,
        endpoint: spec.endpoint.clone(),
        pubkey: spec.pubkey.clone(),
        key_proof: spec.key_proof.clone(),
    }
}

/// `/gonka.inference.v1.MsgRegisterNode`: `host` (a staked participant) registers a node.
pub fn msg_register_node(host: &str, node: &NodeSpec) -> Any {
    any_of(&MsgRegisterNode {
        node: Some(node_of(host, node)),
    })
}

/// `/gonka.inference.v1.MsgUpdateNode`: `host` replaces every field of its node.
pub fn msg_update_node(host: &str, node: &NodeSpec) -> Any {
    any_of(&MsgUpdateNode {
        node: Some(node_of(host, node)),
    })
}

/// `/gonka.inference.v1.MsgRemoveNode`: `host` removes its node `node_id`.
pub fn msg_remove_node(host: &str, node_id: &str) -> Any {
    any_of(&MsgRemoveNode {
        host: host.into(),
        node_id: node_id.into(),
    })
}

/// `/gonka.inference.v1.MsgRegisterTransferAgent`: `address` (a staked participant)
/// registers, or updates, its public `url` and compressed secp256k1 `pubkey`.
pub fn msg_register_transfer_agent(address: &str, url: &str, pubkey: &[u8]) -> Any {
    any_of(&MsgRegisterTransferAgent {
        address: address.into(),
        url: url.into(),
        pubkey: pubkey.to_vec(),
    })
}

pub use gonka_proto::signing::{inference_id, RequestTerms};

/// The facts of one served inference, before signing.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkRecordInput {
    /// What the requester signed (`body_hash` is the record's `prompt_hash`).
    pub terms: RequestTerms,
    /// SHA-256 of the answer text ([`gonka_proto::signing::response_hash`]).
    pub response_hash: [u8; 32],
    /// The salt of the output commitment (kept by the transfer agent for the reveal, never
    /// in the record).
    pub salt: [u8; 32],
    /// For a "logprobs" model: the executor's scored output, which the commitment is to
    /// instead of `response_hash` ([`gonka_proto::scored::output_commitment`]).
    pub scored: Option<gonka_proto::disputes::ScoredOutput>,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Id of the executing ML node.
    pub executor_node: String,
    /// Its host.
    pub host: String,
}

/// A complete work record: the requester's signature over the request/v3 hash of
/// `input.terms` (by `requester`, whose compressed public key is included) and the executor
/// node's receipt/v2 signature (by `executor`), both SHA-256 prehashed ECDSA in compact form.
pub fn signed_work_record(
    requester: &Key,
    executor: &k256::ecdsa::SigningKey,
    input: &WorkRecordInput,
) -> Result<WorkRecord> {
    use gonka_proto::signing::{text_output_commitment, ReceiptTerms};
    use k256::ecdsa::signature::Signer;
    let terms = &input.terms;
    let request_hash = terms.hash();
    let requester_signature = requester
        .signing_key()
        .sign(&request_hash)
        .map_err(|e| anyhow!("requester signing failed: {e}"))?
        .to_bytes()
        .to_vec();
    let output_commitment = match &input.scored {
        Some(scored) => gonka_proto::scored::output_commitment(&input.salt, scored),
        None => text_output_commitment(&input.salt, &input.response_hash),
    };
    let receipt = ReceiptTerms {
        request_hash,
        output_commitment,
        prompt_tokens: input.prompt_tokens,
        completion_tokens: input.completion_tokens,
        node_id: input.executor_node.clone(),
        host: input.host.clone(),
    };
    let executor_signature: k256::ecdsa::Signature = executor.sign(&receipt.sign_bytes());
    Ok(WorkRecord {
        inference_id: inference_id(&request_hash),
        requester: requester.address().to_string(),
        requester_pubkey: requester.public_key().to_bytes(),
        requester_signature,
        request_hash: request_hash.to_vec(),
        model: terms.model.clone(),
        prompt_hash: terms.body_hash.to_vec(),
        output_commitment: output_commitment.to_vec(),
        prompt_tokens: input.prompt_tokens,
        completion_tokens: input.completion_tokens,
        executor_node: input.executor_node.clone(),
        commission: terms.commission.to_string(),
        executor_signature: executor_signature.to_bytes().to_vec(),
        timestamp: terms.timestamp,
        nonce: terms.nonce.clone(),
        transfer_agent: terms.transfer_agent.clone(),
        max_price_per_token: terms.max_price_per_token.to_string(),
        max_completion_tokens: terms.max_completion_tokens,
        max_prompt_tokens: terms.max_prompt_tokens,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_keeps_order_and_stays_within_count_and_bytes() {
        let msg = |n: usize| Any {
            type_url: "/t".into(),
            value: vec![0; n],
        };
        let sizes = |groups: &[Vec<Any>]| {
            groups
                .iter()
                .map(|g| g.iter().map(|m| m.value.len()).collect::<Vec<_>>())
                .collect::<Vec<_>>()
        };
        let groups = pack(vec![msg(40), msg(40), msg(40), msg(100), msg(1)], 10, 100);
        assert_eq!(sizes(&groups), [vec![40, 40], vec![40], vec![100], vec![1]]);
        let groups = pack((0..5).map(|_| msg(1)).collect(), 2, 1_000);
        assert_eq!(sizes(&groups), [vec![1, 1], vec![1, 1], vec![1]]);
        assert!(pack(Vec::new(), 2, 10).is_empty());
    }

    #[test]
    fn gas_adjustment_and_fee_use_integer_math_rounding_up() {
        let adjustment = GasAdjustment::parse("1.3").unwrap();
        assert_eq!(adjustment, GasAdjustment::DEFAULT);
        assert_eq!(adjustment.apply(100_000), 130_000);
        assert_eq!(adjustment.apply(7), 10, "9.1 rounds up");
        assert_eq!(GasAdjustment::parse("2").unwrap().apply(u64::MAX), u64::MAX);
        assert_eq!(GasAdjustment::parse("1.005").unwrap().apply(1_000), 1_005);
        for bad in ["0.9", "", "1.0001", "x", "-1", "1e2"] {
            assert!(GasAdjustment::parse(bad).is_err(), "{bad:?}");
        }
        let price = GasPrice::parse("0.01").unwrap();
        assert_eq!(
            GasFee::at_price(123_456, &price).unwrap(),
            GasFee {
                gas_limit: 123_456,
                amount: 1_235
            }
        );
    }

    fn decode<M: Message + Name + Default>(any: &Any) -> M {
        assert_eq!(any.type_url, format!("/{}", M::full_name()));
        M::decode(any.value.as_slice()).unwrap()
    }

    #[test]
    fn stake_messages_round_trip() {
        let any = msg_stake("gonka1op", 5_000, "node-a", Some([7; 32]));
        assert_eq!(any.type_url, "/gonka.stake.v1.MsgStake");
        assert_eq!(
            decode::<MsgStake>(&any),
            MsgStake {
                operator: "gonka1op".into(),
                amount: "5000".into(),
                moniker: "node-a".into(),
                consensus_pubkey: vec![7; 32],
            }
        );
        let plain = decode::<MsgStake>(&msg_stake("gonka1op", 1, "", None));
        assert!(plain.consensus_pubkey.is_empty() && plain.moniker.is_empty());

        let any = msg_unstake("gonka1op", u128::MAX);
        assert_eq!(any.type_url, "/gonka.stake.v1.MsgUnstake");
        assert_eq!(
            decode::<MsgUnstake>(&any),
            MsgUnstake {
                operator: "gonka1op".into(),
                amount: u128::MAX.to_string(),
            }
        );

        let any = msg_unjail("gonka1op");
        assert_eq!(any.type_url, "/gonka.stake.v1.MsgUnjail");
        assert_eq!(decode::<MsgUnjail>(&any).operator, "gonka1op");
    }

    #[test]
    fn inference_messages_and_work_records() {
        let node = NodeSpec {
            node_id: "n1".into(),
            models: vec!["m".into()],
            vram_mib: 8,
            bandwidth_mbps: 100,
            max_concurrency: 2,
            endpoint: "http://127.0.0.1:9000".into(),
            pubkey: vec![2; 33],
            key_proof: vec![4; 64],
        };
        let registered = decode::<MsgRegisterNode>(&msg_register_node("gonka1h", &node))
            .node
            .unwrap();
        assert_eq!(
            (registered.host.as_str(), registered.vram_mib),
            ("gonka1h", 8)
        );
        let updated = decode::<MsgUpdateNode>(&msg_update_node("gonka1h", &node))
            .node
            .unwrap();
        assert_eq!(updated.endpoint, node.endpoint);
        assert_eq!(
            decode::<MsgRemoveNode>(&msg_remove_node("gonka1h", "n1")).node_id,
            "n1"
        );
        let ta = decode::<MsgRegisterTransferAgent>(&msg_register_transfer_agent(
            "gonka1t",
            "https://ta",
            &[3; 33],
        ));
        assert_eq!(ta.pubkey, vec![3; 33]);

        let requester = Key::from_mnemonic(&crate::keys::well_known_mnemonic("req")).unwrap();
        let executor = k256::ecdsa::SigningKey::from_slice(&[7; 32]).unwrap();
        let terms = RequestTerms {
            chain_id: "c".into(),
            body_hash: [1; 32],
            timestamp: 9,
            nonce: "n".into(),
            commission: 5,
            transfer_agent: "gonka1t".into(),
            model: "m".into(),
            max_price_per_token: 10,
            max_completion_tokens: 4,
            max_prompt_tokens: 8,
        };
        let input = WorkRecordInput {
            terms: terms.clone(),
            response_hash: [2; 32],
            salt: [6; 32],
            scored: None,
            prompt_tokens: 3,
            completion_tokens: 4,
            executor_node: "n1".into(),
            host: "gonka1h".into(),
        };
        let record = signed_work_record(&requester, &executor, &input).unwrap();
        let request_hash = terms.hash();
        assert_eq!(record.inference_id, inference_id(&request_hash));
        assert_eq!(record.request_hash, request_hash);
        assert_eq!(record.requester_pubkey.len(), 33);
        assert_eq!(
            (
                record.transfer_agent.as_str(),
                record.max_price_per_token.as_str()
            ),
            ("gonka1t", "10")
        );
        use gonka_proto::signing::{text_output_commitment, ReceiptTerms};
        use k256::ecdsa::signature::Verifier;
        let requester_key =
            k256::ecdsa::VerifyingKey::from_sec1_bytes(&record.requester_pubkey).unwrap();
        let signature = k256::ecdsa::Signature::from_slice(&record.requester_signature).unwrap();
        requester_key.verify(&request_hash, &signature).unwrap();
        let signature = k256::ecdsa::Signature::from_slice(&record.executor_signature).unwrap();
        let commitment = text_output_commitment(&[6; 32], &[2; 32]);
        assert_eq!(record.output_commitment, commitment);
        let receipt = ReceiptTerms {
            request_hash,
            output_commitment: commitment,
            prompt_tokens: 3,
            completion_tokens: 4,
            node_id: "n1".into(),
            host: "gonka1h".into(),
        };
        executor
            .verifying_key()
            .verify(&receipt.sign_bytes(), &signature)
            .unwrap();
    }
}
