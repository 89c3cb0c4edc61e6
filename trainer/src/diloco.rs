//! DiLoCo: inner rounds of AdamW on each worker, then one outer Nesterov step on the average of
//! the workers' pseudo-gradients.
//!
//! A round of worker `w` starts from the agreed global weights and `w`'s own inner optimizer
//! state, takes H AdamW steps on `w`'s data indices, and yields its end weights, end optimizer
//! state and pseudo-gradient `start - end`. The workers exchange pseudo-gradients, average them
//! in worker order ([`average`]) and apply [`outer_step`]; both are plain `f32` arithmetic in a
//! fixed order, so every honest worker ends the round holding bit-identical global weights and
//! momentum, whatever its CPU.

use candle_core::Tensor;
use candle_nn::ParamsAdamW;
use gonka_model::fixed::{FRAC_BITS, MAX_BLOCK_WEIGHT};

use crate::data::{step_offsets, Corpus, DataIndices, Shard, MAX_CORPUS_BYTES, SEQ_LEN};
use crate::net::Net;
use crate::optim::{InnerAdamW, OptimizerState};
use crate::params::{param_specs, ParamKind, ParamSet};
use crate::verify::RoundCommitment;
use crate::TrainerError;

/// The outer optimizer: SGD with Nesterov momentum on the averaged pseudo-gradient.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OuterParams {
    /// Outer learning rate.
    pub lr: f32,
    /// Outer momentum.
    pub momentum: f32,
}

impl Default for OuterParams {
    /// The DiLoCo paper's values: learning rate 0.7, Nesterov momentum 0.9.
    fn default() -> Self {
        Self {
            lr: 0.7,
            momentum: 0.9,
        }
    }
}

/// Inner AdamW settings that train this model well on the generated corpus: learning rate
/// 3e-3, betas (0.9, 0.999), epsilon 1e-8, weight decay 0.01. The learning rate is constant:
/// no schedule to agree on between rounds.
pub fn default_inner_params() -> ParamsAdamW {
    ParamsAdamW {
        lr: 3e-3,
        ..ParamsAdamW::default()
    }
}

/// Everything that defines a training job; the chain's x/pol holds the same fields.
#[derive(Debug, Clone)]
pub struct JobSpec {
    /// Seed of the corpus and of the data order.
    pub seed: u64,
    /// Training starts from the reference model of this seed ([`crate::initial_weights`]).
    pub init_seed: u64,
    /// Corpus size in bytes, `SEQ_LEN + 1 ..= MAX_CORPUS_BYTES`.
    pub corpus_bytes: u32,
    /// Number of workers, `1..=256`.
    pub workers: u32,
    /// Inner steps per round (H), `1..=10_000`.
    pub inner_steps: u32,
    /// Sequences of [`SEQ_LEN`] bytes per inner step per worker, `1..=256`.
    pub batch_size: u32,
    /// Inner AdamW settings.
    pub inner: ParamsAdamW,
    /// Outer Nesterov settings.
    pub outer: OuterParams,
}

impl JobSpec {
    /// Checks every field's range (what a job registered on chain must satisfy).
    pub fn validate(&self) -> Result<(), TrainerError> {
        let range = |what: &str, v: u64, lo: u64, hi: u64| {
            if (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err(TrainerError::InvalidJob(format!(
                    "{what} must be in {lo}..={hi}, found {v}"
                )))
            }
        };
        range(
            "corpus_bytes",
            self.corpus_bytes.into(),
            SEQ_LEN as u64 + 1,
            MAX_CORPUS_BYTES as u64,
        )?;
        range("workers", self.workers.into(), 1, 256)?;
        range("inner_steps", self.inner_steps.into(), 1, 10_000)?;
        range("batch_size", self.batch_size.into(), 1, 256)?;
        let p = &self.inner;
        let finite = [p.lr, p.beta1, p.beta2, p.eps, p.weight_decay]
            .iter()
            .all(|v| v.is_finite() && *v >= 0.0);
        if !finite || p.beta1 >= 1.0 || p.beta2 >= 1.0 || p.eps <= 0.0 {
            return Err(TrainerError::InvalidJob(format!(
                "inner AdamW needs finite non-negative values, betas below 1 and a positive \
                 epsilon, found {p:?}"
            )));
        }
        let o = &self.outer;
        if !(o.lr.is_finite() && o.lr > 0.0 && (0.0..1.0).contains(&o.momentum)) {
            return Err(TrainerError::InvalidJob(format!(
                "outer learning rate must be positive and momentum in [0, 1), found {o:?}"
            )));
        }
        Ok(())
    }

