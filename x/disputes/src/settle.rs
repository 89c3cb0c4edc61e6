//! Opening, voting on and settling disputes; validation rewards; reputation. Shared by the
//! messages and the block hooks.

use std::collections::BTreeMap;

use gonka_bank::{transfer, BankRead, Coin, NATIVE_DENOM};
use gonka_epochs::EpochsRead;
use gonka_inference::InferenceRead;
use gonka_proto::disputes::{Dispute, Payout, Vote};
use gonka_proto::inference::StoredRecord;
use gonka_sdk::{
    parse_amount, ErrorCode, Event, GasMeter, Result, SdkError, StateRead, StateWrite, TxContext,
};
use gonka_stake::StakeRead;

use crate::compare;
use crate::sampling::{committee, committee_seed};
use crate::state::escrow_address;
use crate::{events, kind, status, DisputesRead, DisputesWrite};
use gonka_sdk::PPM;

/// Payout reasons, as recorded in [`Payout::reason`] and `dispute_payout` events.
pub mod reason {
    /// The requester gets the record's cost back.
    pub const REFUND: &str = "refund";
    /// A user's deposit goes back to them.
    pub const DEPOSIT_RETURN: &str = "deposit_return";
    /// An honest party's equal share of the slashed stake.
    pub const SLASH_SHARE: &str = "slash_share";
    /// Rounding dust of the shares, to the community pool.
    pub const DUST: &str = "dust";
    /// A losing user's deposit, to the executor host.
    pub const DEPOSIT_FORFEIT: &str = "deposit_forfeit";
    /// A re-execution that agreed with the decision, from the validation pool.
    pub const VALIDATION_REWARD: &str = "validation_reward";
}

/// Validators that can be assigned work: participants with power > 0, not jailed, other
/// than `excluded`; `(operator, power)` ascending by operator.
pub fn active_validators(
    state: &(impl StakeRead + ?Sized),
    excluded: &[&str],
) -> Result<Vec<(String, u64)>> {
    Ok(state
        .participants()?
        .into_iter()
        .filter(|p| p.power > 0 && !p.jailed && !excluded.contains(&p.operator.as_str()))
        .map(|p| (p.operator, p.power as u64))
        .collect())
}

/// Who can re-execute a model's records, remembered for one block: the active validators
/// hosting a registered ML node that serves the model. When none does, every active
/// validator is a candidate (it must then run the model to validate it): no model's records
/// go unvalidated for want of a validator serving it.
#[derive(Default)]
pub struct ModelValidators {
    active: Option<Vec<(String, u64)>>,
    serving: BTreeMap<String, Vec<(String, u64)>>,
}

impl ModelValidators {
    /// The candidates to re-execute a record of `model`, other than the `excluded` parties,
    /// with their power.
    pub fn candidates(
        &mut self,
        state: &(impl StakeRead + InferenceRead + ?Sized),
        model: &str,
        excluded: &[&str],
    ) -> Result<Vec<(String, u64)>> {
        if self.active.is_none() {
            self.active = Some(active_validators(state, &[])?);
        }
        let active = self.active.as_deref().unwrap_or_default();
        if !self.serving.contains_key(model) {
            let mut serving = Vec::new();
            // Bounded by the validator set and each validator's nodes.
            for (validator, power) in active {
                let nodes = state.nodes_of_host(validator)?;
                if nodes.iter().any(|n| n.models.iter().any(|m| m == model)) {
                    serving.push((validator.clone(), *power));
                }
            }
            self.serving.insert(model.to_string(), serving);
        }
        let without = |list: &[(String, u64)]| -> Vec<(String, u64)> {
            list.iter()
                .filter(|(v, _)| !excluded.contains(&v.as_str()))
                .cloned()
                .collect()
        };
        let serving = without(&self.serving[model]);
        Ok(if serving.is_empty() {
            without(active)
        } else {
            serving
        })
    }
}

/// The work units a stored record credited its host: its tokens times its model's
/// `work_per_token` (the value its leaf was held to at settlement; a model's never changes).
pub fn record_work(state: &dyn StateRead, stored: &StoredRecord) -> Result<u64> {
    let Some(record) = stored.record.as_ref() else {
        return Ok(0);
    };
    let per_token = state.model(&record.model)?.map_or(0, |m| m.work_per_token);
    Ok(gonka_proto::batch::record_work(record, per_token).unwrap_or(u64::MAX))
}

