//! Whether an inner round is bit-exact across runs and across candle's thread counts.
//!
//! One test in its own binary: it sets `RAYON_NUM_THREADS`, which candle reads at every matmul
//! (`candle_core::utils::get_num_threads`) and which would otherwise leak into concurrent tests.

use gonka_trainer::{
    default_inner_params, initial_weights, inner_round, JobSpec, OptimizerState, OuterParams,
    RoundCommitment, RoundTask, DEFAULT_INIT_SEED,
};

fn round_commitment(job: &JobSpec, optimizer: &OptimizerState) -> RoundCommitment {
    let corpus = job.corpus();
    let weights = initial_weights(job.init_seed);
    let indices = job.data_indices(1, 3).unwrap();
    let task = RoundTask {
        corpus: &corpus,
        weights: &weights,
        optimizer,
        indices: &indices,
        params: &job.inner,
    };
    inner_round(&task).unwrap().commitment()
}

#[test]
fn one_round_is_bit_exact_across_runs_and_thread_counts() {
    let job = JobSpec {
        seed: 11,
        init_seed: DEFAULT_INIT_SEED,
        corpus_bytes: 64 << 10,
        workers: 2,
        inner_steps: 4,
        // 16 sequences of 64 bytes: matrices of 1024 rows, large enough for gemm to split
        // them across threads.
        batch_size: 16,
        inner: default_inner_params(),
        outer: OuterParams::default(),
    };
    // Rayon's global pool is sized at its first use: two threads. With "1" candle then asks
    // gemm for no parallelism at all. Start from a non-trivial optimizer state (the end of a
    // first round), as later rounds do.
    std::env::set_var("RAYON_NUM_THREADS", "2");
    let first = {
        let corpus = job.corpus();
        let weights = initial_weights(job.init_seed);
        let indices = job.data_indices(1, 2).unwrap();
        inner_round(&RoundTask {
            corpus: &corpus,
            weights: &weights,
            optimizer: &OptimizerState::new(),
            indices: &indices,
            params: &job.inner,
        })
        .unwrap()
        .end_optimizer
    };
    let mut seen = Vec::new();
    for threads in ["2", "1", "2", "1"] {
        std::env::set_var("RAYON_NUM_THREADS", threads);
        seen.push((threads, round_commitment(&job, &first)));
    }
    std::env::remove_var("RAYON_NUM_THREADS");
    for (threads, c) in &seen {
        assert_eq!(
            c, &seen[0].1,
            "the round with {threads} thread(s) differs from the first run"
        );
    }
}