    /// The training corpus.
    pub fn corpus(&self) -> Corpus {
        Corpus::generate(self.seed, self.corpus_bytes as usize)
    }

    /// A held-out corpus from the same grammar (a different stream of the seed), an eighth
    /// of the training corpus's size: for validation loss.
    pub fn validation_corpus(&self) -> Corpus {
        let len = (self.corpus_bytes as usize / 8).max(SEQ_LEN + 1);
        Corpus::generate(self.seed ^ 0x7661_6c69_6461_7465, len) // "validate"
    }

    /// The data indices of worker `worker` in round `round`: [`step_offsets`] for each of the
    /// H inner steps.
    pub fn data_indices(&self, worker: u32, round: u64) -> Result<DataIndices, TrainerError> {
        self.validate()?;
        if worker >= self.workers {
            return Err(TrainerError::InvalidJob(format!(
                "worker index {worker} is out of range for {} workers",
                self.workers
            )));
        }
        let shard = Shard {
            worker,
            workers: self.workers,
            batch_size: self.batch_size,
        };
        let offset_count = self.corpus_bytes as usize - SEQ_LEN;
        let steps = (0..self.inner_steps)
            .map(|step| step_offsets(self.seed, offset_count, shard, round, step))
            .collect();
        DataIndices::new(self.batch_size, steps)
    }
}

/// What one inner round starts from.
#[derive(Debug, Clone, Copy)]
pub struct RoundTask<'a> {
    /// The job's corpus.
    pub corpus: &'a Corpus,
    /// The agreed global weights at the start of the round.
    pub weights: &'a ParamSet,
    /// The worker's inner optimizer state at the end of its previous round.
    pub optimizer: &'a OptimizerState,
    /// The sequences to train on, one batch per inner step (H = `indices.steps()`).
    pub indices: &'a DataIndices,
    /// Inner AdamW settings.
    pub params: &'a ParamsAdamW,
}

/// The result of one inner round.
#[derive(Debug, Clone)]
pub struct RoundOutput {
    /// The worker's weights after H inner steps.
    pub end_weights: ParamSet,
    /// The worker's inner optimizer state after H inner steps.
    pub end_optimizer: OptimizerState,
    /// The data indices trained on.
    pub data_indices: DataIndices,
    /// `start - end`, elementwise in `f32`.
    pub pseudo_gradient: ParamSet,
    /// Mean training loss of the round in micro-nats: the mean over the H inner steps of each
    /// step's batch loss (computed before that step's update), rounded to the nearest integer.
    pub loss_micro_nats: u64,
}

impl RoundOutput {
    /// The hashes and loss the worker commits on chain for this round.
    pub fn commitment(&self) -> RoundCommitment {
        RoundCommitment {
            weights_hash: self.end_weights.hash(ParamKind::Weights),
            optimizer_state_hash: self.end_optimizer.hash(),
            data_indices_hash: self.data_indices.hash(),
            pseudo_gradient_hash: self.pseudo_gradient.hash(ParamKind::PseudoGradient),
            loss_micro_nats: self.loss_micro_nats,
        }
    }
}

/// Runs one inner round: H AdamW steps from the task's weights and optimizer state, each
/// followed by clamping the attention and MLP weights to the range the reference runtime
/// serves exactly (`gonka_model::fixed::MAX_BLOCK_WEIGHT`).
///
/// Deterministic for fixed inputs on one machine (candle's CPU kernels split work across
/// threads without changing any sum's order; see the crate docs for what was measured), but
/// not promised bit-identical across CPUs, which is why [`crate::verify_round`] accepts a
/// small distance.
pub fn inner_round(task: &RoundTask<'_>) -> Result<RoundOutput, TrainerError> {
    if task.indices.steps() == 0 {
        return Err(TrainerError::InvalidJob(
            "a round needs at least one inner step".into(),
        ));
    }
    let net = Net::new(task.weights)?;
    let mut optimizer = InnerAdamW::new(net.vars(), task.optimizer, task.params.clone())?;
    let mut loss_sum = 0f64;
    let steps = task.indices.steps();
    // Progress about ten times a round (the caller's span names the job and round).
    let report_every = (steps / 10).max(1);
    for step in 0..steps {
        let loss = net.loss(task.corpus, task.indices.step(step))?;
        let value = loss.to_scalar::<f32>()?;
        if !value.is_finite() {
            return Err(TrainerError::Diverged(format!(
                "the loss of inner step {step} is {value}"
            )));
        }
        if (step + 1) % report_every == 0 {
            tracing::info!(step = step + 1, steps, loss = value, "inner step");
        }
        loss_sum += f64::from(value);
        optimizer.step(&loss.backward()?)?;
        net.project()?;
    }
    let end_weights = net.weights()?;
    if !end_weights.is_finite() {
        return Err(TrainerError::Diverged(
            "the end weights hold a non-finite value".into(),
        ));
    }
    let mean = loss_sum / task.indices.steps() as f64;
    Ok(RoundOutput {
        pseudo_gradient: task.weights.sub(&end_weights),
        end_weights,
        end_optimizer: optimizer.state()?,
        data_indices: task.indices.clone(),
        loss_micro_nats: (mean * 1e6).round() as u64,
    })
}