/// Cost the requester paid the host for a stored record.
pub fn record_cost(stored: &StoredRecord) -> Result<u128> {
    parse_amount("record cost", &stored.cost)
}

/// Pays `to` the validation reward of a record costing `cost`:
/// `⌊cost·validation_reward_ppm/10^6⌋`, capped by what the validation pool holds (so it
/// never fails and never mints), or nothing if `to` sat out this epoch's key generation
/// ([`gonka_bls::dkg::forfeits_validation_rewards`]; the reward stays in the pool). Returns
/// the amount paid.
pub fn pay_validation_reward(
    state: &mut dyn StateWrite,
    height: u64,
    to: &str,
    cost: u128,
) -> Result<u128> {
    let epoch = state.current_epoch()?.number;
    if gonka_bls::dkg::forfeits_validation_rewards(state, to, epoch, height)? {
        state.emit(
            Event::new("validation_reward_forfeited")
                .attr("validator", to)
                .attr("epoch", epoch)
                .attr("reason", "sat out the epoch's key generation"),
        );
        return Ok(0);
    }
    let params = state.disputes_params()?;
    // Floor: a reward never exceeds its share of the cost.
    let due = cost
        .checked_mul(u128::from(params.validation_reward_ppm))
        .map(|v| v / u128::from(PPM))
        .unwrap_or(u128::MAX);
    let pool = gonka_rewards::validation_pool_address();
    let amount = due.min(state.balance(&pool, NATIVE_DENOM)?);
    if amount > 0 {
        transfer(state, &pool, to, &Coin::ngnk(amount))?;
    }
    Ok(amount)
}

/// A validator answered in time: counts it, clears its run of misses and restores a tenth
/// of a miss penalty of reputation (capped at 10^6).
pub fn note_answer(state: &mut dyn StateWrite, validator: &str) -> Result<()> {
    let params = state.disputes_params()?;
    let mut reputation = state.reputation(validator)?;
    reputation.answered += 1;
    reputation.missed_in_row = 0;
    // Floor of a tenth: restoring is slower than losing.
    reputation.score_ppm = (reputation.score_ppm + params.miss_penalty_ppm / 10).min(PPM);
    state.put_reputation(&reputation);
    Ok(())
}

/// A validator missed a deadline: loses `miss_penalty_ppm` of reputation (saturating at 0)
/// and, at `jail_after_misses` misses in a row, is jailed (its run then starts over).
pub fn note_miss(state: &mut dyn StateWrite, validator: &str) -> Result<()> {
    let params = state.disputes_params()?;
    let mut reputation = state.reputation(validator)?;
    reputation.missed += 1;
    reputation.missed_in_row += 1;
    reputation.score_ppm = reputation.score_ppm.saturating_sub(params.miss_penalty_ppm);
    let mut jailed = false;
    if reputation.missed_in_row >= params.jail_after_misses {
        reputation.missed_in_row = 0;
        if state.participant(validator)?.is_some_and(|p| !p.jailed) {
            gonka_stake::jail(state, validator)?;
            jailed = true;
        }
    }
    state.put_reputation(&reputation);
    state.emit(events::deadline_missed(&reputation, jailed));
    Ok(())
}

/// Asks the record's transfer agent to reveal the output of `inference_id` by `deadline`,
/// unless it is revealed already, its assigned validator has not committed yet (revealing
/// now would hand it the answer; its commit asks later) or the reveal is asked already.
pub fn ask_reveal(
    state: &mut dyn StateWrite,
    inference_id: &str,
    transfer_agent: &str,
    deadline: u64,
) -> Result<()> {
    if state.output_reveal(inference_id)?.is_some()
        || state.reveal_due(transfer_agent, inference_id)?.is_some()
        || state
            .validation(inference_id)?
            .is_some_and(|v| v.status == status::PENDING)
    {
        return Ok(());
    }
    state.put_reveal_due(transfer_agent, inference_id, deadline);
    state.emit(events::reveal_requested(
        transfer_agent,
        inference_id,
        deadline,
    ));
    Ok(())
}

