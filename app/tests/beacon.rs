//! The randomness beacon through the app's ABCI 2.0 calls, in process: four validators with
//! vote extensions on run a key generation; then each refusal of `VerifyVoteExtension` and
//! `ProcessProposal` is tried, the proposer's beacon is checked against the group key, and
//! the committed beacon (or, below the threshold, a height without one) is what x/bls records.

mod common;
mod support;

use gonka_app::beacon::VOTE_EXTENSIONS_KEY;
use gonka_bls::shares::group_shares_in_state;
use gonka_bls::BlsRead;
use gonka_bls_crypto::dkg::Ephemeral;
use gonka_bls_crypto::threshold::{sign_all, Polynomial, SecretShare};
use gonka_bls_crypto::{PublicKey, SecretKey, Signature};
use gonka_client::bls::msg_dkg_deal;
use gonka_proto::bls::{self as pb, BeaconTx, ExtendedVote, VoteExtension};
use gonka_proto::query::bls as q;
use gonka_proto::query::Query;
use gonka_proto::signing::beacon_message;
use gonka_sdk::StateReadExt;
use prost::Message;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use support::*;
use tendermint_abci::Application;
use tendermint_proto::v0_38::abci::{
    response_process_proposal::ProposalStatus, response_verify_vote_extension::VerifyStatus,
    CommitInfo, ExtendedCommitInfo, RequestProcessProposal, RequestVerifyVoteExtension, VoteInfo,
};

const VALIDATORS: usize = 4;

fn bls_key(i: usize) -> SecretKey {
    SecretKey::from_seed(&[i as u8 + 1; 32])
}

/// A group in force, the world it lives in and each validator's shares of it.
struct Grouped {
    w: World,
    round: pb::DkgRound,
    shares: Vec<Vec<SecretShare>>,
}

/// Four equal validators with vote extensions on from height 1 register BLS keys and deal
/// in the first round (12 slots, threshold 9); returns once its group is in force and a
/// block has passed since (so the group signs the last committed height).
fn grouped() -> Grouped {
    let mut setup = Setup::new(VALIDATORS, 1_000_000);
    setup.epoch_length = 5;
    setup.vote_extensions_from = 1;
    let mut w = World::with_genesis(setup, |state| {
        state["bls"] = serde_json::json!({"params": {"dkg_slots": 12, "dkg_deal_blocks": 2,
            "dkg_complaint_blocks": 1, "dkg_reveal_blocks": 1, "beacon_keep_blocks": 1000}});
    });
    let Group { round, shares } = w.form_group(VALIDATORS);
    assert_eq!((round.total_slots, round.threshold), (12, 9));
    Grouped { w, round, shares }
}

impl Grouped {
    /// Validator `i`'s vote extension: its partials of the beacon message of `height`.
    fn extension(&self, i: usize, height: u64) -> Vec<u8> {
        beacon_extension(self.round.id, &self.shares[i], height)
    }

    fn verify(&self, i_address: &[u8], height: u64, extension: Vec<u8>) -> VerifyStatus {
        let response = Application::verify_vote_extension(
            self.w.chain.app(),
            RequestVerifyVoteExtension {
                validator_address: i_address.to_vec().into(),
                height: height as i64,
                vote_extension: extension.into(),
                ..Default::default()
            },
        );
        VerifyStatus::try_from(response.status).unwrap()
    }

    fn commit(&self, extensions: &[Vec<u8>]) -> ExtendedCommitInfo {
        extended_commit(&self.w, extensions)
    }

    fn prepare(&self, commit: &ExtendedCommitInfo) -> Vec<Vec<u8>> {
        prepare_with(&self.w, commit, Vec::new())
    }

    fn process(&self, txs: &[Vec<u8>], commit: &ExtendedCommitInfo) -> ProposalStatus {
        process(&self.w, txs, commit)
    }

    fn beacon(&self, height: u64) -> pb::Beacon {
        self.w
            .query::<q::Beacon>(pb::QueryBeaconRequest { height })
            .beacon
            .unwrap()
    }
}

