//! x/bls: participants' BLS12-381 keys, the base of the threshold group keys, the randomness
//! beacon and the epoch certificates (see `gonka_bls_crypto` for the scheme: min-pk, the
//! IETF `_POP_` ciphersuite).
//!
//! ## Keys (`MsgRegisterBlsKey`)
//! - Any stake participant registers one BLS key: hosts need it to co-sign settlement
//!   batches, and validators to take part in the distributed key generation.
//! - The key comes with a proof of possession: its signature under the `_POP_` DST over
//!   `gonka/bls-pop/v1` (chain id, address, key; [`gonka_proto::signing::bls_pop_bytes`]).
//!   Possession stops rogue-key attacks on aggregated signatures; binding the address stops
//!   anyone from registering a key copied out of another participant's registration first.
//! - A key belongs to one participant (disputes nothing: a second registrant is refused).
//! - **Rotation**: registering again replaces the participant's key and frees the old one.
//!   A distributed key generation uses the keys registered when it starts, so a rotation
//!   takes effect from the next one.
//! - The cheap checks (stateless encoding, participant, uniqueness) run before the pairing
//!   check, which is charged `sig_verify_cost_bls12_381` gas first.
//!
//! ## Key generation ([`dkg`])
//! In the last block of epoch `e` (after stake set the next powers) round `e + 1` starts.
//! - **Members**: the next epoch's validators (power > 0, not jailed) with a registered key,
//!   in address order. No member: no round (`dkg_skipped`).
//! - **Slots**: `dkg_slots` (100), shared in proportion to power (largest remainders).
//!   The threshold is ⌊2·slots/3⌋ + 1: signing takes more than two thirds of the power.
//! - **Dealing** (`MsgDkgDeal`, `dkg_deal_blocks`): each member posts the Feldman commitments
//!   of a random polynomial of degree threshold − 1, an ephemeral G1 point `R`, and one share
//!   per slot encrypted to the slot holder's registered BLS key (`gonka_bls_crypto::dkg`: a
//!   pad from `r·pk`, bound to the chain, round and dealer by
//!   [`gonka_proto::signing::dkg_dealing_context`]).
//! - **Complaints** (`MsgDkgComplain`, `dkg_complaint_blocks`): a member whose decrypted
//!   share does not verify against the dealer's commitments says so.
//! - **Reveals** (`MsgDkgReveal`, `dkg_reveal_blocks`): the dealer answers with `r·pk` of the
//!   complainer and a Chaum–Pedersen proof that it is. The chain decrypts the complainer's
//!   shares itself and checks them: all valid disqualifies the complainer (a receiver cannot
//!   frame an honest dealer), any invalid disqualifies the dealer, and no answer by the
//!   deadline disqualifies the dealer.
//! - **Outcome** (`begin_block` after the reveal deadline):
//!   - the qualified dealers are the members that dealt and are not disqualified;
//!   - the round completes when there is one and the slots of members not disqualified reach
//!     the threshold;
//!   - the group commitments are the sum of the qualified dealers' (the group key is their
//!     constant term), and each member's share of a slot is the sum of the qualified dealers'
//!     shares for it;
//!   - otherwise the round fails (`dkg_failed`) and the previous group stays in force;
//!   - a round still running when the next one starts fails as superseded.
//! - **Sitting out**: a member disqualified, or without a dealing once the dealing phase is
//!   over, forfeits its validation rewards for the rest of the round's epoch
//!   ([`dkg::forfeits_validation_rewards`]; x/disputes applies it). The round completes
//!   without it as long as the others hold the threshold.
//!
//! The shares are encrypted to the members' registered BLS keys. A member keeps nothing but
//! its BLS key: it derives its shares of a group from the chain's dealings
//! (`gonka_bls_crypto::member`, [`shares`]), so a restarted validator signs again at once.
//!
//! ## Beacon ([`beacon`])
//! - **Who signs height `h`**: the group in force when block `h` began
//!   ([`beacon::signing_group`]). A group completed by block `h` signs from `h + 1`; the
//!   group it replaced still signs `h`. CometBFT applies the validator updates of an epoch's
//!   last block `E` from `E + 2`, and the next round completes a few blocks into the epoch
//!   (its phases), so at the heights around a boundary the previous group signs: its members
//!   are the previous epoch's validators, which mostly still are; while more than a third of
//!   its slots belong to validators that left, heights get no group signature.
//! - **Signing**: each validator's vote extension at `h` carries one partial signature per
//!   slot of `gonka/beacon/v1` (chain id, `h`). The proposer of `h + 1` combines them into the
//!   group signature and puts it first in its block ([`beacon::TX_PREFIX`]); the signature is
//!   unique, so the proposer cannot choose among outcomes, and every validator rejects a
//!   block whose beacon does not verify, or that leaves it out while the extensions it
//!   received could make it (the app's `beacon` module has the ABCI side).
//! - **Record**: `begin_block` of `h + 1` records `h`'s [`gonka_proto::bls::Beacon`]:
//!   `SHA-256(signature)`; for a height a group signs but block `h + 1` carried no signature
//!   (its last commit's extensions held fewer slots than the threshold, which a proposer can
//!   arrange by trimming its last commit to just over two thirds of the power), no value
//!   (`unsigned`): [`beacon::seed`] is `None` and every draw that would use it waits for the
//!   next signed height. Until the first group exists (the first key generation ends a few
//!   blocks into epoch 1) the chain is seeded by block hashes, `SHA-256("gonka/beacon-fallback/v1"
//!   ‖ hash of block h + 1)`, which the proposer of the next block can grind; nothing is staked
//!   on that seed before the first validations.
//! - **Seeds**: [`beacon::seed`]`(purpose, h)` = SHA-256(`"gonka/seed/v1"` ‖ purpose ‖ `h` ‖
//!   the beacon value of `h`) is the one source of every choice the chain draws
//!   ([`beacon::purpose`]): which records are validated and by whom, dispute committees.
//!   Honest validators release their partials of `h` only in the precommits of block `h`,
//!   after its transactions were fixed, so nobody submitting to `h` knows its seed; a
//!   coalition holding the threshold (more than two thirds of the slots) could compute it
//!   earlier, as in any threshold beacon.
//! - The state keeps the beacons of the last `beacon_keep_blocks` heights (default 10,000);
//!   every block's first transaction holds its previous height's beacon for good.
//!
//! ## Certificates ([`sign`], [`light`])
//! The vote extensions also sign *signing requests*, one at a time, oldest first (a request
//! unsigned after [`sign::REQUEST_EXPIRY_BLOCKS`] is dropped with an event, so a dead group
//! cannot stall the rest):
//! - **Epoch certificates**: the block after epoch `e`'s last block queues its
//!   [`gonka_proto::bls::EpochSummary`] (chain id, epoch, end height, roots and totals of the
//!   settled work and the rewards paid, the next validator set, the group key in force for the
//!   next epoch), signed by the group that signed the epoch's last block.
//! - **Group handovers**: a completed round queues its group key, signed by the group it
//!   replaces: a chain of trust from genesis.
//! - **Genesis signers**: the genesis validators' BLS keys in `app_state.bls.keys` sign in
//!   place of a group until the first exists (their certificates and the first handover):
//!   an aggregate of more than two thirds of them, counted equally (a light client can read
//!   no power table from genesis.json that the chain does not compute).
//!
//! [`light::verify_epochs`] checks all of it from genesis.json alone (`gonkad verify-epochs`).
//!
//! Queries: `/bls/key`, `/bls/keys`, `/bls/dkg`, `/bls/dealing`, `/bls/complaints`,
//! `/bls/group`, `/bls/beacon`, `/bls/certificate`, `/bls/handover`, `/bls/genesis_signers`,
//! `/bls/params`.
//! Error codes: [`BlsError`].

