//! `MsgSend`: move coins between accounts. Accepted as `/gonka.bank.v1.MsgSend` and as the
//! standard `/cosmos.bank.v1beta1.MsgSend` (identical fields), so stock clients can send.

use cosmrs::proto::cosmos::bank::v1beta1 as cosmos_bank;
use gonka_auth::validate_address;
use gonka_proto::bank as pb;
use gonka_sdk::{type_url, Any, ErrorCode, Msg, Result, SdkError, StateWrite, TxContext};
use prost::Message;

use crate::{parse_coins, transfer, Coin};

/// A validated send.
#[derive(Debug)]
pub struct Send {
    from: String,
    to: String,
    coins: Vec<Coin>,
}

fn decode_as<M: Message + Default + prost::Name>(msg: &Any) -> Result<M> {
    M::decode(msg.value.as_slice()).map_err(|e| {
        SdkError::Decode.err(format!(
            "{} is not a valid {}: {e}",
            msg.type_url,
            M::full_name()
        ))
    })
}

/// Decodes either MsgSend flavour and runs the stateless checks.
pub fn decode(msg: &Any) -> Option<Result<Box<dyn Msg>>> {
    let parsed = if msg.type_url == type_url::<pb::MsgSend>() {
        decode_as::<pb::MsgSend>(msg).and_then(|m| {
            Send::new(
                m.from_address,
                m.to_address,
                m.amount
                    .iter()
                    .map(|c| (c.denom.as_str(), c.amount.as_str())),
            )
        })
    } else if msg.type_url == type_url::<cosmos_bank::MsgSend>() {
        decode_as::<cosmos_bank::MsgSend>(msg).and_then(|m| {
            Send::new(
                m.from_address,
                m.to_address,
                m.amount
                    .iter()
                    .map(|c| (c.denom.as_str(), c.amount.as_str())),
            )
        })
    } else {
        return None;
    };
    Some(parsed.map(|send| Box::new(send) as Box<dyn Msg>))
}

impl Send {
    fn new<'a>(
        from: String,
        to: String,
        coins: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self> {
        validate_address("from_address", &from)?;
        validate_address("to_address", &to)?;
        let coins = parse_coins("amount", coins)?;
        Ok(Self { from, to, coins })
    }
}

impl Msg for Send {
    fn signer(&self) -> &str {
        &self.from
    }

    fn execute(&self, _ctx: &TxContext<'_>, state: &mut dyn StateWrite) -> Result<()> {
        for coin in &self.coins {
            transfer(state, &self.from, &self.to, coin)?;
        }
        Ok(())
    }
}
