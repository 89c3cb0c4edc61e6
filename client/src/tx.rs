//! Building and signing transactions (SIGN_MODE_DIRECT, one signer).

use anyhow::{anyhow, Result};
use cosmrs::tx::{Body, Fee, SignDoc, SignerInfo};
use cosmrs::{Any, Coin, Denom};
use gonka_proto::auth::SignDocHint;
use gonka_proto::bank::{Coin as ProtoCoin, MsgSend};
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