/// `ProcessProposal` of the next block: `txs` with `commit` as its last commit.
fn process(w: &World, txs: &[Vec<u8>], commit: &ExtendedCommitInfo) -> ProposalStatus {
    let proposed = CommitInfo {
        round: commit.round,
        votes: commit
            .votes
            .iter()
            .map(|v| VoteInfo {
                validator: v.validator.clone(),
                block_id_flag: v.block_id_flag,
            })
            .collect(),
    };
    let response = Application::process_proposal(
        w.chain.app(),
        RequestProcessProposal {
            txs: txs.iter().map(|t| t.clone().into()).collect(),
            proposed_last_commit: Some(proposed),
            height: w.chain.height() as i64 + 1,
            ..Default::default()
        },
    );
    ProposalStatus::try_from(response.status).unwrap()
}

fn beacon_tx(tx: &BeaconTx) -> Vec<u8> {
    gonka_bls::beacon::encode_tx(tx)
}

fn decode_beacon(bytes: &[u8]) -> BeaconTx {
    gonka_bls::beacon::decode_tx(bytes).unwrap().unwrap()
}

#[test]
fn vote_extensions_carry_valid_partials_of_their_own_slots_only() {
    let g = grouped();
    let from: Option<u64> =
        g.w.chain
            .app()
            .store()
            .get_proto(VOTE_EXTENSIONS_KEY)
            .unwrap();
    assert_eq!(
        from,
        Some(1),
        "InitChain keeps the consensus parameters' first height"
    );
    let voting = g.w.chain.height() + 1;
    let valid = g.extension(0, voting);
    assert_eq!(
        g.verify(&consensus_address(0), voting, valid.clone()),
        VerifyStatus::Accept
    );
    assert_eq!(
        g.verify(&consensus_address(0), voting, Vec::new()),
        VerifyStatus::Accept,
        "an empty extension contributes nothing and stalls nothing"
    );
    let mut wrong_round = VoteExtension::decode(valid.as_slice()).unwrap();
    wrong_round.round += 1;
    let mut bad_point = VoteExtension::decode(valid.as_slice()).unwrap();
    bad_point.partials[0].signature = vec![0xAB; 96];
    let cases: Vec<(&str, Vec<u8>, Vec<u8>)> = vec![
        (
            "the next height's message",
            consensus_address(0),
            g.extension(0, voting + 1),
        ),
        (
            "another validator's slots",
            consensus_address(1),
            valid.clone(),
        ),
        ("not a validator", vec![7; 20], valid.clone()),
        (
            "another round",
            consensus_address(0),
            wrong_round.encode_to_vec(),
        ),
        (
            "no partials",
            consensus_address(0),
            VoteExtension {
                round: g.round.id,
                ..Default::default()
            }
            .encode_to_vec(),
        ),
        (
            "not a point",
            consensus_address(0),
            bad_point.encode_to_vec(),
        ),
        ("not protobuf", consensus_address(0), vec![0xff, 0xff, 0xff]),
    ];
    for (case, who, extension) in cases {
        assert_eq!(
            g.verify(&who, voting, extension),
            VerifyStatus::Reject,
            "{case}"
        );
    }
}

