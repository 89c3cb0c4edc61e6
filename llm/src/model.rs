//! The llama-architecture forward pass on candle's CPU quantized matmul.
//!
//! Written here rather than taken from candle-transformers' `quantized_llama` because a
//! validator needs the logits of every position of a teacher-forced pass (prompt plus the
//! executor's output in one forward), and `ModelWeights::forward` returns only the last one.

use std::ops::Range;

use candle_core::quantized::{gguf_file::Content, GgmlDType, QMatMul, QTensor};
use candle_core::{DType, Device, Module, Tensor};

use crate::kernels::QMatrix;
use crate::variant::{perturb_tensor, Variant};
use crate::{Error, WeightFormat};

/// A weight matrix with the kernel that multiplies it.
enum Linear {
    /// This crate's kernel (`kernels.rs`).
    Own(QMatrix),
    /// candle's quantized matmul.
    Candle(QMatMul),
}

impl Linear {
    /// `x` `[1, rows, k]` times the transposed weight: `[1, rows, n]`.
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        match self {
            Self::Candle(m) => m.forward(x),
            Self::Own(m) => {
                let (b, rows, _) = x.dims3()?;
                let v = x.flatten_all()?.to_vec1::<f32>()?;
                let out = m.forward(&v, b * rows);
                Tensor::from_vec(out, (b, rows, m.n()), &Device::Cpu)
            }
        }
    }
}

/// The hyper-parameters read from the GGUF metadata (`llama.*`).
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub n_layer: usize,
    pub n_embd: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim: usize,
    pub context_length: usize,
    pub rms_eps: f32,
    pub rope_base: f32,
}

struct Layer {
    attn_norm: Tensor,
    wq: Linear,
    wk: Linear,
    wv: Linear,
    wo: Linear,
    ffn_norm: Tensor,
    w_gate: Linear,
    w_up: Linear,
    w_down: Linear,
}

/// The model's weights: read-only once loaded, shared by every request.
pub(crate) struct Model {
    pub cfg: Config,
    embed: QTensor,
    layers: Vec<Layer>,
    norm: Tensor,
    lm_head: Linear,
    /// RoPE frequencies, one per rotated pair.
    inv_freq: Vec<f32>,
}

/// One sequence's attention keys and values after rotation, per layer, position-major:
/// `[position][kv head][head_dim]`.
pub(crate) struct KvCache {
    kv: Vec<(Vec<f32>, Vec<f32>)>,
    len: usize,
}

fn md_u32(ct: &Content, key: &str) -> Result<usize, Error> {
    ct.metadata
        .get(key)
        .ok_or_else(|| Error::Format(format!("GGUF metadata has no `{key}`")))?
        .to_u32()
        .map(|x| x as usize)
        .map_err(|e| Error::Format(format!("`{key}`: {e}")))
}

fn md_f32(ct: &Content, key: &str) -> Result<f32, Error> {
    ct.metadata
        .get(key)
        .ok_or_else(|| Error::Format(format!("GGUF metadata has no `{key}`")))?
        .to_f32()
        .map_err(|e| Error::Format(format!("`{key}`: {e}")))
}

impl Config {
    pub(crate) fn from_gguf(ct: &Content) -> Result<Self, Error> {
        let arch = ct
            .metadata
            .get("general.architecture")
            .and_then(|v| v.to_string().ok())
            .map(String::as_str);
        if arch != Some("llama") {
            return Err(Error::Format(format!(
                "general.architecture is {arch:?}, expected \"llama\""
            )));
        }
        let n_embd = md_u32(ct, "llama.embedding_length")?;
        let n_head = md_u32(ct, "llama.attention.head_count")?;
        let n_head_kv = md_u32(ct, "llama.attention.head_count_kv")?;
        if n_head == 0 || n_head_kv == 0 || n_embd % n_head != 0 || n_head % n_head_kv != 0 {
            return Err(Error::Format(format!(
                "{n_head} heads, {n_head_kv} kv heads for width {n_embd}: not a llama layout"
            )));
        }
        Ok(Self {
            n_layer: md_u32(ct, "llama.block_count")?,
            n_embd,
            n_head,
            n_head_kv,
            head_dim: n_embd / n_head,
            context_length: md_u32(ct, "llama.context_length")?,
            rms_eps: md_f32(ct, "llama.attention.layer_norm_rms_epsilon")?,
            rope_base: md_f32(ct, "llama.rope.freq_base").unwrap_or(10_000.0),
        })
    }
}

