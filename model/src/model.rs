//! The forward pass and greedy decoding of the reference model.

use super::fixed::{
    column_dot, div_round, exp_neg, matvec, rms_norm, shr_round, FRAC_BITS, RESIDUAL_LIMIT,
};
use super::weights::Weights;
use super::{CONTEXT, D_MLP, D_MODEL, END_TOKEN, HEAD_DIM, N_HEADS, N_LAYERS};

/// Per-head ALiBi slopes in fixed point: 1/4, 1/16, 1/64 and 1/256 of a score unit per
/// position of distance, so heads range from local to nearly position-blind.
const ALIBI_SLOPES: [i64; N_HEADS] = [64, 16, 4, 1];

/// Attention scores are `q·k / sqrt(HEAD_DIM)`; with `HEAD_DIM = 16` that is a shift by 2 on top
/// of the fixed-point rescale.
const SCORE_SHIFT: u32 = FRAC_BITS + 2;

/// Tokens decoding may choose: `\n`, printable ASCII, and the end token. Ordered by id, so the
/// first maximum found is the lowest id (the tie rule).
fn allowed_tokens() -> impl Iterator<Item = u32> {
    std::iter::once(u32::from(b'\n'))
        .chain(0x20..=0x7e)
        .chain(std::iter::once(END_TOKEN))
}

/// The deterministic reference model: weights drawn from a seed, greedy decoding.
#[derive(Debug, Clone)]
pub struct ReferenceModel {
    seed: u64,
    weights: Weights,
}

impl ReferenceModel {
    /// The model whose weights are drawn from `seed` (see [`super::DEFAULT_SEED`]).
    pub fn new(seed: u64) -> Self {
        Self {
            seed,
            weights: Weights::generate(seed),
        }
    }

    /// A model serving the given weights, e.g. a trained checkpoint exported to fixed point
    /// (`gonka-trainer`'s export). `seed` is what [`Self::seed`] reports: for a trained
    /// checkpoint, the seed of the weights its training started from.
    pub fn from_weights(seed: u64, weights: Weights) -> Self {
        Self { seed, weights }
    }

    /// The seed the weights were drawn from.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The weights this model serves.
    pub fn weights(&self) -> &Weights {
        &self.weights
    }

    /// Fixed-point logits ([`FRAC_BITS`] fractional bits) of every token in the vocabulary after
    /// each prefix `tokens[..=i]`, one row of `VOCAB_SIZE` per position: what training's loss and
    /// greedy agreement are measured on. Positions further back than [`CONTEXT`] slide out of
    /// the attention window exactly as in [`Self::stream`]; unlike decoding, no token is
    /// excluded.
    pub fn position_logits(&self, tokens: &[u32]) -> Vec<Vec<i64>> {
        let mut state = State::new();
        let mut hidden = vec![0; D_MODEL];
        let vocab = self.weights.unembedding.cols;
        tokens
            .iter()
            .map(|&token| {
                self.forward(&mut state, token, &mut hidden);
                (0..vocab)
                    .map(|col| column_dot(&hidden, &self.weights.unembedding, col))
                    .collect()
            })
            .collect()
    }

    /// Greedy completion of `prompt_tokens`: at most `max_tokens` tokens, stopping early at the
    /// end token (which is not included).
    pub fn generate(&self, prompt_tokens: &[u32], max_tokens: usize) -> Vec<u32> {
        self.stream(prompt_tokens, max_tokens).collect()
    }