/// Opens a dispute of `kind` by validator `accuser` (with its result commitment) on
/// `stored`, unless the record is under dispute already (which then decides alone; this
/// accusation is only noted).
pub fn accuse(
    state: &mut dyn StateWrite,
    ctx: &TxContext<'_>,
    stored: &StoredRecord,
    kind: &str,
    accuser: &str,
    accuser_commitment: Vec<u8>,
) -> Result<()> {
    let id = stored
        .record
        .as_ref()
        .map(|r| r.inference_id.as_str())
        .unwrap_or_default();
    if state.record_dispute(id)?.is_none() {
        open(
            state,
            ctx.block.height,
            stored,
            Opening {
                kind,
                accuser,
                accuser_commitment,
                deposit: 0,
            },
        )?;
    }
    Ok(())
}

/// What opening a dispute needs to know besides the record.
pub struct Opening<'a> {
    /// One of [`kind`].
    pub kind: &'a str,
    /// The mismatching validator or the requester.
    pub accuser: &'a str,
    /// The validator's result commitment (empty for user and payload disputes).
    pub accuser_commitment: Vec<u8>,
    /// User disputes: the deposit, already moved to escrow.
    pub deposit: u128,
}

/// Opens a dispute on `stored` at `height`. Its committee is drawn in the next block, with
/// the beacon of `height` (see [`draw_committee`]), which nobody knew when the transaction
/// that opened it was sent. A `reveal` dispute (the output was never revealed) needs no
/// committee and is resolved at once as withheld.
pub fn open(
    state: &mut dyn StateWrite,
    height: u64,
    stored: &StoredRecord,
    opening: Opening<'_>,
) -> Result<Dispute> {
    let params = state.disputes_params()?;
    let record = stored.record.clone().unwrap_or_default();
    let id = state.next_dispute_id()?;
    let mut dispute = Dispute {
        id,
        inference_id: record.inference_id.clone(),
        kind: opening.kind.into(),
        accuser: opening.accuser.into(),
        executor_host: stored.executor_host.clone(),
        executor_node: record.executor_node.clone(),
        model: record.model.clone(),
        transfer_agent: stored.transfer_agent.clone(),
        claimed_hash: record.output_commitment.clone(),
        accuser_commitment: opening.accuser_commitment,
        committee: Vec::new(),
        votes: Vec::new(),
        opened_height: height,
        deadline_height: height.saturating_add(params.dispute_deadline_blocks),
        deposit: opening.deposit.to_string(),
        status: status::OPEN.into(),
        resolved_height: 0,
        slashed: String::new(),
        slashed_amount: "0".into(),
        payouts: Vec::new(),
    };
    state.insert_dispute(&dispute);
    state.emit(events::opened(&dispute));
    if opening.kind == kind::REVEAL {
        settle(state, height, &mut dispute, status::PAYLOAD_WITHHELD)?;
    } else {
        state.queue_committee_draw(height, id);
    }
    Ok(dispute)
}

/// Draws the committee of dispute `id`, opened at an earlier height, at `height`: by power,
/// from the active validators other than its parties (the executor's host, the record's
/// transfer agent, which holds the answer and a payload dispute accuses, and the accuser),
/// with `height_seed`, the dispute-committee seed of the last height (the height it was
/// opened at, or a later one when that had no group signature: the dispute's deadline
/// then moves by as many blocks). Then asks for the output reveal its votes are judged by;
/// with no eligible member at all it is resolved at once as undecided.
pub fn draw_committee(
    state: &mut dyn StateWrite,
    height: u64,
    height_seed: &[u8; 32],
    id: u64,
) -> Result<()> {
    let Some(mut dispute) = state.dispute(id)? else {
        return Ok(());
    };
    if dispute.status != status::OPEN || !dispute.committee.is_empty() {
        return Ok(());
    }
    let params = state.disputes_params()?;
    let parties = [
        dispute.executor_host.as_str(),
        dispute.transfer_agent.as_str(),
        dispute.accuser.as_str(),
    ];
    let candidates = ModelValidators::default().candidates(state, &dispute.model, &parties)?;
    let seed = committee_seed(height_seed, id, &dispute.inference_id);
    let deadline = (height - 1).saturating_add(params.dispute_deadline_blocks);
    if deadline != dispute.deadline_height {
        state.move_dispute_deadline(&mut dispute, deadline);
    }
    dispute.committee = committee(&seed, candidates, params.committee_size);
    for member in &dispute.committee {
        state.add_dispute_party(member, id);
    }
    state.update_dispute(&dispute, status::OPEN);
    state.emit(events::committee_drawn(&dispute));
    if dispute.committee.is_empty() {
        settle(state, height, &mut dispute, status::UNDECIDED)
    } else {
        ask_reveal(
            state,
            &dispute.inference_id,
            &dispute.transfer_agent,
            dispute.deadline_height,
        )
    }
}

