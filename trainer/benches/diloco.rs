//! DiLoCo against synchronous data-parallel training: bytes on the wire, final validation
//! loss, wall time, and the cost of verifying a round.
//!
//! `CARGO_TARGET_DIR=/tmp/trainer-target cargo bench -p gonka-trainer --bench diloco` (release,
//! about 15 minutes on two idle cores); `-- --smoke` (or `DILOCO_SMOKE=1`) runs a small version
//! in about a minute. Settings: `DILOCO_STEPS` (inner steps per worker, default 4000),
//! `DILOCO_WORKERS` (4), `DILOCO_BATCH` (sequences per worker-step, 4), `DILOCO_PLOT` (where the
//! loss curves go, default `<target dir>/diloco-loss.svg`).
//!
//! Every method runs the same workers for the same number of inner steps on the same kind of
//! data (each step's global batch split across workers, [`gonka_trainer::data::step_offsets`]):
//! - synchronous: each step, the workers' gradients are averaged and one AdamW step taken;
//!   each worker sends one gradient per step;
//! - DiLoCo H: each worker takes H AdamW steps alone, then the pseudo-gradients are averaged
//!   and one outer Nesterov step taken (lr 0.7, momentum 0.9); each worker sends one
//!   pseudo-gradient per H steps, as an `f32` blob or, in the int8 row, quantised per tensor.

// A bench reads the clock and its settings from the environment; the library never does.
#![allow(clippy::disallowed_methods)]

use std::time::Instant;

use gonka_trainer::cheat::{cheating_round, Cheat};
use gonka_trainer::data::{step_offsets, Shard};
use gonka_trainer::params::param_specs;
use gonka_trainer::verify::relative_distance;
use gonka_trainer::{
    average, default_inner_params, evaluate_loss, initial_weights, inner_round, outer_step,
    param_count, verify_round, Corpus, DataParallel, JobSpec, OptimizerState, OuterParams,
    ParamSet, RoundTask, Tolerance, DEFAULT_INIT_SEED, SEQ_LEN,
};
use plotters::prelude::*;

type Curve = Vec<(u32, f64)>;

struct Run {
    name: String,
    /// Validation loss after each evaluated inner step (0 = the initial weights).
    curve: Curve,
    /// Bytes one worker sent over the whole run.
    bytes_per_worker: u64,
    /// Gradient or pseudo-gradient exchanges.
    syncs: u64,
    seconds: f64,
}

struct Setup {
    job: JobSpec,
    corpus: Corpus,
    validation: Corpus,
    eval: Vec<u32>,
    steps: u32,
    /// Evaluate the synchronous run every this many steps.
    eval_every: u32,
}

impl Setup {
    fn eval(&self, weights: &ParamSet) -> f64 {
        evaluate_loss(weights, &self.validation, &self.eval).expect("evaluation")
    }
}

fn setting(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let smoke = std::env::args().any(|a| a == "--smoke")
        || std::env::var("DILOCO_SMOKE").is_ok_and(|v| v == "1");
    let steps = setting("DILOCO_STEPS", if smoke { 100 } else { 4000 });
    let hs: Vec<u32> = if smoke { vec![10, 50] } else { vec![50, 500] };
    let job = JobSpec {
        seed: 0x6469_6c6f_636f, // "diloco"
        init_seed: DEFAULT_INIT_SEED,
        corpus_bytes: 512 << 10,
        workers: setting("DILOCO_WORKERS", 4),
        inner_steps: hs[0],
        batch_size: setting("DILOCO_BATCH", 4),
        inner: default_inner_params(),
        outer: OuterParams::default(),
    };
    job.validate().expect("bench job");
    let validation = job.validation_corpus();
    let setup = Setup {
        corpus: job.corpus(),
        eval: validation.eval_offsets(if smoke { 16 } else { 64 }),
        validation,
        steps,
        eval_every: hs[0],
        job,
    };
    println!(
        "model: {} parameters; {} workers x {} sequences of {SEQ_LEN} bytes per step, {} inner \
         steps per worker; validation on {} held-out sequences{}",
        param_count(),
        setup.job.workers,
        setup.job.batch_size,
        steps,
        setup.eval.len(),
        if smoke { " (smoke run)" } else { "" }
    );

    let mut runs = vec![synchronous(&setup)];
    for &h in &hs {
        runs.push(diloco(&setup, h, false));
    }
    runs.push(diloco(&setup, *hs.last().expect("an H"), true));
    report(&runs, steps);

    let path = std::env::var("DILOCO_PLOT").unwrap_or_else(|_| {
        let target = std::env::var("CARGO_TARGET_DIR")
            .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../target").into());
        format!("{target}/diloco-loss.svg")
    });
    plot(&runs, steps, &path);
    println!("loss curves: {path}");

    verification_cost(&setup, if smoke { 10 } else { 50 });
    threshold_margin(&setup, if smoke { 50 } else { 500 });
}