    /// The incremental form of [`Self::generate`]: an iterator that computes each token only
    /// when asked for it, so a server can send tokens as they are produced. The prompt is read
    /// when the iterator is created.
    pub fn stream(&self, prompt_tokens: &[u32], max_tokens: usize) -> Generation<'_> {
        let mut state = State::new();
        // By definition the model reads only the last CONTEXT prompt tokens (see the module
        // docs); this keeps the cost of a request bounded whatever the prompt size.
        let start = prompt_tokens.len().saturating_sub(CONTEXT);
        let window = &prompt_tokens[start..];
        let mut hidden = vec![0; D_MODEL];
        if window.is_empty() {
            // An empty prompt still needs a position to decode from: the end token doubles as
            // beginning-of-sequence.
            self.forward(&mut state, END_TOKEN, &mut hidden);
        }
        for &token in window {
            self.forward(&mut state, token, &mut hidden);
        }
        Generation {
            model: self,
            state,
            hidden,
            pending: None,
            produced: 0,
            max_tokens,
            ended_by_end_token: false,
            done: false,
        }
    }

    /// Runs one token through every block, appending its keys and values to the cache, and
    /// leaves the final normalised hidden state in `out`.
    fn forward(&self, state: &mut State, token: u32, out: &mut [i32]) {
        let w = &self.weights;
        let token = (token as usize).min(w.embedding.rows - 1);
        let mut x: Vec<i32> = w.embedding.data[token * D_MODEL..(token + 1) * D_MODEL].to_vec();
        let pos = state.len;
        let slot = pos % CONTEXT;
        let mut normed = [0i32; D_MODEL];
        let mut q = [0i32; D_MODEL];
        let mut acc = [0i64; D_MLP];
        let mut attn = [0i32; D_MODEL];
        let mut proj = [0i32; D_MODEL];
        let mut hidden = [0i32; D_MLP];
        // Positions visible from `pos`, oldest first: the last CONTEXT including `pos` itself.
        let first = (pos + 1).saturating_sub(CONTEXT);
        for (layer, cache) in w.layers.iter().zip(state.layers.iter_mut()) {
            // Attention sub-block.
            rms_norm(&x, &mut normed);
            matvec(&normed, &layer.wq, &mut acc[..D_MODEL], &mut q);
            matvec(
                &normed,
                &layer.wk,
                &mut acc[..D_MODEL],
                &mut cache.keys[slot * D_MODEL..(slot + 1) * D_MODEL],
            );
            matvec(
                &normed,
                &layer.wv,
                &mut acc[..D_MODEL],
                &mut cache.values[slot * D_MODEL..(slot + 1) * D_MODEL],
            );
            for (h, &slope) in ALIBI_SLOPES.iter().enumerate() {
                let head = h * HEAD_DIM..(h + 1) * HEAD_DIM;
                let qh = &q[head.clone()];
                let scores = &mut state.scores;
                scores.clear();
                for p in first..=pos {
                    let s = (p % CONTEXT) * D_MODEL;
                    let kh = &cache.keys[s + head.start..s + head.end];
                    let dot: i64 = qh
                        .iter()
                        .zip(kh)
                        .map(|(&a, &b)| i64::from(a) * i64::from(b))
                        .sum();
                    let distance = (pos - p) as i64;
                    scores.push(shr_round(dot, SCORE_SHIFT) - slope * distance);
                }
                let max = scores.iter().copied().max().unwrap_or(0);
                let mut total = 0i64;
                let mut mix = [0i64; HEAD_DIM];
                for (p, &score) in (first..=pos).zip(scores.iter()) {
                    let weight = exp_neg(max - score);
                    if weight == 0 {
                        continue;
                    }
                    total += weight;
                    let s = (p % CONTEXT) * D_MODEL;
                    let vh = &cache.values[s + head.start..s + head.end];
                    for (m, &v) in mix.iter_mut().zip(vh) {
                        *m += weight * i64::from(v);
                    }
                }
                // total >= WEIGHT_ONE (the maximum contributes exactly that), so no zero division.
                for (a, &m) in attn[head].iter_mut().zip(mix.iter()) {
                    *a = div_round(m, total) as i32;
                }
            }
            matvec(&attn, &layer.wo, &mut acc[..D_MODEL], &mut proj);
            add_residual(&mut x, &proj);

            // MLP sub-block.
            rms_norm(&x, &mut normed);
            matvec(&normed, &layer.w_up, &mut acc, &mut hidden);
            for v in hidden.iter_mut() {
                *v = (*v).max(0); // ReLU
            }
            matvec(&hidden, &layer.w_down, &mut acc[..D_MODEL], &mut proj);
            add_residual(&mut x, &proj);
        }
        state.len += 1;
        rms_norm(&x, out);
    }

    /// The greedy choice after `hidden`: the allowed token with the highest logit, lowest id on
    /// ties.
    fn pick(&self, hidden: &[i32]) -> u32 {
        let mut best = (i64::MIN, END_TOKEN);
        for token in allowed_tokens() {
            let logit = column_dot(hidden, &self.weights.unembedding, token as usize);
            if logit > best.0 {
                best = (logit, token);
            }
        }
        best.1
    }
}

