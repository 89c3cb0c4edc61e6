//! The bls key schema: the only place bls storage keys are formed.

/// Prefix of the participants' keys.
pub fn bls_keys() -> Vec<u8> {
    b"bls/key/".to_vec()
}

/// The BLS key of participant `address`.
pub fn bls_key(address: &str) -> Vec<u8> {
    let mut key = bls_keys();
    key.extend_from_slice(address.as_bytes());
    key
}

/// Index entry: public key `pubkey` (hex) is registered by the address stored as value.
pub fn pubkey_owner(pubkey: &[u8]) -> Vec<u8> {
    format!("bls/pubkey/{}", hex::encode(pubkey)).into_bytes()
}

/// The parameters.
pub fn params() -> Vec<u8> {
    b"bls/params".to_vec()
}

/// Key generation round `id`.
pub fn dkg_round(id: u64) -> Vec<u8> {
    format!("bls/dkg/{id:020}").into_bytes()
}

/// The id of the latest round (running or finished).
pub fn latest_round() -> Vec<u8> {
    b"bls/latest_round".to_vec()
}

/// The id of the latest completed round: the group in force.
pub fn group_round() -> Vec<u8> {
    b"bls/group_round".to_vec()
}

/// The id of the completed round the group in force replaced (it still signs the height
/// whose block completed its successor).
pub fn previous_group_round() -> Vec<u8> {
    b"bls/previous_group_round".to_vec()
}

/// The beacon of height `height`.
pub fn beacon(height: u64) -> Vec<u8> {
    format!("bls/beacon/{height:020}").into_bytes()
}

/// The latest height with a recorded beacon.
pub fn latest_beacon() -> Vec<u8> {
    b"bls/latest_beacon".to_vec()
}

/// Signing request `id`.
pub fn sign_request(id: u64) -> Vec<u8> {
    format!("bls/request/{id:020}").into_bytes()
}

/// The id the next signing request gets.
pub fn next_sign_request() -> Vec<u8> {
    b"bls/next_request".to_vec()
}

/// The id of the oldest signing request not yet signed (or expired).
pub fn first_unsigned_request() -> Vec<u8> {
    b"bls/first_unsigned_request".to_vec()
}

/// The id of epoch `epoch`'s certificate request.
pub fn certificate(epoch: u64) -> Vec<u8> {
    format!("bls/certificate/{epoch:020}").into_bytes()
}

/// The id of round `round`'s handover request.
pub fn handover(round: u64) -> Vec<u8> {
    format!("bls/handover/{round:020}").into_bytes()
}

/// Prefix of the genesis signers.
pub fn genesis_signers() -> Vec<u8> {
    b"bls/genesis_signer/".to_vec()
}

/// Genesis signer `address`'s key.
pub fn genesis_signer(address: &str) -> Vec<u8> {
    let mut key = genesis_signers();
    key.extend_from_slice(address.as_bytes());
    key
}

/// `dealer`'s dealing in round `round`.
pub fn dealing(round: u64, dealer: &str) -> Vec<u8> {
    let mut key = dealings_of(round);
    key.extend_from_slice(dealer.as_bytes());
    key
}

/// Prefix of round `round`'s dealings.
pub fn dealings_of(round: u64) -> Vec<u8> {
    format!("bls/dealing/{round:020}/").into_bytes()
}

/// Prefix of round `round`'s complaints.
pub fn complaints_of(round: u64) -> Vec<u8> {
    format!("bls/complaint/{round:020}/").into_bytes()
}

/// The first round whose dealings and complaints are still kept.
pub fn kept_rounds_from() -> Vec<u8> {
    b"bls/kept_rounds_from".to_vec()
}

/// `complainer`'s complaint about `dealer` in round `round`.
pub fn complaint(round: u64, dealer: &str, complainer: &str) -> Vec<u8> {
    let mut key = complaints_about(round, dealer);
    key.extend_from_slice(complainer.as_bytes());
    key
}

/// Prefix of the complaints about `dealer` in round `round`.
pub fn complaints_about(round: u64, dealer: &str) -> Vec<u8> {
    let mut key = complaints_of(round);
    key.extend_from_slice(format!("{dealer}/").as_bytes());
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_fixed_and_grouped() {
        assert_eq!(bls_key("gonka1a"), b"bls/key/gonka1a");
        assert!(bls_key("gonka1a").starts_with(&bls_keys()));
        assert_eq!(pubkey_owner(&[0xAB, 0x01]), b"bls/pubkey/ab01");
        assert_eq!(params(), b"bls/params");
        assert_eq!(dkg_round(7), b"bls/dkg/00000000000000000007");
        assert_eq!(
            dealing(7, "gonka1d"),
            b"bls/dealing/00000000000000000007/gonka1d"
        );
        assert!(complaint(7, "gonka1d", "gonka1c").starts_with(&complaints_about(7, "gonka1d")));
        assert!(dealing(7, "gonka1d").starts_with(&dealings_of(7)));
        assert!(complaints_about(7, "gonka1d").starts_with(&complaints_of(7)));
        assert!(!dealing(17, "gonka1d").starts_with(&dealings_of(1)));
        assert_eq!(sign_request(3), b"bls/request/00000000000000000003");
        assert_eq!(certificate(2), b"bls/certificate/00000000000000000002");
        assert!(genesis_signer("gonka1a").starts_with(&genesis_signers()));
        assert_eq!(beacon(5), b"bls/beacon/00000000000000000005");
        assert!(dkg_round(9) < dkg_round(10), "rounds sort by id");
    }
}