#[test]
fn the_proposer_combines_the_beacon_and_every_validator_checks_it() {
    let mut g = grouped();
    let signed = g.w.chain.height();
    let key = PublicKey::from_bytes(&g.round.group_pubkey).unwrap();
    // Three of four extensions hold 9 of 12 slots: the threshold.
    let mut extensions: Vec<Vec<u8>> = (0..3).map(|i| g.extension(i, signed)).collect();
    extensions.push(Vec::new());
    let commit = g.commit(&extensions);
    let txs = g.prepare(&commit);
    let beacon = decode_beacon(&txs[0]);
    assert_eq!((beacon.height, beacon.round), (signed, g.round.id));
    assert!(beacon.votes.is_empty());
    let signature = Signature::from_bytes(&beacon.signature).unwrap();
    assert!(key.verify(&beacon_message(CHAIN_ID, signed), &signature));
    assert_eq!(g.process(&txs, &commit), ProposalStatus::Accept);

    // Proposals every validator rejects.
    let mut forged = beacon.clone();
    forged.signature = Signature::from_bytes(
        &VoteExtension::decode(extensions[0].as_slice())
            .unwrap()
            .partials[0]
            .signature,
    )
    .unwrap()
    .to_bytes()
    .to_vec();
    let mut other_height = beacon.clone();
    other_height.height -= 1;
    let withheld = BeaconTx {
        signature: Vec::new(),
        votes: commit
            .votes
            .iter()
            .map(|v| ExtendedVote {
                validator_address: v.validator.as_ref().unwrap().address.to_vec(),
                extension: v.vote_extension.to_vec(),
                extension_signature: v.extension_signature.to_vec(),
            })
            .collect(),
        ..beacon.clone()
    };
    let mut dropped = withheld.clone();
    dropped.votes[2].extension = Vec::new();
    let mut missing_vote = withheld.clone();
    missing_vote.votes.pop();
    let cases: Vec<(&str, Vec<Vec<u8>>)> = vec![
        ("no beacon", vec![]),
        (
            "a signature that is not the group's",
            vec![beacon_tx(&forged)],
        ),
        ("another height", vec![beacon_tx(&other_height)]),
        ("a second beacon", vec![txs[0].clone(), txs[0].clone()]),
        (
            "withheld though the threshold was reached",
            vec![beacon_tx(&withheld)],
        ),
        (
            "an extension swapped for an empty one",
            vec![beacon_tx(&dropped)],
        ),
        ("a precommit left out", vec![beacon_tx(&missing_vote)]),
        (
            "garbled",
            vec![[gonka_bls::beacon::TX_PREFIX, &[0xff][..]].concat()],
        ),
    ];
    for (case, proposal) in cases {
        assert_eq!(
            g.process(&proposal, &commit),
            ProposalStatus::Reject,
            "{case}"
        );
    }
    // Nobody slips a beacon through the mempool.
    assert_ne!(g.w.chain.check_tx(txs[0].clone()).code, 0);

    // Committed, the beacon is the height's randomness.
    let block = g.w.block(txs);
    assert_eq!(block.result(0).code, 0);
    let recorded = g.beacon(signed);
    assert_eq!(
        (recorded.source.as_str(), recorded.round),
        ("group", g.round.id)
    );
    assert_eq!(recorded.signature, beacon.signature);
    assert_eq!(recorded.value, Sha256::digest(&beacon.signature).to_vec());
}

#[test]
fn below_the_threshold_the_proposer_shows_every_extension_and_the_height_has_no_seed() {
    let mut g = grouped();
    let signed = g.w.chain.height();
    // Two valid extensions (6 slots) and one that does not verify: below the threshold.
    let extensions = vec![
        g.extension(0, signed),
        g.extension(1, signed),
        g.extension(2, signed + 1),
        Vec::new(),
    ];
    let commit = g.commit(&extensions);
    let txs = g.prepare(&commit);
    let beacon = decode_beacon(&txs[0]);
    assert!(beacon.signature.is_empty());
    assert_eq!(beacon.votes.len(), VALIDATORS);
    assert_eq!(g.process(&txs, &commit), ProposalStatus::Accept);
    g.w.block(txs);
    let recorded = g.beacon(signed);
    assert_eq!(recorded.source, "unsigned");
    assert!(recorded.signature.is_empty() && recorded.value.is_empty());
    let store = g.w.chain.app().store();
    for purpose in [b"validation-sampling".as_slice(), b"dispute-committee"] {
        assert_eq!(
            gonka_bls::beacon::seed(store, purpose, signed).unwrap(),
            None
        );
    }
}

/// A network of the four validators driven block by block through the ABCI 2.0 calls: every
/// block is proposed from the last height's extensions, checked, and committed; each
/// validator's extension is what its node makes (the beacon partials of the group that signs
/// the height, and its part of the pending signing request).
struct Network {
    w: World,
    /// The genesis `app_state` the chain started from (what a light client reads).
    app_state: serde_json::Value,
    last_extensions: Vec<Vec<u8>>,
}