/// Adds a sub-block's output to the residual stream, clamped to `±RESIDUAL_LIMIT` (see
/// [`super::fixed`] for why the bound matters).
fn add_residual(x: &mut [i32], delta: &[i32]) {
    for (a, &d) in x.iter_mut().zip(delta) {
        *a = a.saturating_add(d).clamp(-RESIDUAL_LIMIT, RESIDUAL_LIMIT);
    }
}

/// Key/value cache of one layer: a ring of CONTEXT positions.
#[derive(Debug, Clone)]
struct LayerCache {
    keys: Vec<i32>,
    values: Vec<i32>,
}

/// Everything a generation carries between tokens.
#[derive(Debug, Clone)]
struct State {
    layers: Vec<LayerCache>,
    /// Positions consumed so far.
    len: usize,
    /// Scratch for one head's attention scores.
    scores: Vec<i64>,
}

impl State {
    fn new() -> Self {
        let layers = (0..N_LAYERS)
            .map(|_| LayerCache {
                keys: vec![0; CONTEXT * D_MODEL],
                values: vec![0; CONTEXT * D_MODEL],
            })
            .collect();
        Self {
            layers,
            len: 0,
            scores: Vec::with_capacity(CONTEXT),
        }
    }
}

/// A generation in progress: yields completion tokens one by one (see
/// [`ReferenceModel::stream`]).
#[derive(Debug, Clone)]
pub struct Generation<'a> {
    model: &'a ReferenceModel,
    state: State,
    /// Final normalised hidden state of the last consumed position.
    hidden: Vec<i32>,
    /// The last token yielded, fed through the model only when the next one is asked for, so
    /// the final token costs no forward pass.
    pending: Option<u32>,
    produced: usize,
    max_tokens: usize,
    ended_by_end_token: bool,
    done: bool,
}

impl Generation<'_> {
    /// Whether generation stopped because the model chose the end token (OpenAI's
    /// `finish_reason: "stop"`), as opposed to reaching `max_tokens` (`"length"`). Meaningful
    /// once the iterator has returned `None`.
    pub fn ended_by_end_token(&self) -> bool {
        self.ended_by_end_token
    }

    /// Tokens yielded so far.
    pub fn produced(&self) -> usize {
        self.produced
    }
}

