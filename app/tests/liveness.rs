//! Downtime jailing and double signing, as CometBFT reports them to `FinalizeBlock`: a
//! validator absent from too much of the signing window is jailed and slashed, one at the
//! limit is not; evidence of double signing slashes, jails and tombstones the offender, once;
//! the slashed stake is paid out with the epoch's fees (the world's invariants check it).

mod common;
mod support;

use gonka_proto::stake::Participant;
use sha2::{Digest, Sha256};
use support::*;
use tendermint_proto::v0_38::abci::{
    CommitInfo, Misbehavior, MisbehaviorType, Validator, VoteInfo,
};
use tendermint_proto::v0_38::types::BlockIdFlag;

const BOND: u128 = 1_000_000;
const WINDOW: u64 = 10;
const DOWNTIME_PPM: u64 = 100_000;
const DOUBLE_SIGN_PPM: u64 = 50_000;

fn address(index: usize) -> Vec<u8> {
    Sha256::digest(consensus_key(index))[..20].to_vec()
}

/// A commit of the four validators, without the signatures of `absent`.
fn commit(absent: &[usize]) -> Option<CommitInfo> {
    let votes = (0..4)
        .map(|i| VoteInfo {
            validator: Some(Validator {
                address: address(i).into(),
                power: 1,
            }),
            block_id_flag: if absent.contains(&i) {
                BlockIdFlag::Absent
            } else {
                BlockIdFlag::Commit
            } as i32,
        })
        .collect();
    Some(CommitInfo { round: 0, votes })
}

fn world() -> World {
    let mut setup = Setup::new(4, BOND);
    setup.epoch_length = 50;
    setup.stake.signed_blocks_window = WINDOW;
    setup.stake.min_signed_ppm = 500_000;
    setup.stake.downtime_slash_ppm = DOWNTIME_PPM;
    setup.stake.double_sign_slash_ppm = DOUBLE_SIGN_PPM;
    World::new(setup)
}

fn bonded(p: &Participant) -> u128 {
    p.bonded.parse().unwrap()
}

#[test]
fn a_validator_absent_from_most_of_the_window_is_jailed_and_slashed_and_one_at_the_limit_is_not() {
    let mut w = world();
    // p3 signs nothing; p2 signs every other block: 5 of 10 missed, the most it may miss.
    let mut jailed_at = None;
    for n in 0..WINDOW {
        let absent: Vec<usize> = if n % 2 == 0 { vec![2, 3] } else { vec![3] };
        let block = w.block_with(vec![], commit(&absent), Vec::new());
        let downtime = block.events("downtime");
        if !downtime.is_empty() {
            assert_eq!(downtime.len(), 1, "{downtime:?}");
            assert_eq!(downtime[0]["operator"], addr("p3"));
            assert_eq!(downtime[0]["missed"], WINDOW.to_string());
            // It leaves the validator set at the end of that very block.
            assert_eq!(block.updates().get(&consensus_key(3)), Some(&0));
            jailed_at = Some(n);
        }
    }
    // Counted over a whole window before anyone is judged: jailed at the window's last block.
    assert_eq!(jailed_at, Some(WINDOW - 1));
    let p3 = w.participant("p3");
    assert!(p3.jailed && !p3.tombstoned);
    assert_eq!(
        bonded(&p3),
        BOND - BOND * u128::from(DOWNTIME_PPM) / 1_000_000
    );
    let p2 = w.participant("p2");
    assert!(!p2.jailed, "p2 signed half the window, which is enough");
    assert_eq!(bonded(&p2), BOND);

    // Jailed, p3's absence counts no more: no second slash however long it stays away.
    for _ in 0..2 * WINDOW {
        let block = w.block_with(vec![], commit(&[3]), Vec::new());
        assert!(block.events("downtime").is_empty());
    }
    assert_eq!(bonded(&w.participant("p3")), bonded(&p3));

    // After its jail time it unjails, and is counted afresh from an empty window.
    while w.current_epoch() < p3.jailed_until_epoch {
        w.finish_epoch();
    }
    let unjail = w.tx("p3", vec![unjail_msg("p3")]);
    let block = w.block(vec![unjail]);
    assert_eq!(block.result(0).code, 0, "{}", block.result(0).log);
    assert!(!w.participant("p3").jailed);
}

#[test]
fn double_signing_slashes_jails_and_tombstones_once() {
    let mut w = world();
    let evidence = |height: i64| Misbehavior {
        r#type: MisbehaviorType::DuplicateVote as i32,
        validator: Some(Validator {
            address: address(1).into(),
            power: 1,
        }),
        height,
        time: None,
        total_voting_power: 4,
    };
    let block = w.block_with(vec![], commit(&[]), vec![evidence(1)]);
    let caught = block.events("double_sign");
    assert_eq!(caught.len(), 1, "{caught:?}");
    assert_eq!(caught[0]["operator"], addr("p1"));
    assert_eq!(caught[0]["kind"], "duplicate_vote");
    assert_eq!(block.updates().get(&consensus_key(1)), Some(&0));
    let p1 = w.participant("p1");
    assert!(p1.jailed && p1.tombstoned);
    let after_first = bonded(&p1);
    assert_eq!(
        after_first,
        BOND - BOND * u128::from(DOUBLE_SIGN_PPM) / 1_000_000
    );

    // More evidence of the same (or an older) offence takes nothing more.
    let block = w.block_with(vec![], commit(&[]), vec![evidence(2), evidence(1)]);
    assert!(block.events("double_sign").is_empty());
    assert_eq!(bonded(&w.participant("p1")), after_first);

    // Jailed for good: MsgUnjail is refused however long it waits, and nothing changes.
    w.finish_epoch();
    w.finish_epoch();
    w.finish_epoch();
    let unjail = w.tx("p1", vec![unjail_msg("p1")]);
    let block = w.block(vec![unjail]);
    let result = block.result(0);
    assert_eq!(
        (result.codespace.as_str(), result.code),
        ("stake", 13),
        "{}",
        result.log
    );
    assert!(w.participant("p1").jailed);

    // Evidence naming no participant's key is ignored.
    let mut stranger = evidence(3);
    stranger.validator.as_mut().unwrap().address = vec![9; 20].into();
    let block = w.block_with(vec![], commit(&[]), vec![stranger]);
    assert!(block.events("double_sign").is_empty());
}