/// Votes so far: upholding the executor, faulting it, and finding no payload to re-execute.
/// Before the output is revealed (`revealed` false) committed results count for neither
/// side.
fn tally(dispute: &Dispute, revealed: bool) -> (usize, usize, usize) {
    let upholding = dispute.votes.iter().filter(|v| v.supports_executor).count();
    let unavailable = dispute
        .votes
        .iter()
        .filter(|v| v.payload_unavailable)
        .count();
    let faulting = if revealed {
        dispute.votes.len() - upholding - unavailable
    } else {
        0
    };
    (upholding, faulting, unavailable)
}

/// What a vote says, for the `dispute_vote` event.
fn vote_side(vote: &Vote, revealed: bool) -> &'static str {
    if vote.payload_unavailable {
        "payload_unavailable"
    } else if !revealed {
        "pending_reveal"
    } else if vote.supports_executor {
        "executor"
    } else {
        "accuser"
    }
}

/// Whether `vote` sides with `outcome`.
fn sides_with(vote: &Vote, outcome: &str) -> bool {
    match outcome {
        status::EXECUTOR_UPHELD => vote.supports_executor,
        status::EXECUTOR_FAULTED => !vote.supports_executor && !vote.payload_unavailable,
        status::PAYLOAD_WITHHELD => vote.payload_unavailable,
        _ => false,
    }
}

/// Flat gas of judging a dispute's votes and settling it when decided, beside the score
/// comparisons ([`decide_price`]). Settling an executor faulted by a committee of 3 (slash,
/// refund, voided work, payouts) measured about 240,000 gas in `app/tests/disputes.rs`;
/// this is twice that.
pub const DECIDE_GAS: u64 = 500_000;

/// What every vote, and the reveal of a disputed record, pays for judging and deciding the
/// dispute, whether or not it is the message that decides it: which of them lands last
/// depends on the block's order, not on the sender, so a flat price keeps the gas a
/// simulation estimates right (a reveal simulated before the deciding vote landed would
/// otherwise run out of gas on recheck and be dropped, and its TA slashed for withholding).
fn decide_price(state: &dyn StateWrite, dispute: &Dispute) -> Result<u64> {
    let record = state
        .record(&dispute.inference_id)?
        .and_then(|s| s.record)
        .unwrap_or_default();
    let compares = u64::try_from(dispute.committee.len()).unwrap_or(u64::MAX);
    Ok(DECIDE_GAS
        .saturating_add(compares.saturating_mul(compare::max_compare_gas(state, &record)?)))
}

/// Records `vote` and settles the dispute as soon as one side has a majority of the whole
/// committee (`⌊n/2⌋ + 1`), at the flat [`decide_price`].
pub fn add_vote(
    state: &mut dyn StateWrite,
    ctx: &TxContext<'_>,
    dispute: &mut Dispute,
    vote: Vote,
) -> Result<()> {
    dispute.votes.push(vote);
    let price = decide_price(state, dispute)?;
    ctx.gas.prepaid(price, "DecideDispute", || {
        let revealed = judge(state, dispute, ctx.gas)?;
        if let Some(vote) = dispute.votes.last() {
            state.emit(events::vote(
                dispute.id,
                &vote.voter,
                vote_side(vote, revealed),
            ));
        }
        decide(state, ctx.block.height, dispute, revealed)
    })
}