pub mod beacon;
pub mod dkg;
mod errors;
mod events;
mod genesis;
mod keys;
pub mod light;
mod msgs;
mod params;
mod query;
pub mod shares;
pub mod sign;
mod state;

pub use errors::BlsError;
pub use msgs::outcome;
pub use params::{default_params, validate_params};
pub use state::{BlsRead, BlsWrite, DkgWrite, SignWrite};

use gonka_sdk::{Any, BlockContext, HookOutput, Module, Msg, Result, StateRead, StateWrite};

/// Module name: key namespace, codespace, query prefix and genesis section.
pub const NAME: &str = "bls";

/// Statuses of key generation rounds, as stored and queried.
pub mod status {
    /// Dealing, complaining or answering complaints.
    pub const RUNNING: &str = "running";
    /// A group key exists.
    pub const COMPLETED: &str = "completed";
    /// No group key: the previous group stays in force.
    pub const FAILED: &str = "failed";
}

/// The bls module.
#[derive(Debug, Default, Clone, Copy)]
pub struct Bls;

impl Module for Bls {
    fn decode_msg(&self, msg: &Any) -> Option<Result<Box<dyn Msg>>> {
        msgs::decode(msg)
    }

    /// Records the previous height's beacon and the signing request signature the block
    /// carries (before anything this block changes the group), queues the certificate of an
    /// epoch that just ended, then finalizes the running key generation round once its
    /// reveal deadline has passed.
    fn begin_block(&self, ctx: &BlockContext, state: &mut dyn StateWrite) -> Result<()> {
        let tx = beacon::block_tx(ctx)?;
        beacon::record(ctx, state, &tx.signature)?;
        sign::record(
            ctx,
            state,
            tx.request_id,
            &tx.request_signature,
            &tx.request_signers,
        )?;
        sign::certify_ended_epoch(ctx, state)?;
        dkg::finalize_if_due(state, ctx)
    }

    /// Starts the key generation round of the next epoch's validators (stake, before this
    /// module, has just set their powers).
    fn end_epoch(
        &self,
        ctx: &BlockContext,
        epoch: u64,
        state: &mut dyn StateWrite,
    ) -> Result<HookOutput> {
        dkg::start_round(state, epoch + 1, ctx)?;
        Ok(HookOutput::default())
    }

    fn query(&self, path: &str, data: &[u8], state: &dyn StateRead) -> Option<Result<Vec<u8>>> {
        query::route(path, data, state)
    }
}