fn synchronous(setup: &Setup) -> Run {
    let started = Instant::now();
    let init = initial_weights(setup.job.init_seed);
    let mut curve = vec![(0, setup.eval(&init))];
    let mut dp = DataParallel::new(&init, &setup.job.inner).expect("trainer");
    let offset_count = setup.corpus.offset_count();
    let mut eval_seconds = 0.0;
    for step in 0..setup.steps {
        let batches: Vec<Vec<u32>> = (0..setup.job.workers)
            .map(|worker| {
                let shard = Shard {
                    worker,
                    workers: setup.job.workers,
                    batch_size: setup.job.batch_size,
                };
                // Round u64::MAX: a data stream no DiLoCo round of this bench uses.
                step_offsets(setup.job.seed, offset_count, shard, u64::MAX, step)
            })
            .collect();
        let refs: Vec<&[u32]> = batches.iter().map(Vec::as_slice).collect();
        dp.step(&setup.corpus, &refs).expect("step");
        if (step + 1) % setup.eval_every == 0 || step + 1 == setup.steps {
            let t = Instant::now();
            curve.push((step + 1, setup.eval(&dp.weights().expect("weights"))));
            eval_seconds += t.elapsed().as_secs_f64();
        }
    }
    let run = Run {
        name: "synchronous".into(),
        curve,
        bytes_per_worker: u64::from(setup.steps) * ParamSet::blob_len() as u64,
        syncs: setup.steps.into(),
        seconds: started.elapsed().as_secs_f64() - eval_seconds,
    };
    progress(&run);
    run
}

/// Per-tensor symmetric int8 quantisation (scale = max |v| / 127) and back: what a worker
/// sending int8 pseudo-gradients delivers. Its size: one byte per parameter and one `f32`
/// scale per tensor.
fn int8_round_trip(pg: &ParamSet) -> ParamSet {
    let tensors = pg
        .tensors()
        .iter()
        .map(|t| {
            let max = t.iter().fold(0f32, |m, v| m.max(v.abs()));
            let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
            t.iter()
                .map(|v| (v / scale).round().clamp(-127.0, 127.0) * scale)
                .collect()
        })
        .collect();
    ParamSet::from_tensors(tensors).expect("same shapes")
}

fn int8_bytes() -> u64 {
    (param_count() + 4 * param_specs().len()) as u64
}

fn diloco(setup: &Setup, h: u32, int8: bool) -> Run {
    let started = Instant::now();
    let job = JobSpec {
        inner_steps: h,
        ..setup.job.clone()
    };
    let mut weights = initial_weights(job.init_seed);
    let mut curve = vec![(0, setup.eval(&weights))];
    let mut momentum = ParamSet::zeros();
    let mut optimizers = vec![OptimizerState::new(); job.workers as usize];
    let rounds = setup.steps / h;
    let mut eval_seconds = 0.0;
    for round in 0..u64::from(rounds) {
        let mut pseudo_gradients = Vec::new();
        for (worker, optimizer) in optimizers.iter_mut().enumerate() {
            let indices = job.data_indices(worker as u32, round).expect("indices");
            let out = inner_round(&RoundTask {
                corpus: &setup.corpus,
                weights: &weights,
                optimizer,
                indices: &indices,
                params: &job.inner,
            })
            .expect("round");
            *optimizer = out.end_optimizer;
            pseudo_gradients.push(if int8 {
                int8_round_trip(&out.pseudo_gradient)
            } else {
                out.pseudo_gradient
            });
        }
        let averaged = average(&pseudo_gradients).expect("average");
        (weights, momentum) = outer_step(&weights, &momentum, &averaged, &job.outer);
        let t = Instant::now();
        curve.push(((round as u32 + 1) * h, setup.eval(&weights)));
        eval_seconds += t.elapsed().as_secs_f64();
    }
    let per_sync = if int8 {
        int8_bytes()
    } else {
        ParamSet::blob_len() as u64
    };
    let run = Run {
        name: format!("DiLoCo H={h}{}", if int8 { " int8" } else { "" }),
        curve,
        bytes_per_worker: u64::from(rounds) * per_sync,
        syncs: rounds.into(),
        seconds: started.elapsed().as_secs_f64() - eval_seconds,
    };
    progress(&run);
    run
}

fn progress(run: &Run) {
    let last = run.curve.last().expect("a point");
    println!(
        "  {}: validation loss {:.4} after {} steps, {:.0} s",
        run.name, last.1, last.0, run.seconds
    );
}

fn report(runs: &[Run], steps: u32) {
    let sync = &runs[0];
    let sync_loss = sync.curve.last().expect("a point").1;
    let start_loss = sync.curve[0].1;
    println!();
    println!(
        "| method | syncs | bytes sent per worker | fewer bytes than sync | final val loss | vs sync | train s |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for run in runs {
        let loss = run.curve.last().expect("a point").1;
        println!(
            "| {} | {} | {} | {:.0}x | {:.4} | {:+.2}% | {:.0} |",
            run.name,
            run.syncs,
            run.bytes_per_worker,
            sync.bytes_per_worker as f64 / run.bytes_per_worker as f64,
            loss,
            100.0 * (loss / sync_loss - 1.0),
            run.seconds
        );
    }
    println!(
        "step-0 validation loss {start_loss:.4}; synchronous final / step-0 = {:.3} \
         (goal <= 0.8); {steps} inner steps per worker",
        sync_loss / start_loss
    );
}