/// The mean of the workers' pseudo-gradients, given in worker order: each value is summed in
/// `f64` in the order given, divided by the count and rounded to `f32`, so everyone who
/// averages the same list gets the same bits.
pub fn average(pseudo_gradients: &[ParamSet]) -> Result<ParamSet, TrainerError> {
    let Some(first) = pseudo_gradients.first() else {
        return Err(TrainerError::Shape("nothing to average".into()));
    };
    let n = pseudo_gradients.len() as f64;
    let tensors = (0..first.tensors().len())
        .map(|t| {
            (0..first.tensors()[t].len())
                .map(|i| {
                    let sum: f64 = pseudo_gradients
                        .iter()
                        .map(|pg| f64::from(pg.tensors()[t][i]))
                        .sum();
                    (sum / n) as f32
                })
                .collect()
        })
        .collect();
    ParamSet::from_tensors(tensors)
}

/// One outer step of SGD with Nesterov momentum (PyTorch's form, as in the DiLoCo paper):
/// `m' = μ·m + g`, `w' = w − lr·(g + μ·m')`, with `g` the averaged pseudo-gradient. Returns the
/// new weights and momentum. The attention and MLP weights are then clamped to the range the
/// reference runtime serves, as after every inner step. Plain `f32` operations, which Rust
/// never fuses, so the result is the same bits on every machine.
pub fn outer_step(
    weights: &ParamSet,
    momentum: &ParamSet,
    averaged: &ParamSet,
    params: &OuterParams,
) -> (ParamSet, ParamSet) {
    let (lr, mu) = (params.lr, params.momentum);
    let next_momentum = momentum.zip_map(averaged, |m, g| mu * m + g);
    let update = averaged.zip_map(&next_momentum, |g, m| g + mu * m);
    let next_weights = weights.zip_map(&update, |w, u| w - lr * u);
    (project(next_weights), next_momentum)
}

/// Synchronous data-parallel training, the baseline DiLoCo is measured against: at every step
/// each worker's gradient on its own batch is averaged with the others' (in worker order) and
/// one AdamW step is applied, with the same projection as [`inner_round`], so every worker
/// holds the same weights after every step.
pub struct DataParallel {
    net: Net,
    optimizer: InnerAdamW,
}

impl DataParallel {
    /// Training from `weights` with a fresh AdamW state.
    pub fn new(weights: &ParamSet, params: &ParamsAdamW) -> Result<Self, TrainerError> {
        let net = Net::new(weights)?;
        let optimizer = InnerAdamW::new(net.vars(), &OptimizerState::new(), params.clone())?;
        Ok(Self { net, optimizer })
    }

    /// One step on the workers' batches (one offset list per worker); returns the mean of the
    /// workers' losses before the step.
    pub fn step(&mut self, corpus: &Corpus, batches: &[&[u32]]) -> Result<f64, TrainerError> {
        if batches.is_empty() {
            return Err(TrainerError::Shape(
                "a step needs at least one worker".into(),
            ));
        }
        let mut sums: Vec<Option<Tensor>> = vec![None; self.net.vars().len()];
        let mut loss_sum = 0f64;
        for offsets in batches {
            let loss = self.net.loss(corpus, offsets)?;
            loss_sum += f64::from(loss.to_scalar::<f32>()?);
            let grads = loss.backward()?;
            for (sum, var) in sums.iter_mut().zip(self.net.vars()) {
                if let Some(g) = grads.get(var) {
                    *sum = Some(match sum.take() {
                        Some(s) => (s + g)?,
                        None => g.clone(),
                    });
                }
            }
        }
        let n = batches.len() as f64;
        let averaged = sums
            .into_iter()
            .map(|s| s.map(|s| s / n).transpose())
            .collect::<candle_core::Result<Vec<_>>>()?;
        self.optimizer.step_with(&averaged)?;
        self.net.project()?;
        Ok(loss_sum / n)
    }

    /// The current weights.
    pub fn weights(&self) -> Result<ParamSet, TrainerError> {
        self.net.weights()
    }
}

