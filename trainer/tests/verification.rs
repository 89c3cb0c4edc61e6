//! Proof of learning: honest rounds verify, cheaters are caught, and the distance threshold
//! has a wide margin between float noise and skipped work.

use gonka_trainer::cheat::{cheating_round, Cheat};
use gonka_trainer::verify::relative_distance;
use gonka_trainer::{
    default_inner_params, initial_weights, inner_round, verify_round, Corpus, DataIndices, JobSpec,
    OptimizerState, OuterParams, ParamSet, RoundTask, Tolerance, DEFAULT_INIT_SEED,
};

const H: u32 = 16;

struct Setup {
    job: JobSpec,
    corpus: Corpus,
    /// The agreed weights at the start of round 1 (after a round 0 of worker 0 alone).
    weights: ParamSet,
    /// Worker 1's optimizer state at the end of its round 0.
    optimizer: OptimizerState,
    indices: DataIndices,
}

impl Setup {
    fn new() -> Self {
        let job = JobSpec {
            seed: 21,
            init_seed: DEFAULT_INIT_SEED,
            corpus_bytes: 64 << 10,
            workers: 2,
            inner_steps: H,
            batch_size: 4,
            inner: default_inner_params(),
            outer: OuterParams::default(),
        };
        let corpus = job.corpus();
        let indices = job.data_indices(1, 0).unwrap();
        let round0 = inner_round(&RoundTask {
            corpus: &corpus,
            weights: &initial_weights(job.init_seed),
            optimizer: &OptimizerState::new(),
            indices: &indices,
            params: &job.inner,
        })
        .unwrap();
        let indices = job.data_indices(1, 1).unwrap();
        Self {
            job,
            corpus,
            weights: round0.end_weights,
            optimizer: round0.end_optimizer,
            indices,
        }
    }

    fn task(&self) -> RoundTask<'_> {
        RoundTask {
            corpus: &self.corpus,
            weights: &self.weights,
            optimizer: &self.optimizer,
            indices: &self.indices,
            params: &self.job.inner,
        }
    }
}

/// Every weight moved by one unit in the last place: the kind of difference another CPU's
/// float kernels introduce.
fn nudge(set: &ParamSet) -> ParamSet {
    set.map(|v| f32::from_bits(v.to_bits() ^ 1))
}

#[test]
fn honest_rounds_verify_and_cheats_are_caught() {
    let setup = Setup::new();
    let task = setup.task();
    let tolerance = Tolerance::default();

    let honest = inner_round(&task).unwrap();
    let verdict =
        verify_round(&task, &honest.commitment(), &honest.end_weights, &tolerance).unwrap();
    assert!(verdict.bit_exact && verdict.accepted, "{verdict:?}");
    assert_eq!(verdict.relative_distance, 0.0);

    // Float noise: the same round from a start differing by one ulp everywhere.
    let nudged = nudge(&setup.weights);
    let noisy = inner_round(&RoundTask {
        weights: &nudged,
        ..task
    })
    .unwrap();
    let noise = relative_distance(
        &noisy.end_weights,
        &honest.end_weights,
        &honest.pseudo_gradient,
    );

    let skip = cheating_round(
        &task,
        Cheat::SkipInnerSteps {
            performed: H * 3 / 4,
        },
    )
    .unwrap();
    let skip_verdict =
        verify_round(&task, &skip.commitment(), &skip.end_weights, &tolerance).unwrap();
    let stale = cheating_round(&task, Cheat::StaleWeights).unwrap();
    let stale_verdict =
        verify_round(&task, &stale.commitment(), &stale.end_weights, &tolerance).unwrap();
    println!(
        "relative distance: honest with 1-ulp start noise {noise:.2e}, skipping a quarter of \
         the steps {:.3}, stale weights {:.3} (threshold {})",
        skip_verdict.relative_distance,
        stale_verdict.relative_distance,
        tolerance.max_relative_distance
    );
    assert!(noise < tolerance.max_relative_distance / 100.0, "{noise}");
    for v in [skip_verdict, stale_verdict] {
        // The cheats' hashes are self-consistent; only re-execution tells.
        assert!(v.data_indices_match && v.claimed_weights_match_commitment);
        assert!(v.pseudo_gradient_consistent);
        assert!(!v.bit_exact && !v.accepted, "{v:?}");
        assert!(v.relative_distance > 2.0 * tolerance.max_relative_distance);
    }
    assert!((stale_verdict.relative_distance - 1.0).abs() < 1e-9);
}

#[test]
fn inconsistent_claims_are_rejected() {
    let setup = Setup::new();
    let short = setup.indices.truncated(2);
    let task = RoundTask {
        indices: &short,
        ..setup.task()
    };
    let tolerance = Tolerance::default();
    let honest = inner_round(&task).unwrap();

    // Trained on another worker's data.
    let other = setup.job.data_indices(0, 1).unwrap().truncated(2);
    let foreign = inner_round(&RoundTask {
        indices: &other,
        ..task
    })
    .unwrap();
    let v = verify_round(
        &task,
        &foreign.commitment(),
        &foreign.end_weights,
        &tolerance,
    )
    .unwrap();
    assert!(!v.data_indices_match && !v.accepted, "{v:?}");

    // Handed over weights other than the committed ones.
    let v = verify_round(&task, &honest.commitment(), &setup.weights, &tolerance).unwrap();
    assert!(!v.claimed_weights_match_commitment && !v.accepted, "{v:?}");

    // Sent peers a pseudo-gradient other than its weights imply.
    let mut commitment = honest.commitment();
    commitment.pseudo_gradient_hash =
        ParamSet::zeros().hash(gonka_trainer::ParamKind::PseudoGradient);
    let v = verify_round(&task, &commitment, &honest.end_weights, &tolerance).unwrap();
    assert!(!v.pseudo_gradient_consistent && !v.accepted, "{v:?}");

    // Claimed a lower loss than it had.
    let mut commitment = honest.commitment();
    commitment.loss_micro_nats -= 2 * tolerance.max_loss_difference_micro_nats;
    let v = verify_round(&task, &commitment, &honest.end_weights, &tolerance).unwrap();
    assert!(!v.bit_exact && !v.accepted, "{v:?}");
}
