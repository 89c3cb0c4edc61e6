//! Distributed key generation rounds: who takes part with how many slots, the phases, and
//! the outcome (see the crate docs, "Key generation").

use gonka_bls_crypto::threshold::Commitments;
use gonka_proto::bls::{DkgMember, DkgRound};
use gonka_sdk::{BlockContext, ErrorCode, Event, Result, StateRead, StateWrite};
use gonka_stake::StakeRead;

use crate::state::DkgWrite;
use crate::{status, BlsError, BlsRead};

/// Slots needed to sign out of `total`: more than two thirds.
pub fn threshold(total: u64) -> u64 {
    total * 2 / 3 + 1
}

/// `total` slots shared among `powers` (in the given order) in proportion to power: each
/// gets ⌊power·total/Σpower⌋, and the slots left go one each to the largest remainders
/// (ties to the earlier entry). Zero total power gives no slots.
pub fn assign_slots(powers: &[u64], total: u64) -> Vec<u64> {
    let sum: u128 = powers.iter().map(|p| u128::from(*p)).sum();
    if sum == 0 {
        return vec![0; powers.len()];
    }
    let total_wide = u128::from(total);
    let mut slots: Vec<u64> = powers
        .iter()
        .map(|p| (u128::from(*p) * total_wide / sum) as u64)
        .collect();
    let mut order: Vec<usize> = (0..powers.len()).collect();
    // Largest remainder first; the stable sort keeps ties in entry order.
    order.sort_by_key(|&i| std::cmp::Reverse(u128::from(powers[i]) * total_wide % sum));
    let left = total - slots.iter().sum::<u64>();
    for &i in order.iter().take(left as usize) {
        slots[i] += 1;
    }
    slots
}

/// Starts round `id` at `height` (called in the last block of epoch `id - 1`, after stake set
/// the next epoch's powers): its members are the validators of the next epoch (power > 0,
/// not jailed) with a registered BLS key, in address order. A round still running is
/// finalized first if its phases are over, else failed (superseded). No member: no round,
/// and an event says so.
pub fn start_round(state: &mut dyn StateWrite, id: u64, ctx: &BlockContext) -> Result<()> {
    let height = ctx.height;
    if let Some(mut running) = state.latest_dkg_round()? {
        if running.status == status::RUNNING {
            if running.reveal_deadline <= height {
                // Its last phase ended with this block's transactions: settle it first.
                finalize(state, running, ctx)?;
            } else {
                fail(
                    state,
                    &mut running,
                    height,
                    "superseded by the next round before it finished",
                )?;
            }
        }
    }
    let params = state.bls_params()?;
    let mut candidates = Vec::new();
    for p in state.participants()? {
        if p.power <= 0 || p.jailed {
            continue;
        }
        if let Some(key) = state.bls_key(&p.operator)? {
            candidates.push((p.operator, key.pubkey, p.power as u64));
        }
    }
    if candidates.is_empty() {
        state.emit(
            Event::new("dkg_skipped")
                .attr("round", id)
                .attr("reason", "no validator of the next epoch has a BLS key"),
        );
        return Ok(());
    }
    let powers: Vec<u64> = candidates.iter().map(|c| c.2).collect();
    let slots = assign_slots(&powers, params.dkg_slots);
    let mut next_slot = 1;
    let members = candidates
        .into_iter()
        .zip(slots)
        .map(|((address, pubkey, _), slots)| {
            let member = DkgMember {
                address,
                pubkey,
                first_slot: next_slot,
                slots,
                disqualified: false,
                disqualified_for: String::new(),
            };
            next_slot += slots;
            member
        })
        .collect();
    let deal_deadline = height + params.dkg_deal_blocks;
    let complaint_deadline = deal_deadline + params.dkg_complaint_blocks;
    let round = DkgRound {
        id,
        start_height: height,
        deal_deadline,
        complaint_deadline,
        reveal_deadline: complaint_deadline + params.dkg_reveal_blocks,
        total_slots: params.dkg_slots,
        threshold: threshold(params.dkg_slots),
        members,
        status: status::RUNNING.into(),
        ..Default::default()
    };
    state.put_dkg_round(&round)?;
    state.emit(
        Event::new("dkg_started")
            .attr("round", id)
            .attr("members", round.members.len())
            .attr("threshold", round.threshold)
            .attr("deal_deadline", round.deal_deadline)
            .attr("reveal_deadline", round.reveal_deadline),
    );
    Ok(())
}

