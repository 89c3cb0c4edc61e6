//! The ante step: decode a `TxRaw`, then authenticate it and charge its fee.
//!
//! Cheap checks come before expensive ones, so a tx that cannot pay costs a node almost
//! nothing:
//! 1. [`decode`]: size, protobuf structure, message envelopes (each module's stateless
//!    checks; none verifies a signature), fee denom. It reads no state but the parameters;
//!    a tx it rejects changes nothing.
//! 2. [`authenticate`], under the tx's gas meter: the tx's bytes are charged, then the
//!    signer's account must exist, the sequence must be the next one, the fee must cover
//!    `ceil(gas limit × min gas price)` and the signer must hold it; only then is the public
//!    key decompressed and the tx signature verified (charged as one signature check). A tx
//!    it rejects changes nothing either; one it accepts has paid its fee and used its
//!    sequence even if a message later fails or runs out of gas.
//!
//! In [`Mode::Simulate`] (the `Simulate` query) the signature is not verified but its gas is
//! charged, an unspecified sign mode and an empty signature are accepted (as cosmjs sends
//! them), and the fee is transferred even if it is zero, so the gas reported is what the
//! signed tx will use.

use cosmrs::proto::cosmos::crypto::secp256k1::PubKey as CosmosPubKey;
use cosmrs::proto::cosmos::tx::signing::v1beta1::SignMode;
use cosmrs::proto::cosmos::tx::v1beta1::{mode_info, AuthInfo, SignDoc, TxBody, TxRaw};
use gonka_auth::{
    address_of_compressed_key, validate_address, AuthError, AuthParams, AuthRead, AuthWrite,
};
use gonka_bank::{fee_collector_address, parse_coins, transfer, Coin, NATIVE_DENOM};
use gonka_proto::auth::SignDocHint;
use gonka_sdk::{type_url, Error, ErrorCode, Event, GasMeter, Module, Msg, Result, StateWrite};
use prost::Message;

use crate::sig_cache::Verdict;

/// Length of a compact secp256k1 signature: what simulation charges for a tx that does not
/// carry one yet.
const SIGNATURE_LEN: usize = 64;

/// How a transaction is run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `CheckTx` and `FinalizeBlock`: every check, the gas limit enforced.
    Execute,
    /// The `Simulate` query: no signature check (its gas is still charged), no gas limit, no
    /// minimum fee; the caller keeps nothing.
    Simulate,
}

/// A structurally valid transaction whose messages passed their stateless checks.
pub struct DecodedTx {
    /// The single signer every message names.
    pub signer: String,
    /// Messages with their type URLs, in order.
    pub msgs: Vec<(String, Box<dyn Msg>)>,
    /// Gas limit the client asked for: the tx's `gas_wanted`.
    pub gas_limit: u64,
    /// Size of the TxRaw in bytes.
    size: usize,
    body_bytes: Vec<u8>,
    auth_info_bytes: Vec<u8>,
    signature: Vec<u8>,
    /// SEC1 bytes of the public key the tx carries; decompressed only after the cheap checks.
    pub_key: Option<Vec<u8>>,
    sequence: u64,
    fee: Coin,
    hint: Option<SignDocHint>,
}

impl DecodedTx {
    /// The sequence the tx is signed with.
    pub fn sequence(&self) -> u64 {
        self.sequence
    }
}

fn decode_err(what: &str, e: impl std::fmt::Display) -> Error {
    AuthError::TxDecode.err(format!("{what} is not valid protobuf: {e}"))
}

fn shape_err(log: String) -> Error {
    AuthError::InvalidTxShape.err(log)
}

