//! The inner optimizer: AdamW whose state can be hashed, sent and resumed.
//!
//! `candle_nn::AdamW` keeps its moments and step count private, so its state can be neither
//! committed on chain nor handed to a verifier who must resume from it. [`InnerAdamW`] is the
//! same update, tensor operation for tensor operation (with [`candle_nn::ParamsAdamW`] as its
//! configuration), with the state in the open; a test checks it stays bit-identical to
//! `candle_nn::AdamW` over many steps.

use candle_core::backprop::GradStore;
use candle_core::{Tensor, Var};
use candle_nn::ParamsAdamW;
use sha2::{Digest, Sha256};

use crate::format::{self, Reader};
use crate::params::ParamSet;
use crate::{Hash, TrainerError};

/// A worker's inner AdamW state. DiLoCo keeps it per worker across rounds (the paper's
/// workers never reset or share their inner optimizer), so it is an input and an output of
/// every round, and H(optimizer state) is committed with each round.
#[derive(Debug, Clone, PartialEq)]
pub struct OptimizerState {
    /// AdamW steps taken so far (sets the bias corrections).
    pub step: u64,
    /// First moments, one per parameter.
    pub first_moment: ParamSet,
    /// Second moments, one per parameter.
    pub second_moment: ParamSet,
}

impl OptimizerState {
    /// The state before the first step: zero moments, step 0.
    pub fn new() -> Self {
        Self {
            step: 0,
            first_moment: ParamSet::zeros(),
            second_moment: ParamSet::zeros(),
        }
    }

    /// Canonical bytes (kind 3 of [`crate::format`]).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(Self::blob_len());
        format::write_header(&mut out, format::KIND_OPTIMIZER_STATE);
        out.extend_from_slice(&self.step.to_le_bytes());
        let tensors = 2 * self.first_moment.tensors().len();
        format::put_u32(&mut out, tensors);
        self.first_moment.write_tensors(&mut out, "m/");
        self.second_moment.write_tensors(&mut out, "v/");
        out
    }

    /// SHA-256 of [`Self::to_bytes`]: H(optimizer state).
    pub fn hash(&self) -> Hash {
        Sha256::digest(self.to_bytes()).into()
    }

    /// Parses a blob received from a peer: exactly [`Self::blob_len`] bytes in canonical form.
    /// Second moments must also be non-negative (they are running means of squares).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, TrainerError> {
        if bytes.len() != Self::blob_len() {
            return Err(TrainerError::Malformed(format!(
                "an optimizer state blob is {} bytes, found {}",
                Self::blob_len(),
                bytes.len()
            )));
        }
        let mut reader = Reader::new(bytes);
        reader.header(format::KIND_OPTIMIZER_STATE)?;
        let step = reader.u64()?;
        let count = reader.u32()? as usize;
        let expected = 2 * crate::params::param_specs().len();
        if count != expected {
            return Err(TrainerError::Malformed(format!(
                "expected {expected} optimizer tensors, found {count}"
            )));
        }
        let first_moment = ParamSet::read_tensors(&mut reader, "m/")?;
        let second_moment = ParamSet::read_tensors(&mut reader, "v/")?;
        reader.finish()?;
        if second_moment.values().any(|v| v < 0.0) {
            return Err(TrainerError::Malformed(
                "a second moment is negative".into(),
            ));
        }
        Ok(Self {
            step,
            first_moment,
            second_moment,
        })
    }

    /// Length of every optimizer state blob.
    pub fn blob_len() -> usize {
        // Header, step, then one tensor list of both moments (a single count).
        format::HEADER_LEN + 8 + ParamSet::body_len("m/") + ParamSet::body_len("v/") - 4
    }
}

impl Default for OptimizerState {
    fn default() -> Self {
        Self::new()
    }
}

/// AdamW over a model's variables with an explicit, resumable state.
pub(crate) struct InnerAdamW {
    vars: Vec<Var>,
    first_moment: Vec<Tensor>,
    second_moment: Vec<Tensor>,
    step_t: u64,
    params: ParamsAdamW,
}

impl InnerAdamW {
    /// The optimizer over `vars` (in [`crate::params::param_specs`] order), resuming `state`.
    pub(crate) fn new(
        vars: &[Var],
        state: &OptimizerState,
        params: ParamsAdamW,
    ) -> Result<Self, TrainerError> {
        let to_tensors = |set: &ParamSet| -> candle_core::Result<Vec<Tensor>> {
            vars.iter()
                .zip(set.tensors())
                .map(|(v, values)| Tensor::from_slice(values, v.shape(), v.device()))
                .collect()
        };
        Ok(Self {
            vars: vars.to_vec(),
            first_moment: to_tensors(&state.first_moment)?,
            second_moment: to_tensors(&state.second_moment)?,
            step_t: state.step,
            params,
        })
    }

    /// One step with the gradients of `grads` (variables without a gradient are left alone,
    /// as in `candle_nn::AdamW`).
    pub(crate) fn step(&mut self, grads: &GradStore) -> Result<(), TrainerError> {
        let grads: Vec<Option<Tensor>> = self.vars.iter().map(|v| grads.get(v).cloned()).collect();
        self.step_with(&grads)
    }