/// Judges the votes of an open dispute once the record's output is revealed and settles it
/// if a side has its majority, at the flat [`decide_price`].
pub fn judge_votes(
    state: &mut dyn StateWrite,
    ctx: &TxContext<'_>,
    dispute: &mut Dispute,
) -> Result<()> {
    let price = decide_price(state, dispute)?;
    ctx.gas.prepaid(price, "DecideDispute", || {
        let revealed = judge(state, dispute, ctx.gas)?;
        decide(state, ctx.block.height, dispute, revealed)
    })
}

/// Judges the votes by the record's revealed output, if revealed (returns whether it is): a
/// vote supports the executor when its result agrees with the revealed output
/// ([`compare::agrees`]).
fn judge(state: &dyn StateWrite, dispute: &mut Dispute, gas: &GasMeter) -> Result<bool> {
    let Some(reveal) = state.output_reveal(&dispute.inference_id)? else {
        return Ok(false);
    };
    let record = state
        .record(&dispute.inference_id)?
        .and_then(|s| s.record)
        .unwrap_or_default();
    for vote in &mut dispute.votes {
        vote.supports_executor = !vote.payload_unavailable
            && compare::agrees(
                state,
                &record,
                &reveal,
                compare::Submitted {
                    author: &vote.voter,
                    commitment: &vote.result_commitment,
                    scored: vote.scored.as_ref(),
                },
                gas,
            )?;
    }
    Ok(true)
}

/// Settles the dispute if one side has a majority of the whole committee (`⌊n/2⌋ + 1`),
/// else stores it as it is.
fn decide(
    state: &mut dyn StateWrite,
    height: u64,
    dispute: &mut Dispute,
    revealed: bool,
) -> Result<()> {
    let majority = dispute.committee.len() / 2 + 1;
    let (upholding, faulting, unavailable) = tally(dispute, revealed);
    if upholding >= majority {
        settle(state, height, dispute, status::EXECUTOR_UPHELD)
    } else if faulting >= majority {
        settle(state, height, dispute, status::EXECUTOR_FAULTED)
    } else if unavailable >= majority {
        settle(state, height, dispute, status::PAYLOAD_WITHHELD)
    } else {
        state.update_dispute(dispute, status::OPEN);
        Ok(())
    }
}

/// Settles an open dispute whose deadline has passed: members who did not vote miss a
/// deadline; the majority of the votes cast decides, and a tie (or no vote) is undecided.
/// An output that was asked for and never revealed makes the record unverifiable: the
/// transfer agent withheld it.
pub fn settle_at_deadline(
    state: &mut dyn StateWrite,
    height: u64,
    dispute: &mut Dispute,
) -> Result<()> {
    for member in dispute.committee.clone() {
        if !dispute.votes.iter().any(|v| v.voter == member) {
            note_miss(state, &member)?;
        }
    }
    let revealed = state.output_reveal(&dispute.inference_id)?.is_some();
    let asked = state
        .reveal_due(&dispute.transfer_agent, &dispute.inference_id)?
        .is_some();
    let (upholding, faulting, unavailable) = tally(dispute, revealed);
    let outcome = if (!revealed && asked) || unavailable > upholding.max(faulting) {
        status::PAYLOAD_WITHHELD
    } else {
        match upholding.cmp(&faulting) {
            std::cmp::Ordering::Greater => status::EXECUTOR_UPHELD,
            std::cmp::Ordering::Less => status::EXECUTOR_FAULTED,
            std::cmp::Ordering::Equal => status::UNDECIDED,
        }
    };
    settle(state, height, dispute, outcome)
}

/// Moves `amount` from `from` to `to` (nothing if zero) and records it on the dispute.
fn pay(
    state: &mut dyn StateWrite,
    dispute: &mut Dispute,
    from: &str,
    to: &str,
    amount: u128,
    why: &str,
) -> Result<()> {
    if amount == 0 {
        return Ok(());
    }
    transfer(state, from, to, &Coin::ngnk(amount))?;
    dispute.payouts.push(Payout {
        to: to.into(),
        amount: amount.to_string(),
        reason: why.into(),
    });
    state.emit(events::payout(dispute.id, to, amount, why));
    Ok(())
}