/// Finalizes the latest round if `height` is past its reveal deadline: a dealer with a
/// complaint it did not answer is disqualified; the qualified dealers are the members that
/// dealt and are not disqualified. The round completes when some dealer qualified and the
/// slots of the members not disqualified reach the threshold (so enough shares exist to
/// sign); the group commitments are the sum of the qualified dealers'. Otherwise it fails
/// and the previous group stays in force.
pub fn finalize_if_due(state: &mut dyn StateWrite, ctx: &BlockContext) -> Result<()> {
    let height = ctx.height;
    match state.latest_dkg_round()? {
        Some(round) if round.status == status::RUNNING && height > round.reveal_deadline => {
            finalize(state, round, ctx)
        }
        _ => Ok(()),
    }
}

/// Finalizes `round`, whose phases are over, at `height` (see [`finalize_if_due`]).
fn finalize(state: &mut dyn StateWrite, mut round: DkgRound, ctx: &BlockContext) -> Result<()> {
    let height = ctx.height;
    let mut dealers = Vec::new();
    for k in 0..round.members.len() {
        let address = round.members[k].address.clone();
        let Some(dealing) = state.dealing(round.id, &address)? else {
            continue;
        };
        if state
            .complaints_about(round.id, &address)?
            .iter()
            .any(|c| c.outcome.is_empty())
        {
            disqualify(
                &mut round.members[k],
                "did not answer a complaint about its shares",
            );
            continue;
        }
        if !round.members[k].disqualified {
            dealers.push((address, dealing));
        }
    }
    let usable: u64 = round
        .members
        .iter()
        .filter(|m| !m.disqualified)
        .map(|m| m.slots)
        .sum();
    if dealers.is_empty() {
        return fail(state, &mut round, height, "no dealer qualified");
    }
    if usable < round.threshold {
        let why = format!(
            "members not disqualified hold {usable} slots, below the threshold {}",
            round.threshold
        );
        return fail(state, &mut round, height, &why);
    }
    let commitments: Option<Vec<Commitments>> = dealers
        .iter()
        .map(|(_, d)| Commitments::from_checked_bytes(&d.commitments))
        .collect();
    let group = commitments
        .as_deref()
        .and_then(Commitments::sum)
        .ok_or_else(|| {
            gonka_sdk::SdkError::Internal.err(format!(
                "round {}: a stored dealing's commitments do not decode",
                round.id
            ))
        })?;
    if group.has_identity_key(round.total_slots) {
        // Colluding dealers whose polynomials cancel: the key would verify nothing (or a
        // slot would sign every message alike), and the beacon would halt the chain.
        return fail(
            state,
            &mut round,
            height,
            "the qualified dealings sum to an identity group key or public share",
        );
    }
    round.group_pubkey = group.public_key().to_bytes().to_vec();
    round.group_commitments = group.to_bytes();
    round.qualified_dealers = dealers.into_iter().map(|(a, _)| a).collect();
    round.status = status::COMPLETED.into();
    round.finalized_height = height;
    let previous = state.group_round()?.map(|g| g.id);
    state.put_dkg_round(&round)?;
    // Members derive their shares from the dealings: keep those of the new group and of the
    // one it replaces (which still signs around the switch and signs this handover).
    state.prune_rounds_below(previous.unwrap_or(round.id))?;
    crate::sign::request_handover(
        state,
        &ctx.chain_id,
        height,
        round.id,
        &round.group_pubkey,
        previous,
    )?;
    state.emit(
        Event::new("dkg_completed")
            .attr("round", round.id)
            .attr("group_pubkey", hex::encode(&round.group_pubkey))
            .attr("qualified_dealers", round.qualified_dealers.len()),
    );
    Ok(())
}