impl Network {
    /// Genesis gives p0..p3 their BLS keys (so they are the genesis signers).
    fn start() -> Network {
        let mut setup = Setup::new(VALIDATORS, 1_000_000);
        setup.epoch_length = 5;
        setup.vote_extensions_from = 1;
        let keys: Vec<serde_json::Value> = (0..VALIDATORS)
            .map(|i| {
                serde_json::json!({"address": addr(&format!("p{i}")),
                    "pubkey": bls_key(i).public_key().to_bytes().to_vec(),
                    "registered_height": 0})
            })
            .collect();
        let bls = serde_json::json!({"keys": keys, "params": {"dkg_slots": 12,
            "dkg_deal_blocks": 2, "dkg_complaint_blocks": 1, "dkg_reveal_blocks": 1,
            "beacon_keep_blocks": 1000}});
        let mut app_state = setup.app_state();
        app_state["bls"] = bls.clone();
        let w = World::with_genesis(setup, |state| state["bls"] = bls);
        Network {
            w,
            app_state,
            last_extensions: vec![Vec::new(); VALIDATORS],
        }
    }

    /// Validator `i`'s vote extension at `height`, made from the committed state (what its
    /// node's `ExtendVote` sees).
    fn extension(&self, i: usize, height: u64) -> Vec<u8> {
        let store = self.w.chain.app().store();
        let shares_of =
            |group: &pb::DkgRound| group_shares_in_state(store, &bls_key(i), CHAIN_ID, group).ok();
        let mut ext = VoteExtension::default();
        if let Some(group) = gonka_bls::beacon::signing_group(store, height).unwrap() {
            if let Some(shares) = shares_of(&group) {
                let partials =
                    VoteExtension::decode(beacon_extension(group.id, &shares, height).as_slice())
                        .unwrap();
                ext.round = group.id;
                ext.partials = partials.partials;
            }
        }
        if let Some(request) = gonka_bls::sign::pending(store, height).unwrap() {
            ext.request_id = request.id;
            if request.signer_round > 0 {
                let group = store.dkg_round(request.signer_round).unwrap().unwrap();
                ext.request_partials = sign_all(&shares_of(&group).unwrap(), &request.digest)
                    .into_iter()
                    .map(|p| pb::PartialSignature {
                        slot: p.index,
                        signature: p.signature.to_bytes().to_vec(),
                    })
                    .collect();
            } else {
                ext.request_signature = bls_key(i).sign(&request.digest).to_bytes().to_vec();
            }
        }
        ext.encode_to_vec()
    }

    /// Proposes, checks and commits the next block with `txs` after the beacon.
    fn block(&mut self, txs: Vec<Vec<u8>>) -> Block {
        let height = self.w.chain.height();
        let commit = extended_commit(&self.w, &self.last_extensions);
        let proposal = prepare_with(&self.w, &commit, txs);
        assert_eq!(
            process(&self.w, &proposal, &commit),
            ProposalStatus::Accept,
            "the proposal of block {}",
            height + 1
        );
        self.last_extensions = (0..VALIDATORS)
            .map(|i| self.extension(i, height + 1))
            .collect();
        for (i, ext) in self.last_extensions.iter().enumerate() {
            let accepted = Application::verify_vote_extension(
                self.w.chain.app(),
                RequestVerifyVoteExtension {
                    validator_address: consensus_address(i).into(),
                    height: height as i64 + 1,
                    vote_extension: ext.clone().into(),
                    ..Default::default()
                },
            );
            assert_eq!(
                accepted.status,
                VerifyStatus::Accept as i32,
                "p{i} at {}",
                height + 1
            );
        }
        self.w.block(proposal)
    }

    /// If the next proposal carries a genesis-signed request signature, checks that every
    /// validator refuses one made below the threshold, over another digest, or for a request
    /// that is not pending; returns whether it could try.
    fn refuses_bad_request_signatures(&self) -> bool {
        let commit = extended_commit(&self.w, &self.last_extensions);
        let proposal = prepare_with(&self.w, &commit, Vec::new());
        let Some(good) = proposal.first().map(|t| decode_beacon(t)) else {
            return false;
        };
        if good.request_id == 0 || good.request_signers.len() < 3 {
            return false;
        }
        let request =
            gonka_bls::sign::pending(self.w.chain.app().store(), self.w.chain.height() + 1)
                .unwrap()
                .unwrap();
        assert_eq!(request.signer_round, 0);
        let by = |signers: &[usize], digest: &[u8]| {
            let signatures: Vec<Signature> =
                signers.iter().map(|&i| bls_key(i).sign(digest)).collect();
            BeaconTx {
                request_signature: gonka_bls_crypto::aggregate(&signatures).to_bytes().to_vec(),
                request_signers: signers.iter().map(|i| addr(&format!("p{i}"))).collect(),
                ..good.clone()
            }
        };
        let mut not_pending = good.clone();
        not_pending.request_id += 1;
        let cases = [
            ("two of four genesis signers", by(&[0, 1], &request.digest)),
            ("another digest", by(&[0, 1, 2], b"not the request")),
            ("a signer named twice", by(&[0, 1, 1], &request.digest)),
            ("a request that is not pending", not_pending),
        ];
        for (case, tx) in cases {
            let status = process(&self.w, &[beacon_tx(&tx)], &commit);
            assert_eq!(status, ProposalStatus::Reject, "{case}");
        }
        assert_eq!(process(&self.w, &proposal, &commit), ProposalStatus::Accept);
        true
    }

