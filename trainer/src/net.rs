//! The reference model's architecture in candle (`f32`, CPU), for training.
//!
//! Layer for layer what `gonka_model::ReferenceModel` computes in fixed point: token embedding
//! as the residual stream; per block an RMS norm (no gain), causal attention over
//! [`N_HEADS`] heads with scores `q·k / sqrt(HEAD_DIM)` minus the ALiBi penalty
//! `slope_h · distance` (slopes 1/4, 1/16, 1/64, 1/256), an output projection added to the
//! residual, another RMS norm and a ReLU MLP added to the residual; a final RMS norm and the
//! output projection. No biases. The differences are numeric only: `f32` instead of 8
//! fractional bits, a true `exp` instead of the reference's quadratic `2^-f`, an epsilon of
//! 1e-6 in the norm, and no clamp of the residual stream (which a trained model stays far below).

use candle_core::{DType, Device, Tensor, Var, D};
use candle_nn::{Init, VarBuilder, VarMap};
use gonka_model::{D_MODEL, HEAD_DIM, N_HEADS, N_LAYERS};

use gonka_model::fixed::{FRAC_BITS, MAX_BLOCK_WEIGHT};

use crate::data::{Corpus, SEQ_LEN};
use crate::params::{param_specs, ParamSet};
use crate::TrainerError;

/// The reference model's ALiBi slopes in score units per position of distance.
const ALIBI_SLOPES: [f32; N_HEADS] = [1.0 / 4.0, 1.0 / 16.0, 1.0 / 64.0, 1.0 / 256.0];

/// Added to the scores of future positions: softmax weight exactly 0, without infinities.
const MASKED: f32 = -1e9;

/// Keeps the norm finite for an all-zero vector (the reference returns zeros there).
const RMS_EPS: f64 = 1e-6;

struct Layer {
    wq: Tensor,
    wk: Tensor,
    wv: Tensor,
    wo: Tensor,
    w_up: Tensor,
    w_down: Tensor,
}

/// The trainable model: candle variables (made through a [`VarMap`]) in [`param_specs`] order.
pub(crate) struct Net {
    /// The variables, in [`param_specs`] order (the optimizer's order too).
    vars: Vec<Var>,
    embedding: Tensor,
    layers: Vec<Layer>,
    unembedding: Tensor,
    device: Device,
}