/// Slashes `loser` (if it is a participant) by `slash_fraction_ppm` into escrow.
fn slash_into_escrow(
    state: &mut dyn StateWrite,
    dispute: &mut Dispute,
    loser: &str,
) -> Result<u128> {
    if state.participant(loser)?.is_none() {
        return Ok(0);
    }
    let fraction = state.disputes_params()?.slash_fraction_ppm;
    let taken = gonka_stake::slash(state, loser, fraction, &escrow_address())?;
    dispute.slashed = loser.into();
    dispute.slashed_amount = taken.to_string();
    tracing::info!(dispute = dispute.id, loser, taken, "stake slashed");
    state.emit(events::slashed(dispute.id, loser, fraction, taken));
    Ok(taken)
}

/// Splits `pool` (held in escrow) equally over `honest`, each share rounded down; the dust
/// goes to the community pool.
fn share_out(
    state: &mut dyn StateWrite,
    dispute: &mut Dispute,
    pool: u128,
    honest: &[String],
) -> Result<()> {
    let escrow = escrow_address();
    let community = gonka_rewards::community_pool_address();
    if honest.is_empty() {
        return pay(state, dispute, &escrow, &community, pool, reason::DUST);
    }
    // Floor: the shares never exceed the pool; the remainder is the dust.
    let share = pool / honest.len() as u128;
    for party in honest {
        pay(state, dispute, &escrow, party, share, reason::SLASH_SHARE)?;
    }
    let dust = pool - share * honest.len() as u128;
    pay(state, dispute, &escrow, &community, dust, reason::DUST)
}