    /// One step with explicit per-variable gradients (e.g. averaged over workers).
    pub(crate) fn step_with(&mut self, grads: &[Option<Tensor>]) -> Result<(), TrainerError> {
        // Exactly candle_nn::AdamW::step (candle-nn 0.11.1), operation for operation, so the
        // results are bit-identical to it.
        self.step_t += 1;
        let lr = self.params.lr;
        let lambda = self.params.weight_decay;
        let lr_lambda = lr * lambda;
        let beta1 = self.params.beta1;
        let beta2 = self.params.beta2;
        let step = i32::try_from(self.step_t).unwrap_or(i32::MAX);
        let scale_m = 1f64 / (1f64 - beta1.powi(step));
        let scale_v = 1f64 / (1f64 - beta2.powi(step));
        for (i, theta) in self.vars.iter().enumerate() {
            // A variable's gradient still references the forward graph; detached, the new
            // moments do not keep every step's activations alive (candle_nn::AdamW avoids this
            // by copying into variables). Same values either way.
            let Some(g) = grads[i].as_ref().map(Tensor::detach) else {
                continue;
            };
            let m = &self.first_moment[i];
            let v = &self.second_moment[i];
            let next_m = ((m * beta1)? + (&g * (1.0 - beta1))?)?;
            let next_v = ((v * beta2)? + (g.sqr()? * (1.0 - beta2))?)?;
            let m_hat = (&next_m * scale_m)?;
            let v_hat = (&next_v * scale_v)?;
            let next_theta = (theta.as_tensor() * (1f64 - lr_lambda))?;
            let adjusted_grad = (m_hat / (v_hat.sqrt()? + self.params.eps)?)?;
            let next_theta = (next_theta - (adjusted_grad * lr)?)?;
            self.first_moment[i] = next_m;
            self.second_moment[i] = next_v;
            theta.set(&next_theta)?;
        }
        Ok(())
    }

    /// The current state.
    pub(crate) fn state(&self) -> Result<OptimizerState, TrainerError> {
        let to_set = |tensors: &[Tensor]| -> Result<ParamSet, TrainerError> {
            let values = tensors
                .iter()
                .map(|t| t.flatten_all()?.to_vec1::<f32>())
                .collect::<candle_core::Result<Vec<_>>>()?;
            ParamSet::from_tensors(values)
        };
        Ok(OptimizerState {
            step: self.step_t,
            first_moment: to_set(&self.first_moment)?,
            second_moment: to_set(&self.second_moment)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Corpus;
    use crate::net::Net;
    use crate::{initial_weights, DEFAULT_INIT_SEED};
    use candle_nn::Optimizer;

    #[test]
    fn state_round_trips_and_rejects_bad_blobs() {
        let mut state = OptimizerState::new();
        state.step = 42;
        state.second_moment = state.second_moment.map(|_| 0.5);
        let bytes = state.to_bytes();
        assert_eq!(bytes.len(), OptimizerState::blob_len());
        assert!(bytes.len() <= format::MAX_BLOB_BYTES);
        assert_eq!(OptimizerState::from_bytes(&bytes).unwrap(), state);
        assert!(OptimizerState::from_bytes(&bytes[1..]).is_err());
        let mut negative = bytes.clone();
        let last = negative.len() - 4;
        negative[last..].copy_from_slice(&(-1.0f32).to_le_bytes());
        assert!(OptimizerState::from_bytes(&negative).is_err());
        let mut wrong_kind = bytes;
        wrong_kind[5] = format::KIND_WEIGHTS;
        assert!(OptimizerState::from_bytes(&wrong_kind).is_err());
    }

    /// The reason this type exists beside candle_nn::AdamW: same bits, but an open state.
    #[test]
    fn matches_candle_adamw_bit_for_bit() {
        let corpus = Corpus::generate(3, 4096);
        let weights = initial_weights(DEFAULT_INIT_SEED);
        let params = ParamsAdamW {
            lr: 3e-3,
            weight_decay: 0.1,
            ..ParamsAdamW::default()
        };
        let ours = Net::new(&weights).unwrap();
        let theirs = Net::new(&weights).unwrap();
        let mut ours_opt =
            InnerAdamW::new(ours.vars(), &OptimizerState::new(), params.clone()).unwrap();
        let mut theirs_opt = candle_nn::AdamW::new(theirs.vars().to_vec(), params).unwrap();
        for step in 0..4u32 {
            let offsets = [step * 100, step * 100 + 37];
            let loss = ours.loss(&corpus, &offsets).unwrap();
            ours_opt.step(&loss.backward().unwrap()).unwrap();
            let loss = theirs.loss(&corpus, &offsets).unwrap();
            theirs_opt.backward_step(&loss).unwrap();
        }
        assert_eq!(ours.weights().unwrap(), theirs.weights().unwrap());
        assert_eq!(ours_opt.state().unwrap().step, 4);
    }
}
