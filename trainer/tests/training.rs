//! DiLoCo end to end on a small job, and serving a trained checkpoint with the reference
//! runtime.

use gonka_model::{END_TOKEN, VOCAB_SIZE};
use gonka_trainer::{
    average, default_inner_params, evaluate_loss, initial_weights, inner_round, logits, outer_step,
    reference_model, to_reference, Corpus, JobSpec, OptimizerState, OuterParams, ParamKind,
    ParamSet, RoundTask, DEFAULT_INIT_SEED, SEQ_LEN,
};

fn job(workers: u32, inner_steps: u32) -> JobSpec {
    JobSpec {
        seed: 5,
        init_seed: DEFAULT_INIT_SEED,
        corpus_bytes: 128 << 10,
        workers,
        inner_steps,
        batch_size: 8,
        inner: default_inner_params(),
        outer: OuterParams::default(),
    }
}

/// Every worker averages the pseudo-gradient blobs it received and takes the outer step
/// itself; all must end with the same bits.
#[test]
fn diloco_workers_agree_bitwise_and_learn() {
    let job = job(2, 20);
    let corpus = job.corpus();
    let validation = job.validation_corpus();
    let eval = validation.eval_offsets(32);
    let mut weights = initial_weights(job.init_seed);
    let mut momentum = ParamSet::zeros();
    let mut optimizers = vec![OptimizerState::new(); 2];
    let start_loss = evaluate_loss(&weights, &validation, &eval).unwrap();
    for round in 0..2 {
        let mut blobs = Vec::new();
        for (worker, optimizer) in optimizers.iter_mut().enumerate() {
            let indices = job.data_indices(worker as u32, round).unwrap();
            let out = inner_round(&RoundTask {
                corpus: &corpus,
                weights: &weights,
                optimizer,
                indices: &indices,
                params: &job.inner,
            })
            .unwrap();
            assert_eq!(
                out.commitment().pseudo_gradient_hash,
                out.pseudo_gradient.hash(ParamKind::PseudoGradient)
            );
            *optimizer = out.end_optimizer;
            blobs.push(out.pseudo_gradient.to_bytes(ParamKind::PseudoGradient));
        }
        let mut results = Vec::new();
        for _receiver in 0..2 {
            let received: Vec<ParamSet> = blobs
                .iter()
                .map(|b| ParamSet::from_bytes(ParamKind::PseudoGradient, b).unwrap())
                .collect();
            let averaged = average(&received).unwrap();
            results.push(outer_step(&weights, &momentum, &averaged, &job.outer));
        }
        assert_eq!(results[0], results[1]);
        (weights, momentum) = results.swap_remove(0);
    }
    let end_loss = evaluate_loss(&weights, &validation, &eval).unwrap();
    assert!(
        end_loss < 0.75 * start_loss,
        "validation loss {start_loss:.3} -> {end_loss:.3}"
    );
}

/// Cross-entropy (nats per byte) of fixed-point logits against the next bytes.
fn fixed_point_loss(rows: &[Vec<i64>], targets: &[u32]) -> f64 {
    let scale = f64::from(1u32 << gonka_model::fixed::FRAC_BITS);
    let total: f64 = rows
        .iter()
        .zip(targets)
        .map(|(row, &t)| {
            let z: Vec<f64> = row.iter().map(|&v| v as f64 / scale).collect();
            let max = z.iter().copied().fold(f64::MIN, f64::max);
            let log_sum = z.iter().map(|v| (v - max).exp()).sum::<f64>().ln() + max;
            log_sum - z[t as usize]
        })
        .sum();
    total / rows.len() as f64
}

/// The greedy rule of the reference model: highest logit among `\n`, printable ASCII and the
/// end token, lowest id on ties.
fn greedy<T: PartialOrd + Copy>(row: &[T]) -> usize {
    let allowed = std::iter::once(usize::from(b'\n'))
        .chain(0x20..=0x7e)
        .chain(std::iter::once(END_TOKEN as usize));
    let mut best: Option<usize> = None;
    for t in allowed {
        if best.is_none_or(|b| row[t] > row[b]) {
            best = Some(t);
        }
    }
    best.unwrap()
}

#[test]
fn exported_checkpoint_serves_what_was_trained() {
    let job = job(1, 100);
    let corpus = job.corpus();
    let start = initial_weights(job.init_seed);
    let indices = job.data_indices(0, 0).unwrap();
    let trained = inner_round(&RoundTask {
        corpus: &corpus,
        weights: &start,
        optimizer: &OptimizerState::new(),
        indices: &indices,
        params: &job.inner,
    })
    .unwrap()
    .end_weights;
    assert_eq!(to_reference(&trained).clamped, 0);

    let held_out = Corpus::generate(0xfeed, 16 * SEQ_LEN + 1);
    let served = reference_model(job.init_seed, &trained);
    let untrained = reference_model(job.init_seed, &start);
    let (mut agree, mut positions) = (0, 0);
    let (mut trained_loss, mut untrained_loss) = (0.0, 0.0);
    let windows = held_out.eval_offsets(16);
    for &o in &windows {
        let bytes = &held_out.as_bytes()[o as usize..=o as usize + SEQ_LEN];
        let tokens: Vec<u32> = bytes[..SEQ_LEN].iter().map(|&b| u32::from(b)).collect();
        let targets: Vec<u32> = bytes[1..].iter().map(|&b| u32::from(b)).collect();
        let fixed = served.position_logits(&tokens);
        let float = logits(&trained, &tokens).unwrap();
        assert_eq!(float[0].len(), VOCAB_SIZE);
        for (f, x) in fixed.iter().zip(&float) {
            agree += usize::from(greedy(f) == greedy(x));
            positions += 1;
        }
        trained_loss += fixed_point_loss(&fixed, &targets);
        untrained_loss += fixed_point_loss(&untrained.position_logits(&tokens), &targets);
    }
    let n = windows.len() as f64;
    let (trained_loss, untrained_loss) = (trained_loss / n, untrained_loss / n);
    let agreement = agree as f64 / positions as f64;
    println!(
        "greedy agreement {agreement:.3} over {positions} positions; fixed-point loss \
         {untrained_loss:.3} untrained -> {trained_loss:.3} trained"
    );
    assert!(agreement >= 0.9, "greedy agreement {agreement:.3}");
    assert!(
        trained_loss < 0.5 * untrained_loss,
        "fixed-point held-out loss {untrained_loss:.3} -> {trained_loss:.3}"
    );
    // The float model's own held-out loss is what the fixed-point model nearly reproduces.
    let float_loss = evaluate_loss(&trained, &held_out, &windows).unwrap();
    println!("float held-out loss {float_loss:.3}");
    assert!((trained_loss - float_loss).abs() < 0.1 * float_loss);
}