/// Decodes `bytes` and runs every stateless check.
pub fn decode(
    modules: &[Box<dyn Module>],
    params: &AuthParams,
    bytes: &[u8],
    mode: Mode,
) -> Result<DecodedTx> {
    if bytes.len() as u64 > params.max_tx_bytes {
        return Err(AuthError::TxTooLarge.err(format!(
            "tx is {} bytes, the limit is {} bytes",
            bytes.len(),
            params.max_tx_bytes
        )));
    }
    let raw = TxRaw::decode(bytes).map_err(|e| decode_err("tx bytes", e))?;
    let body = TxBody::decode(raw.body_bytes.as_slice()).map_err(|e| decode_err("tx body", e))?;
    let auth_info = AuthInfo::decode(raw.auth_info_bytes.as_slice())
        .map_err(|e| decode_err("tx auth info", e))?;

    if body.messages.is_empty() || body.messages.len() as u64 > params.max_msgs_per_tx {
        return Err(shape_err(format!(
            "tx carries {} messages, expected 1 to {}",
            body.messages.len(),
            params.max_msgs_per_tx
        )));
    }
    if let Some(option) = body.extension_options.first() {
        return Err(shape_err(format!(
            "critical extension option {} is not supported",
            option.type_url
        )));
    }
    let mut msgs = Vec::with_capacity(body.messages.len());
    for any in &body.messages {
        let msg = modules
            .iter()
            .find_map(|module| module.decode_msg(any))
            .ok_or_else(|| {
                AuthError::UnknownMessage
                    .err(format!("no module handles message type {:?}", any.type_url))
            })??;
        msgs.push((any.type_url.clone(), msg));
    }
    let signer = msgs[0].1.signer().to_string();
    validate_address("signer", &signer)?;
    if let Some((url, other)) = msgs.iter().find(|(_, m)| m.signer() != signer) {
        return Err(AuthError::SignerMismatch.err(format!(
            "message {url} is signed by {} but the tx's first message by {signer}; one signer per tx",
            other.signer()
        )));
    }

    let [signer_info] = auth_info.signer_infos.as_slice() else {
        return Err(shape_err(format!(
            "tx has {} signer infos, expected exactly 1",
            auth_info.signer_infos.len()
        )));
    };
    let [signature] = raw.signatures.as_slice() else {
        return Err(shape_err(format!(
            "tx has {} signatures, expected exactly 1",
            raw.signatures.len()
        )));
    };
    let sign_mode = match signer_info.mode_info.as_ref().and_then(|m| m.sum.as_ref()) {
        Some(mode_info::Sum::Single(single)) => Some(single.mode),
        _ => None,
    };
    let accepted = sign_mode == Some(SignMode::Direct as i32)
        || (mode == Mode::Simulate && sign_mode == Some(SignMode::Unspecified as i32));
    if !accepted {
        return Err(shape_err(
            "only SIGN_MODE_DIRECT single signatures are supported".into(),
        ));
    }
    let pub_key = signer_info
        .public_key
        .as_ref()
        .map(pub_key_bytes)
        .transpose()?;

    let fee = auth_info.fee.unwrap_or_default();
    let gas_limit = fee.gas_limit;
    let fee_coins = if fee.amount.is_empty() {
        Vec::new()
    } else {
        parse_coins(
            "fee",
            fee.amount
                .iter()
                .map(|c| (c.denom.as_str(), c.amount.as_str())),
        )?
    };
    let fee = match fee_coins.as_slice() {
        [] => Coin::ngnk(0),
        [coin] if coin.denom == NATIVE_DENOM => coin.clone(),
        _ => {
            return Err(AuthError::InsufficientFee.err(format!(
                "fee must be paid in {NATIVE_DENOM} alone, found {}",
                fee_coins
                    .iter()
                    .map(Coin::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            )))
        }
    };
    let hint_url = type_url::<SignDocHint>();
    let hint = body
        .non_critical_extension_options
        .iter()
        .find(|o| o.type_url == hint_url)
        .map(|o| {
            SignDocHint::decode(o.value.as_slice()).map_err(|e| decode_err("sign doc hint", e))
        })
        .transpose()?;

    Ok(DecodedTx {
        signer,
        msgs,
        gas_limit,
        size: bytes.len(),
        body_bytes: raw.body_bytes,
        auth_info_bytes: raw.auth_info_bytes,
        signature: signature.clone(),
        pub_key,
        sequence: signer_info.sequence,
        fee,
        hint,
    })
}

/// The compressed SEC1 bytes (33) of a `/cosmos.crypto.secp256k1.PubKey`, as the Cosmos SDK
/// requires them; whether they are a curve point is checked with the signature.
fn pub_key_bytes(any: &gonka_sdk::Any) -> Result<Vec<u8>> {
    if any.type_url != type_url::<CosmosPubKey>() {
        return Err(AuthError::InvalidPubKey.err(format!(
            "public key type {} is not supported, expected {}",
            any.type_url,
            type_url::<CosmosPubKey>()
        )));
    }
    let key =
        CosmosPubKey::decode(any.value.as_slice()).map_err(|e| decode_err("public key", e))?;
    if key.key.len() != COMPRESSED_KEY_LEN || !matches!(key.key[0], 2 | 3) {
        return Err(AuthError::InvalidPubKey.err(format!(
            "public key must be a compressed secp256k1 key of {COMPRESSED_KEY_LEN} bytes (0x02 or 0x03, then x), found {} bytes",
            key.key.len()
        )));
    }
    Ok(key.key)
}

/// Length of a compressed SEC1 secp256k1 public key.
const COMPRESSED_KEY_LEN: usize = 33;

/// Authenticates `tx` against `state` (a state charged to `gas`), charges its fee to the fee
/// collector and increments the signer's sequence. On error nothing has been written that
/// the caller keeps: run it in a fork.
pub fn authenticate(
    tx: &DecodedTx,
    chain_id: &str,
    params: &AuthParams,
    gas: &GasMeter,
    state: &mut dyn StateWrite,
    mode: Mode,
) -> Result<()> {
    // Bytes first: a limit too small for the tx's own size fails before any state is read.
    // A simulated tx is charged as if it carried its signature already.
    let size = match mode {
        Mode::Simulate => tx.size - tx.signature.len().min(tx.size) + SIGNATURE_LEN,
        Mode::Execute => tx.size,
    };
    gas.consume(
        params
            .gas_costs
            .tx_size_per_byte
            .saturating_mul(size as u64),
        "txSize",
    )?;
    if let Some(hint) = &tx.hint {
        if hint.chain_id != chain_id {
            return Err(AuthError::WrongChainId.err(format!(
                "tx was signed for chain {:?} but this chain is {chain_id:?}; pass --chain-id {chain_id}",
                hint.chain_id
            )));
        }
    }
    let mut account = state.existing_account(&tx.signer)?;
    if let Some(hint) = &tx.hint {
        if hint.account_number != account.account_number {
            return Err(AuthError::WrongAccountNumber.err(format!(
                "tx was signed with account number {} but {} has account number {}",
                hint.account_number, tx.signer, account.account_number
            )));
        }
    }
    if tx.sequence < account.sequence {
        return Err(AuthError::SequenceReplayed.err(format!(
            "sequence {} was already used by {}; the next sequence is {}",
            tx.sequence, tx.signer, account.sequence
        )));
    }
    if tx.sequence > account.sequence {
        return Err(AuthError::SequenceFuture.err(format!(
            "sequence {} is ahead of {}'s next sequence {}; send the earlier txs first",
            tx.sequence, tx.signer, account.sequence
        )));
    }

    if mode == Mode::Execute {
        let price = params.min_gas_price;
        let required = price.fee_for(tx.gas_limit).ok_or_else(|| {
            AuthError::InsufficientFee.err(format!(
                "gas limit {} at the minimum gas price {price}{NATIVE_DENOM} per gas unit costs more than 2^128 {NATIVE_DENOM}; lower the gas limit",
                tx.gas_limit
            ))
        })?;
        if tx.fee.amount < required {
            return Err(AuthError::InsufficientFee.err(format!(
                "fee {} is below the {required}{NATIVE_DENOM} that gas limit {} costs at the minimum gas price {price}{NATIVE_DENOM} per gas unit (ceil(gas × price)); pay at least {required}{NATIVE_DENOM}, or estimate the gas with --gas auto",
                tx.fee, tx.gas_limit
            )));
        }
    }
    // The payer must hold the fee. A simulation moves even a zero fee, so its reads and
    // writes are charged as the signed tx's will be.
    if tx.fee.amount > 0 || mode == Mode::Simulate {
        transfer(state, &tx.signer, &fee_collector_address(), &tx.fee)?;
    }

    // Only now the expensive part: the signature check (and the key's decompression).
    let key = match (&tx.pub_key, account.pub_key.is_empty()) {
        (Some(bytes), true) => {
            let derived = address_of_compressed_key(bytes);
            if derived != tx.signer {
                return Err(AuthError::InvalidPubKey.err(format!(
                    "public key belongs to {derived}, not to the signer {}",
                    tx.signer
                )));
            }
            Some(bytes.as_slice())
        }
        (Some(bytes), false) => {
            if *bytes != account.pub_key {
                return Err(AuthError::InvalidPubKey.err(format!(
                    "public key in the tx is not the one {} registered",
                    tx.signer
                )));
            }
            Some(bytes.as_slice())
        }
        (None, false) => Some(account.pub_key.as_slice()),
        // A simulation may leave the key out; its signature is not checked anyway.
        (None, true) if mode == Mode::Simulate => None,
        (None, true) => {
            return Err(AuthError::InvalidPubKey.err(format!(
                "{} has no public key on chain yet; its first tx must include one",
                tx.signer
            )))
        }
    };

    gas.consume_signature_verify("signature verification")?;
    if mode == Mode::Execute {
        // The sign doc is rebuilt from the bytes exactly as received, never re-encoded.
        let sign_doc = SignDoc {
            body_bytes: tx.body_bytes.clone(),
            auth_info_bytes: tx.auth_info_bytes.clone(),
            chain_id: chain_id.to_string(),
            account_number: account.account_number,
        }
        .encode_to_vec();
        // Once per node: a tx checked in CheckTx is not checked again here (gas was charged
        // above all the same).
        let verdict = key.map_or(Verdict::BadKey, |key| {
            crate::sig_cache::verify(key, &sign_doc, &tx.signature)
        });
        match verdict {
            Verdict::Valid => {}
            Verdict::BadKey => {
                return Err(AuthError::InvalidPubKey.err(format!(
                    "the public key of {} is not a valid secp256k1 point",
                    tx.signer
                )))
            }
            Verdict::BadSignature => {
                return Err(AuthError::InvalidSignature.err(format!(
                    "signature does not verify; it must cover chain-id {chain_id:?}, account number {} and sequence {}",
                    account.account_number, account.sequence
                )))
            }
        }
    }

    state.emit(
        Event::new("tx")
            .attr("fee", &tx.fee)
            .attr("fee_payer", &tx.signer)
            .attr("acc_seq", format!("{}/{}", tx.signer, tx.sequence)),
    );
    account.sequence += 1;
    // The first tx that carries a key records it (later ones must carry the same, or none).
    if let (true, Some(bytes)) = (account.pub_key.is_empty(), &tx.pub_key) {
        account.pub_key = bytes.clone();
    }
    state.put_account(&account);
    Ok(())
}