impl Iterator for Generation<'_> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        if self.done {
            return None;
        }
        if self.produced >= self.max_tokens {
            self.done = true;
            return None;
        }
        if let Some(token) = self.pending.take() {
            self.model.forward(&mut self.state, token, &mut self.hidden);
        }
        let token = self.model.pick(&self.hidden);
        if token == END_TOKEN {
            self.ended_by_end_token = true;
            self.done = true;
            return None;
        }
        self.produced += 1;
        self.pending = Some(token);
        Some(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{decode, encode_chat, ChatTurn, DEFAULT_SEED};

    fn prompt(text: &str) -> Vec<u32> {
        encode_chat(&[ChatTurn {
            role: "user",
            content: text,
        }])
    }

    #[test]
    fn same_prompt_same_output() {
        let model = ReferenceModel::new(DEFAULT_SEED);
        let p = prompt("What is the capital of France?");
        assert_eq!(model.generate(&p, 40), model.generate(&p, 40));
        // A second model built from the same seed agrees too.
        let other = ReferenceModel::new(DEFAULT_SEED);
        assert_eq!(model.generate(&p, 40), other.generate(&p, 40));
    }

    #[test]
    fn golden_output() {
        let model = ReferenceModel::new(DEFAULT_SEED);
        let out = decode(&model.generate(&prompt("Hello, gonka!"), 32));
        assert_eq!(out, GOLDEN);
    }

    /// Recorded once; a change here is a change of the reference model (every validator must
    /// upgrade together), never an accident.
    const GOLDEN: &str = "aebuauQuQutuQuQQQ8ut\"(Q\"Q\"Qt\"atL";

    #[test]
    fn different_prompts_differ() {
        let model = ReferenceModel::new(DEFAULT_SEED);
        let a = model.generate(&prompt("What is the capital of France?"), 32);
        let b = model.generate(&prompt("Write a haiku about GPUs."), 32);
        assert_ne!(a, b);
    }

    #[test]
    fn different_seeds_differ() {
        let p = prompt("Hello");
        let a = ReferenceModel::new(1).generate(&p, 32);
        let b = ReferenceModel::new(2).generate(&p, 32);
        assert_ne!(a, b);
    }

    #[test]
    fn max_tokens_respected() {
        let model = ReferenceModel::new(DEFAULT_SEED);
        let p = prompt("Count to ten.");
        for max in [0, 1, 5, 17] {
            assert!(model.generate(&p, max).len() <= max);
        }
        let long = model.generate(&p, 300);
        let short = model.generate(&p, 17);
        // A shorter budget yields a prefix of the longer completion.
        assert_eq!(&long[..short.len()], &short[..]);
    }

    #[test]
    fn streaming_matches_batch() {
        let model = ReferenceModel::new(DEFAULT_SEED);
        let p = prompt("Stream me a story.");
        let batch = model.generate(&p, 64);
        let mut streamed = Vec::new();
        let mut generation = model.stream(&p, 64);
        for token in generation.by_ref() {
            streamed.push(token);
        }
        assert_eq!(streamed, batch);
        assert_eq!(generation.produced(), batch.len());
        assert_eq!(generation.ended_by_end_token(), batch.len() < 64);
    }

    #[test]
    fn output_is_printable_ascii() {
        let model = ReferenceModel::new(DEFAULT_SEED);
        for text in [
            "",
            "a",
            "\u{1F600} emoji",
            "long prompt ".repeat(40).as_str(),
        ] {
            for t in model.generate(&prompt(text), 40) {
                assert!(t == u32::from(b'\n') || (0x20..=0x7e).contains(&t));
            }
        }
    }

    #[test]
    fn position_logits_agree_with_decoding() {
        let model = ReferenceModel::new(DEFAULT_SEED);
        let p = prompt("Which token comes next?");
        let logits = model.position_logits(&p);
        assert_eq!(logits.len(), p.len());
        assert!(logits.iter().all(|row| row.len() == crate::VOCAB_SIZE));
        // The greedy choice after the whole prompt is the best allowed logit of the last row.
        let last = &logits[p.len() - 1];
        let mut best = (i64::MIN, END_TOKEN);
        for token in allowed_tokens() {
            if last[token as usize] > best.0 {
                best = (last[token as usize], token);
            }
        }
        let decoded = model.generate(&p, 1);
        assert_eq!(decoded.first().copied().unwrap_or(END_TOKEN), best.1);
        // The same weights served through `from_weights` give the same logits.
        let copy = ReferenceModel::from_weights(DEFAULT_SEED, model.weights().clone());
        assert_eq!(copy.position_logits(&p), logits);
        assert_eq!(copy.seed(), DEFAULT_SEED);
    }

    #[test]
    fn empty_and_long_prompts_work() {
        let model = ReferenceModel::new(DEFAULT_SEED);
        let _ = model.generate(&[], 8);
        // Longer than the context: only the last CONTEXT tokens are read.
        let long: Vec<u32> = (0..1000u32).map(|i| 0x61 + i % 26).collect();
        let tail = long[long.len() - CONTEXT..].to_vec();
        assert_eq!(model.generate(&long, 8), model.generate(&tail, 8));
    }
}
