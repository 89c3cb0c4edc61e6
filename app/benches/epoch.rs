//! Benchmark: epoch-end settlement (stake's unbonding and power update, rewards' emission and
//! payout by work, the epoch advance) for 10, 100 and 1,000 participants, each a validator
//! with work in every epoch. Measures the wall time of FinalizeBlock+Commit of the block that
//! closes an epoch next to an ordinary block of the same chain, on durable disk storage (what
//! a node does) and, where `/dev/shm` exists, in memory (the state machine without fsync).
//!
//! Run: `cargo bench -p gonka-app --bench epoch`

// A benchmark measures wall-clock time; it is not part of the state machine.
#![allow(clippy::disallowed_methods)]

use std::path::Path;
use std::time::{Duration, Instant};

use gonka_app::genesis::{GenesisConfig, GenesisValidator};
use gonka_app::harness::TestChain;
use gonka_epochs::EpochsRead;
use gonka_proto::{rewards, stake};
use gonka_sdk::{Any, BlockContext, Module, Msg, Result, StateRead, StateWrite};
use gonka_stake::StakeRead;

/// Blocks per epoch: the first credits the work, two are ordinary, the last settles.
const EPOCH_LENGTH: u64 = 4;

/// Stands in for the inference module: in the first block of every epoch it credits work to
/// every participant (1 to 7 units), so each settlement pays everyone.
struct BenchWork;

gonka_sdk::impl_no_genesis!(BenchWork, "bench_work");

impl Module for BenchWork {
    fn decode_msg(&self, _msg: &Any) -> Option<Result<Box<dyn Msg>>> {
        None
    }

    fn begin_block(&self, ctx: &BlockContext, state: &mut dyn StateWrite) -> Result<()> {
        if state.current_epoch()?.start_height != ctx.height {
            return Ok(());
        }
        for (index, participant) in state.participants()?.iter().enumerate() {
            gonka_stake::credit_work(state, &participant.operator, 1 + index as u64 % 7)?;
        }
        Ok(())
    }

    fn query(&self, _path: &str, _data: &[u8], _state: &dyn StateRead) -> Option<Result<Vec<u8>>> {
        None
    }
}

fn genesis(participants: usize) -> serde_json::Value {
    GenesisConfig {
        validators: (0..participants)
            .map(|i| {
                let mut consensus_pubkey = [0xED; 32];
                consensus_pubkey[..8].copy_from_slice(&(i as u64).to_be_bytes());
                GenesisValidator {
                    operator: gonka_auth::module_address(&format!("bench-operator-{i}")),
                    moniker: format!("v{i}"),
                    consensus_pubkey,
                    stake_ngnk: 1_000_000_000 + i as u128,
                }
            })
            .collect(),
        min_gas_price: None,
        epoch_length: Some(EPOCH_LENGTH),
        stake_params: Some(stake::Params {
            min_stake: "1000".into(),
            ..gonka_stake::default_params()
        }),
        disputes_params: Some(gonka_app::genesis::quick_disputes_params()),
        rewards_params: Some(rewards::Params {
            initial_emission: "323000000000000".into(),
            decay_ppb: 474_970,
            validation_share_ppm: 100_000,
        }),
        ..Default::default()
    }
    .app_state()
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// Median ordinary-block and epoch-closing-block times over `epochs` epochs.
fn measure(dir: &Path, participants: usize, epochs: usize) -> (Duration, Duration) {
    let mut modules = gonka_app::modules::all();
    modules.push(Box::new(BenchWork));
    let mut chain = TestChain::with_modules(
        &dir.join("state.redb"),
        "bench",
        &genesis(participants),
        modules,
    )
    .unwrap();
    let (mut ordinary, mut closing) = (Vec::new(), Vec::new());
    // One warm-up epoch, then the measured ones.
    for epoch in 0..=epochs {
        for position in 0..EPOCH_LENGTH {
            let started = Instant::now();
            let response = chain.next_block(vec![]);
            let elapsed = started.elapsed();
            if epoch == 0 {
                continue;
            }
            match position {
                0 => {}
                p if p == EPOCH_LENGTH - 1 => {
                    assert!(
                        response
                            .events
                            .iter()
                            .any(|e| e.r#type == "rewards_settled"),
                        "the last block of an epoch settles it"
                    );
                    closing.push(elapsed);
                }
                _ => ordinary.push(elapsed),
            }
        }
    }
    let paid =
        gonka_rewards::RewardsRead::epoch_participant_rewards(chain.app().store(), 1).unwrap();
    assert_eq!(paid.len(), participants, "every participant is paid");
    (median(ordinary), median(closing))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let shm = Path::new("/dev/shm");
    for (participants, epochs) in [(10, 20), (100, 10), (1_000, 5)] {
        let disk = tempfile::tempdir().unwrap();
        let (ordinary, closing) = measure(disk.path(), participants, epochs);
        let mut line = format!(
            "{participants:>5} participants: ordinary block {:>8.2} ms, epoch-closing block {:>8.2} ms ({:>5.1}x, {:>6.1} µs per participant)",
            ms(ordinary),
            ms(closing),
            closing.as_secs_f64() / ordinary.as_secs_f64(),
            (closing.saturating_sub(ordinary)).as_secs_f64() * 1e6 / participants as f64,
        );
        if shm.is_dir() {
            let memory = tempfile::tempdir_in(shm).unwrap();
            let (ordinary, closing) = measure(memory.path(), participants, epochs);
            line += &format!(
                "; in memory {:.2} ms vs {:.2} ms",
                ms(ordinary),
                ms(closing)
            );
        }
        println!("{line}");
    }
}
