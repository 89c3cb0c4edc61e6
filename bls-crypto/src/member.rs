//! A member's shares, from the chain's dealings and the member's BLS secret key: what each
//! dealer dealt to it (the validator sidecar checks them before complaining) and its shares
//! of a completed group key (its node signs with them). Nothing secret is kept beside the
//! BLS key: a restarted validator recomputes its shares from the chain.

use gonka_proto::bls::{Dealing, DkgMember, DkgRound};
use gonka_proto::signing::dkg_dealing_context;

use crate::dkg::decrypt_share;
use crate::threshold::{Commitments, SecretShare};
use crate::{PublicKey, SecretKey};

/// The shares `dealing` deals to `member`, decrypted with `key` and each checked against the
/// dealer's commitments, in slot order; `None` if one does not decrypt to a valid share.
pub fn dealt_to(
    key: &SecretKey,
    chain_id: &str,
    dealing: &Dealing,
    member: &DkgMember,
) -> Option<Vec<SecretShare>> {
    let ephemeral = PublicKey::from_bytes(&dealing.ephemeral)?;
    let commitments = Commitments::from_bytes(&dealing.commitments)?;
    let context = dkg_dealing_context(chain_id, dealing.round, &dealing.dealer);
    (member.first_slot..member.first_slot + member.slots)
        .map(|slot| {
            let ciphertext: [u8; 32] = dealing
                .shares
                .get(usize::try_from(slot).ok()?.checked_sub(1)?)?
                .as_slice()
                .try_into()
                .ok()?;
            decrypt_share(key, &ephemeral, slot, &ciphertext, &context)
                .filter(|s| commitments.verify_share(s))
        })
        .collect()
}

/// The shares of the completed `round`'s group key held by the member whose BLS secret key
/// is `key`: for each of its slots, the sum of what the qualified dealers (`dealings`, in
/// the round's `qualified_dealers` order) dealt to it, checked against the group
/// commitments. The error says what is missing or wrong.
pub fn group_shares(
    key: &SecretKey,
    chain_id: &str,
    round: &DkgRound,
    dealings: &[Dealing],
) -> Result<Vec<SecretShare>, String> {
    let pubkey = key.public_key().to_bytes();
    let member = round
        .members
        .iter()
        .find(|m| m.pubkey == pubkey && !m.disqualified)
        .ok_or_else(|| format!("this BLS key holds no slot in round {}", round.id))?;
    let per_dealer = dealings
        .iter()
        .map(|d| {
            dealt_to(key, chain_id, d, member)
                .ok_or_else(|| format!("the shares {} dealt to this key do not verify", d.dealer))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let group = Commitments::from_bytes(&round.group_commitments)
        .ok_or_else(|| format!("round {} has no group commitments", round.id))?;
    (0..member.slots as usize)
        .map(|k| {
            let mine: Vec<SecretShare> = per_dealer.iter().map(|s| s[k]).collect();
            SecretShare::sum(&mine)
                .filter(|share| group.verify_share(share))
                .ok_or_else(|| format!("round {}: a summed share does not verify", round.id))
        })
        .collect()
}