    /// Whether epoch `epoch`'s certificate exists and is signed.
    fn certificate_signed(&self, epoch: u64) -> bool {
        let answer = self.w.chain.query(
            q::Certificate::PATH,
            pb::QueryCertificateRequest { epoch }.encode_to_vec(),
        );
        answer.code == 0
            && pb::QueryCertificateResponse::decode(answer.value.as_ref())
                .unwrap()
                .certificate
                .is_some_and(|c| !c.signature.is_empty())
    }

    /// Runs blocks, every member dealing in rounds 1 and 2, until epoch `epoch` is certified.
    fn run_until_certified(&mut self, epoch: u64) {
        while !self.certificate_signed(epoch) {
            assert!(
                self.w.chain.height() < 40,
                "epoch {epoch}'s certificate is still unsigned"
            );
            deal_if_started(self, 1);
            deal_if_started(self, 2);
            self.block(vec![]);
        }
    }

    fn certificate(&self, epoch: u64) -> pb::SignRequest {
        self.w
            .query::<q::Certificate>(pb::QueryCertificateRequest { epoch })
            .certificate
            .unwrap()
    }

    fn handover(&self, round: u64) -> pb::SignRequest {
        self.w
            .query::<q::Handover>(pb::QueryHandoverRequest { round })
            .handover
            .unwrap()
    }
}

/// If round `id` is running and p0 has not dealt in it, every validator deals in the next
/// block.
fn deal_if_started(n: &mut Network, id: u64) {
    let answer = n.w.chain.query(
        q::Dkg::PATH,
        pb::QueryDkgRequest { round: id }.encode_to_vec(),
    );
    if answer.code != 0 {
        return;
    }
    let round = pb::QueryDkgResponse::decode(answer.value.as_ref())
        .unwrap()
        .round
        .unwrap();
    let dealt = pb::QueryDealingRequest {
        round: id,
        dealer: addr("p0"),
    };
    if round.status != "running"
        || n.w
            .chain
            .query(q::Dealing::PATH, dealt.encode_to_vec())
            .code
            == 0
    {
        return;
    }
    let deals = (0..VALIDATORS)
        .map(|i| {
            let label = format!("p{i}");
            let poly = Polynomial::from_seed(round.threshold as usize, &[i as u8, id as u8]);
            let ephemeral = Ephemeral::from_seed(&[i as u8 + 16 * id as u8; 32]);
            let msg = msg_dkg_deal(CHAIN_ID, &round, &addr(&label), &poly, &ephemeral).unwrap();
            n.w.tx(&label, vec![msg])
        })
        .collect();
    n.block(deals);
}