/// Settles `dispute` with `outcome` (see the crate docs, "Settlement"), records it and
/// emits `dispute_resolved`.
pub fn settle(
    state: &mut dyn StateWrite,
    height: u64,
    dispute: &mut Dispute,
    outcome: &str,
) -> Result<()> {
    let old_status = dispute.status.clone();
    let stored = state.record(&dispute.inference_id)?.ok_or_else(|| {
        SdkError::Internal.err(format!(
            "dispute {} names record {}, which is no longer stored",
            dispute.id, dispute.inference_id
        ))
    })?;
    let requester = stored
        .record
        .as_ref()
        .map(|r| r.requester.clone())
        .unwrap_or_default();
    let cost = record_cost(&stored)?;
    let deposit = parse_amount("deposit", &dispute.deposit)?;
    let escrow = escrow_address();
    let host = dispute.executor_host.clone();
    let is_user = dispute.kind == kind::USER;
    let is_payload = dispute.kind == kind::PAYLOAD;
    // Members who voted with the decision, in committee order.
    let majority: Vec<String> = dispute
        .committee
        .iter()
        .filter(|m| {
            dispute
                .votes
                .iter()
                .any(|v| &v.voter == *m && sides_with(v, outcome))
        })
        .cloned()
        .collect();
    let mut stats = state.executor_stats(&host)?;
    if outcome == status::EXECUTOR_UPHELD || outcome == status::EXECUTOR_FAULTED {
        // A vote against a decided answer is a vote nobody can stand behind: a member that
        // copied the revealed answer, or committed noise instead of re-executing, loses
        // reputation like a missed deadline (and is jailed after enough of them).
        for vote in dispute.votes.clone() {
            if !sides_with(&vote, outcome) {
                note_miss(state, &vote.voter)?;
            }
        }
    }
    // The reveal is no longer waited for by this dispute (a committed validation of the
    // record still waits for it until its own reveal deadline).
    let waiting = state
        .validation(&dispute.inference_id)?
        .is_some_and(|v| v.status == status::COMMITTED);
    if !waiting {
        state.drop_reveal_due(&dispute.transfer_agent, &dispute.inference_id);
    }

    match outcome {
        status::EXECUTOR_FAULTED => {
            let slashed = slash_into_escrow(state, dispute, &host)?;
            let work = record_work(state, &stored)?;
            gonka_stake::void_work_or_owe(state, &host, stored.epoch, work)?;
            // The refund: from the host's liquid balance first, the rest from the slash.
            let from_host = cost.min(state.balance(&host, NATIVE_DENOM)?);
            pay(state, dispute, &host, &requester, from_host, reason::REFUND)?;
            let from_slash = (cost - from_host).min(slashed);
            pay(
                state,
                dispute,
                &escrow,
                &requester,
                from_slash,
                reason::REFUND,
            )?;
            if is_user {
                pay(
                    state,
                    dispute,
                    &escrow,
                    &requester,
                    deposit,
                    reason::DEPOSIT_RETURN,
                )?;
            }
            // A payload report accused the transfer agent, not the executor's answer.
            let mut honest = if is_payload {
                Vec::new()
            } else {
                vec![dispute.accuser.clone()]
            };
            honest.extend(majority.iter().filter(|m| **m != dispute.accuser).cloned());
            share_out(state, dispute, slashed - from_slash, &honest)?;
            if !is_user && !is_payload {
                let accuser = dispute.accuser.clone();
                let reward = pay_validation_reward(state, height, &accuser, cost)?;
                record_reward(state, dispute, &accuser, reward);
            }
            stats.faults += 1;
            stats.clean_streak = 0;
        }
        status::EXECUTOR_UPHELD => {
            if is_user {
                pay(
                    state,
                    dispute,
                    &escrow,
                    &host,
                    deposit,
                    reason::DEPOSIT_FORFEIT,
                )?;
            } else if is_payload {
                // The body was there after all: a false (or unlucky) report costs the
                // reporter a miss, not its stake.
                let accuser = dispute.accuser.clone();
                note_miss(state, &accuser)?;
            } else {
                let accuser = dispute.accuser.clone();
                let slashed = slash_into_escrow(state, dispute, &accuser)?;
                let mut honest = vec![host.clone()];
                honest.extend(majority.iter().filter(|m| **m != host).cloned());
                share_out(state, dispute, slashed, &honest)?;
                let mut reputation = state.reputation(&accuser)?;
                reputation.false_accusations += 1;
                state.put_reputation(&reputation);
            }
            stats.passed += 1;
            stats.clean_streak += 1;
        }
        status::PAYLOAD_WITHHELD => {
            // The transfer agent withheld the body from the validator and the committee: the
            // work cannot be verified, so it earns no work credit, and the transfer agent
            // pays for it with its stake, which first refunds the requester.
            let ta = dispute.transfer_agent.clone();
            let slashed = slash_into_escrow(state, dispute, &ta)?;
            let work = record_work(state, &stored)?;
            gonka_stake::void_work_or_owe(state, &host, stored.epoch, work)?;
            let refund = cost.min(slashed);
            pay(state, dispute, &escrow, &requester, refund, reason::REFUND)?;
            if is_user {
                pay(
                    state,
                    dispute,
                    &escrow,
                    &requester,
                    deposit,
                    reason::DEPOSIT_RETURN,
                )?;
            }
            let mut honest = vec![dispute.accuser.clone()];
            honest.extend(majority.iter().filter(|m| **m != dispute.accuser).cloned());
            share_out(state, dispute, slashed - refund, &honest)?;
        }
        _ => {
            if is_user {
                // Undecided is not free: half the deposit pays the executor's host for
                // standing trial, the rest goes back.
                let kept = deposit / 2;
                pay(
                    state,
                    dispute,
                    &escrow,
                    &host,
                    kept,
                    reason::DEPOSIT_FORFEIT,
                )?;
                pay(
                    state,
                    dispute,
                    &escrow,
                    &requester,
                    deposit - kept,
                    reason::DEPOSIT_RETURN,
                )?;
            }
        }
    }
    if outcome != status::UNDECIDED {
        for member in &majority {
            let reward = pay_validation_reward(state, height, member, cost)?;
            record_reward(state, dispute, member, reward);
        }
    }
    state.put_executor_stats(&stats);
    dispute.status = outcome.into();
    dispute.resolved_height = height;
    state.update_dispute(dispute, &old_status);
    tracing::info!(dispute = dispute.id, outcome = %dispute.status, "dispute resolved");
    state.emit(events::resolved(dispute));
    Ok(())
}

/// Records a validation reward already paid from the pool.
fn record_reward(state: &mut dyn StateWrite, dispute: &mut Dispute, to: &str, amount: u128) {
    if amount == 0 {
        return;
    }
    dispute.payouts.push(Payout {
        to: to.into(),
        amount: amount.to_string(),
        reason: reason::VALIDATION_REWARD.into(),
    });
    state.emit(events::payout(
        dispute.id,
        to,
        amount,
        reason::VALIDATION_REWARD,
    ));
}