/// Whether `address` forfeits its validation rewards at `height` of epoch `epoch`: it is a
/// member of that epoch's key generation round (round `epoch`, started in the last block of
/// the epoch before) and was disqualified, or the dealing phase is over without its dealing.
/// Taking part in key generation is part of a validator's work: one that skips it still
/// validates (and is still slashed if it lies) but is not paid for it that epoch.
pub fn forfeits_validation_rewards<S: StateRead + ?Sized>(
    state: &S,
    address: &str,
    epoch: u64,
    height: u64,
) -> Result<bool> {
    let Some(round) = state.dkg_round(epoch)? else {
        return Ok(false);
    };
    let Some(member) = round.members.iter().find(|m| m.address == address) else {
        return Ok(false);
    };
    Ok(member.disqualified
        || (height > round.deal_deadline && state.dealing(round.id, address)?.is_none()))
}

/// Marks `member` disqualified for `why` (the first reason stays).
pub fn disqualify(member: &mut DkgMember, why: &str) {
    if !member.disqualified {
        member.disqualified = true;
        member.disqualified_for = why.into();
    }
}

fn fail(state: &mut dyn StateWrite, round: &mut DkgRound, height: u64, why: &str) -> Result<()> {
    round.status = status::FAILED.into();
    round.failure = why.into();
    round.finalized_height = height;
    state.put_dkg_round(round)?;
    tracing::warn!(
        round = round.id,
        why,
        "key generation failed; the previous group stays"
    );
    state.emit(
        Event::new("dkg_failed")
            .attr("round", round.id)
            .attr("reason", why),
    );
    Ok(())
}

/// The running round `id` and `address`'s position among its members, or the error a
/// message of a non-member or for another round gets.
pub fn member_of(state: &dyn StateWrite, id: u64, address: &str) -> Result<(DkgRound, usize)> {
    let round = state
        .dkg_round(id)?
        .ok_or_else(|| BlsError::UnknownRound.err(format!("no key generation round {id}")))?;
    let position = round
        .members
        .iter()
        .position(|m| m.address == address)
        .ok_or_else(|| {
            BlsError::NotDkgMember.err(format!(
                "{address} is not a member of key generation round {id} (its members are the next epoch's validators with a BLS key when it started)"
            ))
        })?;
    Ok((round, position))
}

/// `Ok` if `height` is in the phase that ends at `deadline` and starts after `after` of a
/// running round; the phase's name goes in the error.
pub fn require_phase(
    round: &DkgRound,
    height: u64,
    after: u64,
    deadline: u64,
    phase: &str,
) -> Result<()> {
    if round.status != status::RUNNING || height <= after || height > deadline {
        return Err(BlsError::WrongPhase.err(format!(
            "round {} accepts {phase} in blocks {}..={deadline} while running; this is block {height} and the round is {}",
            round.id,
            after + 1,
            round.status
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_power_and_fill_the_total() {
        assert_eq!(assign_slots(&[1, 1, 1, 1], 12), vec![3, 3, 3, 3]);
        assert_eq!(assign_slots(&[1, 1, 1], 100), vec![34, 33, 33]);
        assert_eq!(assign_slots(&[5, 3, 2], 10), vec![5, 3, 2]);
        assert_eq!(assign_slots(&[1, 2], 4), vec![1, 3]);
        assert_eq!(assign_slots(&[0, 0], 4), vec![0, 0]);
        let big = assign_slots(&[u64::MAX, u64::MAX / 3, 7], 100);
        assert_eq!(big.iter().sum::<u64>(), 100);
        assert_eq!(threshold(100), 67);
        assert_eq!(threshold(12), 9);
        assert_eq!(threshold(3), 3);
    }
}