impl Model {
    pub(crate) fn load<R: std::io::Read + std::io::Seek>(
        ct: &Content,
        reader: &mut R,
        format: WeightFormat,
        variant: Variant,
    ) -> Result<Self, Error> {
        let mut cfg = Config::from_gguf(ct)?;
        if variant.skip_last_layers >= cfg.n_layer {
            return Err(Error::InvalidRequest(format!(
                "cannot skip {} of {} layers",
                variant.skip_last_layers, cfg.n_layer
            )));
        }
        cfg.n_layer -= variant.skip_last_layers;
        let dev = Device::Cpu;
        let mut tensor = |name: &str| -> Result<QTensor, Error> {
            let t = ct
                .tensor(reader, name, &dev)
                .map_err(|e| Error::Format(format!("tensor `{name}`: {e}")))?;
            match variant.perturb {
                Some(p) if t.shape().rank() == 2 => perturb_tensor(t, name, p),
                _ => Ok(t),
            }
        };
        let matmul = |t: QTensor| -> Result<Linear, Error> {
            Ok(match format {
                WeightFormat::Exact => Linear::Own(QMatrix::from_qtensor(&t)?),
                WeightFormat::CandleAsLoaded => Linear::Candle(QMatMul::from_qtensor(t)?),
                WeightFormat::CandleQ8_0 if t.dtype() != GgmlDType::Q8_0 => {
                    Linear::Candle(QMatMul::from_qtensor(QTensor::quantize(
                        &t.dequantize(&dev)?,
                        GgmlDType::Q8_0,
                    )?)?)
                }
                WeightFormat::CandleQ8_0 => Linear::Candle(QMatMul::from_qtensor(t)?),
            })
        };
        let mut layers = Vec::with_capacity(cfg.n_layer);
        for i in 0..cfg.n_layer {
            let p = format!("blk.{i}");
            layers.push(Layer {
                attn_norm: tensor(&format!("{p}.attn_norm.weight"))?.dequantize(&dev)?,
                wq: matmul(tensor(&format!("{p}.attn_q.weight"))?)?,
                wk: matmul(tensor(&format!("{p}.attn_k.weight"))?)?,
                wv: matmul(tensor(&format!("{p}.attn_v.weight"))?)?,
                wo: matmul(tensor(&format!("{p}.attn_output.weight"))?)?,
                ffn_norm: tensor(&format!("{p}.ffn_norm.weight"))?.dequantize(&dev)?,
                w_gate: matmul(tensor(&format!("{p}.ffn_gate.weight"))?)?,
                w_up: matmul(tensor(&format!("{p}.ffn_up.weight"))?)?,
                w_down: matmul(tensor(&format!("{p}.ffn_down.weight"))?)?,
            });
        }
        let norm = tensor("output_norm.weight")?.dequantize(&dev)?;
        let embed = tensor("token_embd.weight")?;
        // SmolLM2 ties the output head to the embedding; a model with its own head uses it.
        let lm_head = if ct.tensor_infos.contains_key("output.weight") {
            matmul(tensor("output.weight")?)?
        } else {
            let again = tensor("token_embd.weight")?;
            matmul(again)?
        };

        let half = cfg.head_dim / 2;
        let inv_freq = (0..half)
            .map(|i| 1.0 / cfg.rope_base.powf(2.0 * i as f32 / cfg.head_dim as f32))
            .collect();
        Ok(Self {
            inv_freq,
            cfg,
            embed,
            layers,
            norm,
            lm_head,
        })
    }

    pub(crate) fn new_cache(&self) -> KvCache {
        KvCache {
            kv: (0..self.cfg.n_layer)
                .map(|_| (Vec::new(), Vec::new()))
                .collect(),
            len: 0,
        }
    }

