//! Bls events.

use gonka_proto::bls::BlsKey;
use gonka_sdk::Event;

/// `bls_key_registered`: `rotated` when it replaced the participant's earlier key.
pub fn registered(key: &BlsKey, rotated: bool) -> Event {
    Event::new("bls_key_registered")
        .attr("address", &key.address)
        .attr("pubkey", hex::encode(&key.pubkey))
        .attr("rotated", rotated)
}