/// The chain of trust end to end in process: the genesis signers certify epochs until the
/// first group exists and hand over to it; later epochs are certified by the group; the
/// light client verifies every epoch from genesis.json alone and names the first bad link
/// when a summary or a handed-over key is tampered with.
#[test]
fn epoch_certificates_chain_from_the_genesis_signers_and_a_light_client_checks_them() {
    let mut n = Network::start();
    // Epochs 0..=2 end (at heights 5, 10, 15); rounds 1 and 2 start with them and every
    // member deals, so the genesis signers hand over to the first group and it to the next.
    let mut tried_bad_signatures = false;
    while !n.certificate_signed(2) {
        assert!(
            n.w.chain.height() < 40,
            "epoch 2's certificate is still unsigned"
        );
        tried_bad_signatures |= n.refuses_bad_request_signatures();
        deal_if_started(&mut n, 1);
        deal_if_started(&mut n, 2);
        n.block(vec![]);
    }
    assert!(
        tried_bad_signatures,
        "no genesis-signed request was ever proposed"
    );
    let certificates: Vec<pb::SignRequest> = (0..3).map(|e| n.certificate(e)).collect();
    let handovers: BTreeMap<u64, pb::SignRequest> =
        [1, 2].into_iter().map(|r| (r, n.handover(r))).collect();
    assert_eq!(
        handovers[&1].signer_round, 0,
        "the genesis signers vouch for the first group"
    );
    assert_eq!(
        handovers[&2].signer_round, 1,
        "each group vouches for the next"
    );
    assert_eq!(certificates[0].signer_round, 0);
    assert!(certificates.iter().all(|c| !c.signature.is_empty()));
    assert!(handovers.values().all(|h| !h.signature.is_empty()));
    let last = certificates[2].clone();
    assert_eq!(
        last.signer_round, 1,
        "epoch 2 is certified by the first group"
    );
    let summary = last.summary.as_ref().unwrap();
    assert_eq!((summary.epoch, summary.end_height), (2, 15));

    let genesis = serde_json::json!({"chain_id": CHAIN_ID, "app_state": n.app_state});
    let trust = gonka_bls::light::Trust::from_genesis(&genesis).unwrap();
    assert_eq!(trust.genesis_signers.len(), VALIDATORS);
    let verified = gonka_bls::light::verify_epochs(&trust, &certificates, &handovers).unwrap();
    let signers: Vec<u64> = verified.iter().map(|v| v.signer_round).collect();
    assert_eq!(signers, vec![0, certificates[1].signer_round, 1]);

    // A tampered summary is caught at its epoch.
    let mut tampered = certificates.clone();
    tampered[2].summary.as_mut().unwrap().total_work += 1;
    let bad = gonka_bls::light::verify_epochs(&trust, &tampered, &handovers).unwrap_err();
    assert_eq!(bad.epoch, 2);
    assert!(bad.reason.contains("tampered"), "{}", bad.reason);
    // So is a handed-over key swapped for another.
    let mut swapped = handovers.clone();
    swapped
        .get_mut(&1)
        .unwrap()
        .handover
        .as_mut()
        .unwrap()
        .group_pubkey = bls_key(9).public_key().to_bytes().to_vec();
    let bad = gonka_bls::light::verify_epochs(&trust, &certificates, &swapped).unwrap_err();
    let first_needing_round_1 = certificates
        .iter()
        .position(|c| c.signer_round == 1 || c.summary.as_ref().unwrap().group_round == 1)
        .unwrap() as u64;
    assert_eq!(bad.epoch, first_needing_round_1);
    assert!(bad.reason.contains("round 1"), "{}", bad.reason);
    // Once a later group replaces the second, the first round's dealings are forgotten (no
    // group of it signs any more); the second's stay, its members still derive shares.
    let group_id = |n: &Network| {
        let group = n.w.query::<q::Group>(pb::QueryGroupRequest {}).round;
        group.unwrap().id
    };
    while group_id(&n) < 3 {
        let latest = n.w.query::<q::Dkg>(pb::QueryDkgRequest { round: 0 }).round;
        assert!(
            n.w.chain.height() < 60,
            "round 3 never completed; the latest round: {latest:?}"
        );
        deal_if_started(&mut n, latest.map_or(0, |r| r.id));
        n.block(vec![]);
    }
    let dealing = |n: &Network, round: u64| {
        let request = pb::QueryDealingRequest {
            round,
            dealer: addr("p0"),
        };
        n.w.chain
            .query(q::Dealing::PATH, request.encode_to_vec())
            .code
    };
    assert_eq!(dealing(&n, 1), 12, "round 1's dealings are pruned");
    assert_eq!(dealing(&n, 2), 0, "round 2's dealings are kept");
    // And a genesis file whose signers are not the chain's trusts none of it.
    let mut stranger = trust.clone();
    stranger.genesis_signers[0].pubkey = bls_key(9).public_key().to_bytes().to_vec();
    stranger.genesis_signers[1].pubkey = bls_key(8).public_key().to_bytes().to_vec();
    let bad = gonka_bls::light::verify_epochs(&stranger, &certificates, &handovers).unwrap_err();
    assert_eq!(bad.epoch, 0);
}

