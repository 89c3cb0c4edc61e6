//! Building and signing transactions (SIGN_MODE_DIRECT, one signer).

use anyhow::{anyhow, Result};
use cosmrs::tx::{Body, Fee, SignDoc, SignerInfo};
use cosmrs::{Any, Coin, Denom};
use gonka_proto::auth::SignDocHint;
use gonka_proto::bank::{Coin as ProtoCoin, MsgSend};
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

fn any_of<M: Message + Name>(msg: &M) -> Any {
    Any {
        type_url: format!("/{}", M::full_name()),
        value: msg.encode_to_vec(),
    }
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

/// Signs `msgs` into `TxRaw` bytes paying `fee` ngnk. The body carries a
/// `/gonka.auth.v1.SignDocHint` so the chain can name a chain-id or account-number mismatch.
pub fn sign(
    key: &Key,
    msgs: Vec<Any>,
    signer: &SignerData,
    fee: u128,
    memo: &str,
) -> Result<Vec<u8>> {
    let mut body = Body::new(msgs, memo, 0u32);
    body.non_critical_extension_options
        .push(any_of(&SignDocHint {
            chain_id: signer.chain_id.clone(),
            account_number: signer.account_number,
        }));
    let denom: Denom = DENOM.parse().map_err(|e| anyhow!("{e}"))?;
    let fee = Fee::from_amount_and_gas(Coin { denom, amount: fee }, 200_000u64);
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
