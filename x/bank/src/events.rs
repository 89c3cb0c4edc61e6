//! Bank events.

use gonka_sdk::Event;

use crate::Coin;

/// `transfer`: `amount` moved from `sender` to `recipient`.
pub fn transfer(sender: &str, recipient: &str, amount: &Coin) -> Event {
    Event::new("transfer")
        .attr("sender", sender)
        .attr("recipient", recipient)
        .attr("amount", amount)
}

/// `mint`: `amount` created in `recipient`'s balance (genesis or rewards).
pub fn mint(recipient: &str, amount: &Coin) -> Event {
    Event::new("mint")
        .attr("recipient", recipient)
        .attr("amount", amount)
}