impl Net {
    /// A model holding `weights`.
    pub(crate) fn new(weights: &ParamSet) -> Result<Self, TrainerError> {
        let device = Device::Cpu;
        let varmap = VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, &device);
        let specs = param_specs();
        let mut tensors = Vec::with_capacity(specs.len());
        for (spec, values) in specs.iter().zip(weights.tensors()) {
            let t =
                vb.get_with_hints((spec.shape[0], spec.shape[1]), &spec.name, Init::Const(0.0))?;
            tensors.push(t);
            let value = Tensor::from_slice(values, (spec.shape[0], spec.shape[1]), &device)?;
            varmap_set(&varmap, &spec.name, &value)?;
        }
        // The VarMap is hash-ordered; the optimizer walks the variables in spec order instead.
        let vars = {
            let data = varmap.data().lock().expect("VarMap lock poisoned");
            specs
                .iter()
                .map(|s| data.get(&s.name).cloned().expect("variable just created"))
                .collect()
        };
        let get = |name: &str| -> Tensor {
            let i = specs
                .iter()
                .position(|s| s.name == name)
                .expect("name from param_specs");
            tensors[i].clone()
        };
        let layers = (0..N_LAYERS)
            .map(|l| Layer {
                wq: get(&format!("layers.{l}.wq")),
                wk: get(&format!("layers.{l}.wk")),
                wv: get(&format!("layers.{l}.wv")),
                wo: get(&format!("layers.{l}.wo")),
                w_up: get(&format!("layers.{l}.w_up")),
                w_down: get(&format!("layers.{l}.w_down")),
            })
            .collect();
        Ok(Self {
            vars,
            embedding: get("embedding"),
            layers,
            unembedding: get("unembedding"),
            device,
        })
    }

    /// The variables in [`param_specs`] order.
    pub(crate) fn vars(&self) -> &[Var] {
        &self.vars
    }

    /// Clamps every attention and MLP weight to `±MAX_BLOCK_WEIGHT / 2^FRAC_BITS`, the range
    /// the reference runtime serves exactly (see [`gonka_model::fixed::MAX_BLOCK_WEIGHT`]). Applied
    /// after every optimizer step (projected AdamW), so a trained checkpoint exports without
    /// clamping.
    pub(crate) fn project(&self) -> Result<(), TrainerError> {
        let bound = f64::from(MAX_BLOCK_WEIGHT) / f64::from(1u32 << FRAC_BITS);
        for (spec, var) in param_specs().iter().zip(&self.vars) {
            if spec.name.starts_with("layers.") {
                var.set(&var.as_tensor().clamp(-bound, bound)?)?;
            }
        }
        Ok(())
    }

    /// The current weights.
    pub(crate) fn weights(&self) -> Result<ParamSet, TrainerError> {
        let tensors = self
            .vars
            .iter()
            .map(|v| v.as_tensor().flatten_all()?.to_vec1::<f32>())
            .collect::<candle_core::Result<Vec<_>>>()?;
        ParamSet::from_tensors(tensors)
    }

    /// Logits `(batch · seq, VOCAB_SIZE)` for `batch` sequences of `seq` tokens, flattened
    /// sequence after sequence.
    pub(crate) fn forward(
        &self,
        tokens: &[u32],
        batch: usize,
        seq: usize,
    ) -> Result<Tensor, TrainerError> {
        let ids = Tensor::from_slice(tokens, tokens.len(), &self.device)?;
        let mut x = self.embedding.index_select(&ids, 0)?; // (b·t, d)
        let bias = alibi_bias(seq, &self.device)?;
        for layer in &self.layers {
            let h = rms_norm(&x)?;
            let heads = |w: &Tensor| -> candle_core::Result<Tensor> {
                h.matmul(w)?
                    .reshape((batch, seq, N_HEADS, HEAD_DIM))?
                    .transpose(1, 2)?
                    .contiguous()
            };
            let (q, k, v) = (heads(&layer.wq)?, heads(&layer.wk)?, heads(&layer.wv)?);
            let scale = 1.0 / (HEAD_DIM as f64).sqrt();
            let scores = (q.matmul(&k.t()?)? * scale)?.broadcast_add(&bias)?;
            let probs = candle_nn::ops::softmax_last_dim(&scores)?;
            let attn = probs
                .matmul(&v)?
                .transpose(1, 2)?
                .reshape((batch * seq, D_MODEL))?;
            x = (x + attn.matmul(&layer.wo)?)?;
            let h = rms_norm(&x)?;
            x = (&x + h.matmul(&layer.w_up)?.relu()?.matmul(&layer.w_down)?)?;
        }
        Ok(rms_norm(&x)?.matmul(&self.unembedding)?)
    }

    /// Mean next-byte cross-entropy (nats) of the sequences at `offsets`.
    pub(crate) fn loss(&self, corpus: &Corpus, offsets: &[u32]) -> Result<Tensor, TrainerError> {
        let (inputs, targets) = corpus.batch(offsets)?;
        let logits = self.forward(&inputs, offsets.len(), SEQ_LEN)?;
        let targets = Tensor::from_slice(&targets, targets.len(), &self.device)?;
        Ok(candle_nn::loss::cross_entropy(&logits, &targets)?)
    }
}

/// Sets a variable the [`VarBuilder`] created.
fn varmap_set(varmap: &VarMap, name: &str, value: &Tensor) -> candle_core::Result<()> {
    let mut varmap = varmap.clone(); // shares the variables; `set_one` wants `&mut`
    varmap.set_one(name, value)
}

/// `x / sqrt(mean(x²) + eps)` over the last dimension (no gain, as in the reference).
fn rms_norm(x: &Tensor) -> candle_core::Result<Tensor> {
    let mean_square = x.sqr()?.mean_keepdim(D::Minus1)?;
    x.broadcast_div(&(mean_square + RMS_EPS)?.sqrt()?)
}

/// `(N_HEADS, seq, seq)`: `-slope_h · (i - j)` for key `j <= i`, [`MASKED`] for `j > i`.
fn alibi_bias(seq: usize, device: &Device) -> candle_core::Result<Tensor> {
    let mut bias = Vec::with_capacity(N_HEADS * seq * seq);
    for slope in ALIBI_SLOPES {
        for i in 0..seq {
            for j in 0..seq {
                bias.push(if j <= i {
                    -slope * (i - j) as f32
                } else {
                    MASKED
                });
            }
        }
    }
    Tensor::from_vec(bias, (N_HEADS, seq, seq), device)
}