/// The genesis signers' keys are the oldest and longest-exposed keys of the chain: once a
/// group took over, nothing they sign may extend the chain of trust. An attacker holding
/// them forges a handover to a group key of its own (round 7, "signed by the genesis
/// signers") and an epoch certificate signed by that key, and a second epoch certificate
/// signed by the genesis signers directly: the light client refuses both, naming the group
/// that should have signed.
#[test]
fn verify_epochs_refuses_handovers_and_certificates_signed_by_a_replaced_group() {
    let mut n = Network::start();
    n.run_until_certified(2);
    let certificates: Vec<pb::SignRequest> = (0..3).map(|e| n.certificate(e)).collect();
    let mut handovers: BTreeMap<u64, pb::SignRequest> =
        [1, 2].into_iter().map(|r| (r, n.handover(r))).collect();
    let genesis = serde_json::json!({"chain_id": CHAIN_ID, "app_state": n.app_state});
    let trust = gonka_bls::light::Trust::from_genesis(&genesis).unwrap();
    gonka_bls::light::verify_epochs(&trust, &certificates, &handovers)
        .expect("the real chain verifies");
    let in_force = certificates[2].summary.as_ref().unwrap().group_round;
    assert!(in_force >= 1, "a group certifies epoch 2");
    let by_genesis = |digest: &[u8]| {
        let signatures: Vec<Signature> = (0..VALIDATORS).map(|i| bls_key(i).sign(digest)).collect();
        (
            gonka_bls_crypto::aggregate(&signatures).to_bytes().to_vec(),
            (0..VALIDATORS)
                .map(|i| addr(&format!("p{i}")))
                .collect::<Vec<_>>(),
        )
    };

    // 1. A handover to the attacker's key, signed by the genesis signers.
    let attacker = bls_key(9);
    let handover = pb::GroupHandover {
        chain_id: CHAIN_ID.into(),
        round: 7,
        group_pubkey: attacker.public_key().to_bytes().to_vec(),
    };
    let digest = gonka_proto::signing::handover_digest(&handover).to_vec();
    let (signature, signers) = by_genesis(&digest);
    handovers.insert(
        7,
        pb::SignRequest {
            kind: gonka_bls::sign::kind::GROUP_HANDOVER.into(),
            digest,
            handover: Some(handover),
            signer_round: 0,
            signers,
            signature,
            ..Default::default()
        },
    );
    let mut summary = certificates[2].summary.clone().unwrap();
    summary.total_work += 1_000_000;
    summary.group_round = 7;
    summary.group_pubkey = attacker.public_key().to_bytes().to_vec();
    let digest = gonka_proto::signing::certificate_digest(&summary).to_vec();
    let mut forged = certificates.clone();
    forged[2] = pb::SignRequest {
        signature: attacker.sign(&digest).to_bytes().to_vec(),
        digest,
        summary: Some(summary),
        signer_round: 7,
        signers: Vec::new(),
        ..certificates[2].clone()
    };
    let bad = gonka_bls::light::verify_epochs(&trust, &forged, &handovers).unwrap_err();
    assert_eq!(bad.epoch, 2, "{}", bad.reason);
    assert!(
        bad.reason.contains("round 7") && bad.reason.contains("genesis signers"),
        "{}",
        bad.reason
    );

    // 2. An epoch certificate signed by the genesis signers after a group took over.
    let mut summary = certificates[2].summary.clone().unwrap();
    summary.epoch = 3;
    summary.group_round = 0;
    summary.group_pubkey = Vec::new();
    let digest = gonka_proto::signing::certificate_digest(&summary).to_vec();
    let (signature, signers) = by_genesis(&digest);
    let mut forged = certificates.clone();
    forged.push(pb::SignRequest {
        digest,
        summary: Some(summary),
        signer_round: 0,
        signers,
        signature,
        ..certificates[2].clone()
    });
    let bad = gonka_bls::light::verify_epochs(&trust, &forged, &handovers).unwrap_err();
    assert_eq!(bad.epoch, 3, "{}", bad.reason);
    assert!(
        bad.reason.contains(&format!("round {in_force}")),
        "{}",
        bad.reason
    );
}
