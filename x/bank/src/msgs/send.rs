//! `MsgSend`: move coins between accounts. Accepted as `/gonka.bank.v1.MsgSend` and as the
//! standard `/cosmos.bank.v1beta1.MsgSend` (identical fields), so stock clients can send.

use cosmrs::proto::cosmos::bank::v1beta1 as cosmos_bank;
use gonka_auth::validate_address;
use gonka_proto::bank as pb;
use gonka_sdk::{decode_as, Any, Msg, Result, StateWrite, TxContext};

use crate::{parse_coins, transfer, Coin};

/// A validated send.
#[derive(Debug)]
pub struct Send {
    from: String,
    to: String,
    coins: Vec<Coin>,
}

/// Decodes either MsgSend flavour and runs the stateless checks.
pub fn decode(msg: &Any) -> Option<Result<Box<dyn Msg>>> {
    let parsed = decode_as::<pb::MsgSend>(msg)
        .map(|r| r.map(|m| (m.from_address, m.to_address, m.amount)))
        .or_else(|| {
            decode_as::<cosmos_bank::MsgSend>(msg).map(|r| {
                r.map(|m| {
                    let coins = m.amount.into_iter().map(|c| pb::Coin {
                        denom: c.denom,
                        amount: c.amount,
                    });
                    (m.from_address, m.to_address, coins.collect())
                })
            })
        })?;
    Some(parsed.and_then(|(from, to, amount)| {
        let coins = amount.iter().map(|c| (c.denom.as_str(), c.amount.as_str()));
        Ok(Box::new(Send::new(from, to, coins)?) as Box<dyn Msg>)
    }))
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