/// Clamps block weights as [`crate::net`]'s projection does, in plain `f32`.
fn project(weights: ParamSet) -> ParamSet {
    let bound = MAX_BLOCK_WEIGHT as f32 / (1u32 << FRAC_BITS) as f32;
    let tensors = param_specs()
        .iter()
        .zip(weights.tensors())
        .map(|(spec, t)| {
            if spec.name.starts_with("layers.") {
                t.iter().map(|v| v.clamp(-bound, bound)).collect()
            } else {
                t.clone()
            }
        })
        .collect();
    ParamSet::from_tensors(tensors).expect("same shapes")
}

/// Mean next-byte cross-entropy (nats per byte) of `weights` on the sequences at `offsets`,
/// evaluated in chunks of 16 sequences.
pub fn evaluate_loss(
    weights: &ParamSet,
    corpus: &Corpus,
    offsets: &[u32],
) -> Result<f64, TrainerError> {
    if offsets.is_empty() {
        return Err(TrainerError::Shape("no sequences to evaluate".into()));
    }
    let net = Net::new(weights)?;
    let mut total = 0f64;
    for chunk in offsets.chunks(16) {
        let loss = net.loss(corpus, chunk)?.to_scalar::<f32>()?;
        total += f64::from(loss) * chunk.len() as f64;
    }
    Ok(total / offsets.len() as f64)
}

/// The `f32` logits of every position of one sequence (at most `gonka_model::CONTEXT` tokens):
/// row `i` scores the token after `tokens[..=i]`.
pub fn logits(weights: &ParamSet, tokens: &[u32]) -> Result<Vec<Vec<f32>>, TrainerError> {
    if tokens.is_empty() || tokens.len() > gonka_model::CONTEXT {
        return Err(TrainerError::Shape(format!(
            "a sequence holds 1..={} tokens, found {}",
            gonka_model::CONTEXT,
            tokens.len()
        )));
    }
    let net = Net::new(weights)?;
    Ok(net.forward(tokens, 1, tokens.len())?.to_vec2::<f32>()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: f32) -> ParamSet {
        ParamSet::zeros().map(|_| v)
    }

    #[test]
    fn average_is_the_ordered_mean() {
        let avg = average(&[set(1.0), set(2.0), set(4.5)]).unwrap();
        assert!(avg.values().all(|v| v == 2.5));
        assert!(average(&[]).is_err());
    }

    #[test]
    fn outer_step_is_nesterov() {
        let params = OuterParams::default();
        let (w1, m1) = outer_step(&set(0.3), &ParamSet::zeros(), &set(0.1), &params);
        // m' = 0.1; w' = 0.3 - 0.7·(0.1 + 0.9·0.1) = 0.167
        assert!(m1.values().all(|v| (v - 0.1).abs() < 1e-7));
        assert!(w1.values().all(|v| (v - 0.167).abs() < 1e-6));
        let (w2, m2) = outer_step(&w1, &m1, &set(0.1), &params);
        // m'' = 0.19; w'' = 0.167 - 0.7·(0.1 + 0.171) = -0.0227
        assert!(m2.values().all(|v| (v - 0.19).abs() < 1e-6));
        assert!(w2.values().all(|v| (v + 0.0227).abs() < 1e-5));
        // Block weights stay within what the reference runtime serves; the rest do not need to.
        let (w, _) = outer_step(&set(0.45), &ParamSet::zeros(), &set(-0.1), &params);
        assert_eq!(w.tensor("layers.0.wq").unwrap()[0], 127.0 / 256.0);
        assert!((w.tensor("embedding").unwrap()[0] - 0.583).abs() < 1e-6);
    }

    #[test]
    fn job_validation_names_the_field() {
        let mut job = JobSpec {
            seed: 1,
            init_seed: 2,
            corpus_bytes: 10_000,
            workers: 2,
            inner_steps: 4,
            batch_size: 2,
            inner: default_inner_params(),
            outer: OuterParams::default(),
        };
        assert!(job.validate().is_ok());
        assert!(job.data_indices(2, 0).is_err());
        let a = job.data_indices(0, 0).unwrap();
        assert_eq!(a, job.data_indices(0, 0).unwrap());
        assert_ne!(a, job.data_indices(1, 0).unwrap());
        assert_ne!(a, job.data_indices(0, 1).unwrap());
        assert_eq!(a.steps(), 4);
        job.workers = 0;
        let err = job.validate().unwrap_err().to_string();
        assert!(err.contains("workers") && err.contains("found 0"), "{err}");
        job.workers = 1;
        job.corpus_bytes = 6 << 20;
        assert!(job.validate().is_err());
    }
}