fn plot(runs: &[Run], steps: u32, path: &str) {
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).expect("plot");
    let max = runs
        .iter()
        .flat_map(|r| r.curve.iter().map(|p| p.1))
        .fold(0f64, f64::max);
    let min = runs
        .iter()
        .flat_map(|r| r.curve.iter().map(|p| p.1))
        .fold(f64::MAX, f64::min);
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "validation loss (nats/byte) vs inner steps per worker",
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0u32..steps, (min * 0.9..max * 1.1).log_scale())
        .expect("plot");
    chart
        .configure_mesh()
        .x_desc("inner steps per worker")
        .y_desc("validation loss")
        .draw()
        .expect("plot");
    let colors = [BLACK, RED, BLUE, GREEN, MAGENTA];
    for (run, color) in runs.iter().zip(colors) {
        chart
            .draw_series(LineSeries::new(run.curve.iter().copied(), color))
            .expect("plot")
            .label(run.name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()
        .expect("plot");
    root.present().expect("plot");
}

/// A half-trained starting point for the verification measurements: the synchronous
/// baseline's weights would do, but a short DiLoCo H-round from the seed is cheaper.
fn mid_training(setup: &Setup, h: u32) -> (JobSpec, ParamSet, OptimizerState) {
    let job = JobSpec {
        inner_steps: h,
        ..setup.job.clone()
    };
    let indices = job.data_indices(0, 0).expect("indices");
    let out = inner_round(&RoundTask {
        corpus: &setup.corpus,
        weights: &initial_weights(job.init_seed),
        optimizer: &OptimizerState::new(),
        indices: &indices,
        params: &job.inner,
    })
    .expect("round");
    (job, out.end_weights, out.end_optimizer)
}

/// Seconds to run one round against seconds to verify it (re-execution plus hashing).
fn verification_cost(setup: &Setup, h: u32) {
    let (job, weights, optimizer) = mid_training(setup, h);
    let indices = job.data_indices(0, 1).expect("indices");
    let task = RoundTask {
        corpus: &setup.corpus,
        weights: &weights,
        optimizer: &optimizer,
        indices: &indices,
        params: &job.inner,
    };
    let t = Instant::now();
    let out = inner_round(&task).expect("round");
    let commitment = out.commitment();
    let train = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let verdict =
        verify_round(&task, &commitment, &out.end_weights, &Tolerance::default()).expect("verify");
    let verify = t.elapsed().as_secs_f64();
    let tokens = u64::from(h) * u64::from(job.batch_size) * SEQ_LEN as u64;
    println!(
        "\nverification of one round (H={h}, batch {}): round {train:.2} s (with hashing), \
         verify_round {verify:.2} s ({:.2}x); bit-exact {}; re-execution rate {:.0} trained \
         tokens/s (x/pol's verifier_tokens_per_block is half of it at 1-second blocks)",
        job.batch_size,
        verify / train,
        verdict.bit_exact,
        tokens as f64 / verify
    );
}

/// The distance threshold's margin against the length of the re-executed stretch: float noise
/// (a 1-ulp nudge of every start weight, standing in for another CPU's kernels) against
/// skipping the last 10% of the steps, from a half-trained start.
fn threshold_margin(setup: &Setup, h: u32) {
    let (job, weights, optimizer) = mid_training(setup, h);
    let all = job.data_indices(0, 1).expect("indices");
    let nudged = weights.map(|v| f32::from_bits(v.to_bits() ^ 1));
    println!("\nre-execution distance after a 1-ulp start nudge (relative to the update):");
    println!("| steps | honest noise | skipping 10% | stale |");
    println!("|---:|---:|---:|---:|");
    for steps in [h / 50, h / 10, h / 5, h / 2, h] {
        let indices = all.truncated(steps as usize);
        let task = RoundTask {
            corpus: &setup.corpus,
            weights: &weights,
            optimizer: &optimizer,
            indices: &indices,
            params: &job.inner,
        };
        let honest = inner_round(&task).expect("round");
        let noisy = inner_round(&RoundTask {
            weights: &nudged,
            ..task
        })
        .expect("round");
        let noise = relative_distance(
            &noisy.end_weights,
            &honest.end_weights,
            &honest.pseudo_gradient,
        );
        let skip = cheating_round(
            &task,
            Cheat::SkipInnerSteps {
                performed: steps - steps / 10,
            },
        )
        .expect("cheat");
        let skipped = relative_distance(
            &skip.end_weights,
            &honest.end_weights,
            &honest.pseudo_gradient,
        );
        println!("| {steps} | {noise:.2e} | {skipped:.3} | 1.000 |");
    }
}
