//! The ante step: decode a `TxRaw`, then authenticate it and charge its fee.
//!
//! [`decode`] is stateless apart from reading parameters: a tx it rejects changes nothing.
//! [`authenticate`] runs against state: signer account, sign-doc hint, public key,
//! sequence, signature, fee. A tx it rejects changes nothing either; one it accepts has
//! paid its fee and used its sequence even if a message later fails.

use cosmrs::proto::cosmos::crypto::secp256k1::PubKey as CosmosPubKey;
use cosmrs::proto::cosmos::tx::signing::v1beta1::SignMode;
use cosmrs::proto::cosmos::tx::v1beta1::{mode_info, AuthInfo, SignDoc, TxBody, TxRaw};
use gonka_auth::{address_of_key, validate_address, AuthError, AuthParams, AuthRead, AuthWrite};
use gonka_bank::{fee_collector_address, parse_coins, transfer, Coin, NATIVE_DENOM};
use gonka_proto::auth::SignDocHint;
use gonka_sdk::{type_url, Error, ErrorCode, Event, Module, Msg, Result, StateWrite};
use k256::ecdsa::signature::Verifier;
use k256::ecdsa::{Signature, VerifyingKey};
use prost::Message;

/// A structurally valid transaction whose messages passed their stateless checks.
pub struct DecodedTx {
    /// The single signer every message names.
    pub signer: String,
    /// Messages with their type URLs, in order.
    pub msgs: Vec<(String, Box<dyn Msg>)>,
    /// Gas limit the client asked for (reported back; no gas metering, fees are flat).
    pub gas_limit: u64,
    body_bytes: Vec<u8>,
    auth_info_bytes: Vec<u8>,
    signature: Vec<u8>,
    pub_key: Option<VerifyingKey>,
    sequence: u64,
    fee: Coin,
    hint: Option<SignDocHint>,
}

fn decode_err(what: &str, e: impl std::fmt::Display) -> Error {
    AuthError::TxDecode.err(format!("{what} is not valid protobuf: {e}"))
}

fn shape_err(log: String) -> Error {
    AuthError::InvalidTxShape.err(log)
}

/// Decodes `bytes` and runs every stateless check.
pub fn decode(modules: &[Box<dyn Module>], params: &AuthParams, bytes: &[u8]) -> Result<DecodedTx> {
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
    let direct = matches!(
        signer_info.mode_info.as_ref().and_then(|m| m.sum.as_ref()),
        Some(mode_info::Sum::Single(single)) if single.mode == SignMode::Direct as i32
    );
    if !direct {
        return Err(shape_err(
            "only SIGN_MODE_DIRECT single signatures are supported".into(),
        ));
    }
    let pub_key = signer_info
        .public_key
        .as_ref()
        .map(decode_pub_key)
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
        body_bytes: raw.body_bytes,
        auth_info_bytes: raw.auth_info_bytes,
        signature: signature.clone(),
        pub_key,
        sequence: signer_info.sequence,
        fee,
        hint,
    })
}

fn decode_pub_key(any: &gonka_sdk::Any) -> Result<VerifyingKey> {
    if any.type_url != type_url::<CosmosPubKey>() {
        return Err(AuthError::InvalidPubKey.err(format!(
            "public key type {} is not supported, expected {}",
            any.type_url,
            type_url::<CosmosPubKey>()
        )));
    }
    let key =
        CosmosPubKey::decode(any.value.as_slice()).map_err(|e| decode_err("public key", e))?;
    VerifyingKey::from_sec1_bytes(&key.key).map_err(|_| {
        AuthError::InvalidPubKey.err(format!(
            "public key of {} bytes is not a valid secp256k1 point",
            key.key.len()
        ))
    })
}

/// Authenticates `tx` against state, charges its fee to the fee collector and increments
/// the signer's sequence. On error nothing has been written that the caller keeps: run it
/// in a fork.
pub fn authenticate(tx: &DecodedTx, chain_id: &str, state: &mut dyn StateWrite) -> Result<()> {
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

    let key = match (&tx.pub_key, account.pub_key.is_empty()) {
        (Some(key), true) => {
            let derived = address_of_key(key);
            if derived != tx.signer {
                return Err(AuthError::InvalidPubKey.err(format!(
                    "public key belongs to {derived}, not to the signer {}",
                    tx.signer
                )));
            }
            *key
        }
        (Some(key), false) => {
            if key.to_encoded_point(true).as_bytes() != account.pub_key.as_slice() {
                return Err(AuthError::InvalidPubKey.err(format!(
                    "public key in the tx is not the one {} registered",
                    tx.signer
                )));
            }
            *key
        }
        (None, false) => VerifyingKey::from_sec1_bytes(&account.pub_key).map_err(|_| {
            AuthError::InvalidPubKey.err(format!("stored public key of {} is invalid", tx.signer))
        })?,
        (None, true) => {
            return Err(AuthError::InvalidPubKey.err(format!(
                "{} has no public key on chain yet; its first tx must include one",
                tx.signer
            )))
        }
    };

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

    // The sign doc is rebuilt from the bytes exactly as received, never re-encoded.
    let sign_doc = SignDoc {
        body_bytes: tx.body_bytes.clone(),
        auth_info_bytes: tx.auth_info_bytes.clone(),
        chain_id: chain_id.to_string(),
        account_number: account.account_number,
    }
    .encode_to_vec();
    let verified = Signature::from_slice(&tx.signature)
        .is_ok_and(|signature| key.verify(&sign_doc, &signature).is_ok());
    if !verified {
        return Err(AuthError::InvalidSignature.err(format!(
            "signature does not verify; it must cover chain-id {chain_id:?}, account number {} and sequence {}",
            account.account_number, account.sequence
        )));
    }

    let min_fee = state.auth_params()?.min_fee;
    if tx.fee.amount < min_fee {
        return Err(AuthError::InsufficientFee.err(format!(
            "fee {} is below the minimum {min_fee}{NATIVE_DENOM}",
            tx.fee
        )));
    }
    if tx.fee.amount > 0 {
        transfer(state, &tx.signer, &fee_collector_address(), &tx.fee)?;
    }
    state.emit(
        Event::new("tx")
            .attr("fee", &tx.fee)
            .attr("fee_payer", &tx.signer)
            .attr("acc_seq", format!("{}/{}", tx.signer, tx.sequence)),
    );

    account.sequence += 1;
    account.pub_key = key.to_encoded_point(true).as_bytes().to_vec();
    state.put_account(&account);
    Ok(())
}