    /// Runs `tokens` (the positions after those in `cache`) through the model, extends the cache
    /// and returns the logits `[rows.len(), vocab]` of the input positions in `rows`.
    pub(crate) fn forward(
        &self,
        tokens: &[u32],
        cache: &mut KvCache,
        rows: Range<usize>,
    ) -> Result<Tensor, Error> {
        let cfg = &self.cfg;
        let seq = tokens.len();
        let pos = cache.len;
        if seq == 0 || rows.start >= rows.end || rows.end > seq {
            return Err(Error::InvalidRequest(format!(
                "forward of {seq} tokens asked for logit rows {rows:?}"
            )));
        }
        if pos + seq > cfg.context_length {
            return Err(Error::InvalidRequest(format!(
                "{} positions exceed the model's context of {}",
                pos + seq,
                cfg.context_length
            )));
        }
        let dev = Device::Cpu;
        let ids = Tensor::new(tokens, &dev)?;
        let mut x = self.embed.embedding(&ids)?.reshape((1, seq, cfg.n_embd))?;
        let kv_width = cfg.n_head_kv * cfg.head_dim;
        for (layer, (k_cache, v_cache)) in self.layers.iter().zip(cache.kv.iter_mut()) {
            let h = candle_nn::ops::rms_norm(&x, &layer.attn_norm, cfg.rms_eps)?;
            let mut q = layer.wq.forward(&h)?.flatten_all()?.to_vec1::<f32>()?;
            let mut k = layer.wk.forward(&h)?.flatten_all()?.to_vec1::<f32>()?;
            let v = layer.wv.forward(&h)?.flatten_all()?.to_vec1::<f32>()?;
            self.rope(&mut q, pos, cfg.n_head);
            self.rope(&mut k, pos, cfg.n_head_kv);
            k_cache.extend_from_slice(&k);
            v_cache.extend_from_slice(&v);
            debug_assert_eq!(k_cache.len(), (pos + seq) * kv_width);
            let y = attention(cfg, &q, k_cache, v_cache, pos);
            let y = Tensor::from_vec(y, (1, seq, cfg.n_embd), &dev)?;
            x = (x + layer.wo.forward(&y)?)?;
            let h = candle_nn::ops::rms_norm(&x, &layer.ffn_norm, cfg.rms_eps)?;
            let gate = layer.w_gate.forward(&h)?.silu()?;
            let up = layer.w_up.forward(&h)?;
            x = (x + layer.w_down.forward(&(gate * up)?)?)?;
        }
        cache.len = pos + seq;
        let x = x.narrow(1, rows.start, rows.len())?.contiguous()?;
        let x = candle_nn::ops::rms_norm(&x, &self.norm, cfg.rms_eps)?;
        let logits = self.lm_head.forward(&x)?;
        Ok(logits.squeeze(0)?.to_dtype(DType::F32)?)
    }

    /// Rotates `x` (`[row][head][head_dim]`, row i at position `pos + i`) in place. GGUF stores
    /// llama's q/k rows permuted so that the rotated pairs are adjacent (GPT-J style).
    fn rope(&self, x: &mut [f32], pos: usize, heads: usize) {
        let d = self.cfg.head_dim;
        for (row, chunk) in x.chunks_exact_mut(heads * d).enumerate() {
            let p = (pos + row) as f32;
            for head in chunk.chunks_exact_mut(d) {
                for (i, pair) in head.chunks_exact_mut(2).enumerate() {
                    let (sin, cos) = (p * self.inv_freq[i]).sin_cos();
                    let (a, b) = (pair[0], pair[1]);
                    pair[0] = a * cos - b * sin;
                    pair[1] = a * sin + b * cos;
                }
            }
        }
    }
}

/// Causal grouped-query attention of the rows `q` (`[row][head][head_dim]`, row i at position
/// `pos + i`) over the cached keys and values. Written as plain loops in a fixed order, one
/// row at a time, so a row's result does not depend on how many rows are computed together:
/// the teacher-forced pass of a validator then reproduces the executor's incremental decode
/// (a batched f32 matmul reorders sums, and the int8 rounding of the next quantized matmul
/// amplifies such last-bit differences to ~0.1 in a log-probability).
fn attention(cfg: &Config, q: &[f32], k: &[f32], v: &[f32], pos: usize) -> Vec<f32> {
    let d = cfg.head_dim;
    let n_rep = cfg.n_head / cfg.n_head_kv;
    let kv_width = cfg.n_head_kv * d;
    let scale = 1.0 / (d as f32).sqrt();
    let mut out = vec![0f32; q.len()];
    let mut scores = Vec::new();
    for (row, (q_row, out_row)) in q
        .chunks_exact(cfg.n_embd)
        .zip(out.chunks_exact_mut(cfg.n_embd))
        .enumerate()
    {
        let visible = pos + row + 1;
        for (head, (qh, oh)) in q_row
            .chunks_exact(d)
            .zip(out_row.chunks_exact_mut(d))
            .enumerate()
        {
            let off = (head / n_rep) * d;
            scores.clear();
            let mut max = f32::NEG_INFINITY;
            for j in 0..visible {
                let kj = &k[j * kv_width + off..j * kv_width + off + d];
                let s = dot(qh, kj) * scale;
                max = max.max(s);
                scores.push(s);
            }
            let mut sum = 0f32;
            for s in scores.iter_mut() {
                *s = (*s - max).exp();
                sum += *s;
            }
            for (j, p) in scores.iter().enumerate() {
                let vj = &v[j * kv_width + off..j * kv_width + off + d];
                let w = p / sum;
                for (o, x) in oh.iter_mut().zip(vj) {
                    *o += w * x;
                }
            }
        }
    }
    out
}

/// A dot product summed in a fixed order over 8 lanes (which the compiler vectorizes; a plain
/// `sum` is a serial chain of f32 adds).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for ((s, x), y) in acc.iter_mut().zip(x).zip(y) {
            *s += x * y;
        }
    }
    acc.iter().sum::<f32>() + tail
}
