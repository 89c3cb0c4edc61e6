//! gonka's language model runtime: a llama-architecture GGUF model (SmolLM2-135M-Instruct,
//! fetched by `scripts/fetch-model.sh`) on candle's CPU quantized kernels.
//!
//! [`Llm::load`] reads the weights, the tokenizer ([`Tokenizer`], from the GGUF's own
//! metadata) and the chat template. [`Llm::generate`] samples with a KV cache and reports each
//! token with its log-probability and top-k alternatives; [`Llm::score`] re-scores given output
//! tokens after a prompt in one teacher-forced forward pass, which is how a validator checks an
//! executor's answer. The chain compares integers: [`logprob_to_fixed`].
//!
//! Log-probabilities are the log-softmax of the model's raw logits, before temperature and
//! top-p: they describe the model, not the sampler, so an answer sampled at any temperature is
//! scored the same way by generation and by a validator's teacher-forced pass.
//!
//! Weights: by default ([`WeightFormat::Exact`]) the matrices run on this crate's kernel
//! (`kernels.rs`): the file's Q4_1 blocks used as stored, activations quantized to int8 per
//! block of 32 (as llama.cpp does for these weights) and exact integer block sums — AVX-VNNI or
//! AVX2 chosen at run time (binaries stay portable: no `target-cpu=native`) with a
//! bit-identical scalar fallback —, so a row's result does not depend on the CPU, the thread
//! count or the rows computed with it.
//! candle 0.11's Q4_1 vec-dot is scalar, and its Q8_0 kernels round activations to int8 with a
//! batch-dependent path, so a teacher-forced row drifted ~0.1 in log-probability from the same
//! row decoded alone; both candle paths stay selectable and `benches/generate.rs` measures all
//! three.
//!
//! Logprobs validation (`gonka_proto::scored`) compares, per output position, an executor's
//! log-probabilities with a validator's: every generated token, plus the end-of-generation
//! token when the model stopped ([`Generation::stop`]), so a validator scores
//! `tokens ++ [stop]` with [`Llm::score`] and sees whether the model would really have stopped
//! there. `examples/validation_rates.rs` measures how far honest executors on other kernels and
//! altered models (the `testing` feature) land from this crate's exact scores.

mod chat;
mod kernels;
mod model;
mod sampling;
mod tokenizer;
mod variant;

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use candle_core::quantized::gguf_file::Content;

pub use chat::ChatMessage;
pub use tokenizer::Tokenizer;

use model::Model;
use sampling::{log_softmax, top_k, Rng};
use tokenizer::Utf8Stream;

/// The file name `scripts/fetch-model.sh` stores the model under.
pub const MODEL_FILE_NAME: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// The largest number of alternatives [`GenerateParams::top_logprobs`] and [`Llm::score`] report
/// per position (OpenAI's limit).
pub const MAX_TOP_LOGPROBS: usize = 20;

/// Errors of loading and running the model.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The model file does not exist.
    #[error("model file {} not found: run scripts/fetch-model.sh (or point GONKA_LLM_MODEL at a copy)", path.display())]
    ModelMissing {
        /// The path that was tried.
        path: PathBuf,
    },
    /// The model file could not be read.
    #[error("reading model {}: {message}", path.display())]
    Io {
        /// The model file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The GGUF content is not a model this runtime runs.
    #[error("unsupported model file: {0}")]
    Format(String),
    /// The chat template failed to render.
    #[error("chat template: {0}")]
    Template(String),
    /// A request the model cannot serve (empty prompt, too long, k too large…).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// Thread count set after the first model was loaded.
    #[error(
        "threads must be set before the first model is loaded (candle's pool is already sized)"
    )]
    ThreadsAlreadySet,
    /// A tensor operation failed.
    #[error("model computation: {0}")]
    Compute(#[from] candle_core::Error),
}

/// How the weight matrices are held and multiplied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WeightFormat {
    /// This crate's kernel: the file's Q4_1 (and Q8_0) blocks used as stored, int8 activations,
    /// AVX-VNNI or AVX2 picked at run time with a bit-identical scalar fallback. Results do not
    /// depend on the CPU, the thread count or the batch: a validator's teacher-forced pass
    /// reproduces generation exactly.
    #[default]
    Exact,
    /// candle's quantized matmul on the weights as stored (Q4_1): its Q4_1 vec-dot is scalar.
    CandleAsLoaded,
    /// candle's quantized matmul on the weights requantized to Q8_0 at load: AVX2 and
    /// AVX512-VNNI kernels, int8 activations; a batched row may differ from the same row alone.
    CandleQ8_0,
}

/// Options of [`Llm::load`].
#[derive(Debug, Clone, Copy, Default)]
pub struct LoadOptions {
    /// How the weight matrices are held.
    pub weights: WeightFormat,
}

/// Sampling parameters of [`Llm::generate`].
#[derive(Debug, Clone)]
pub struct GenerateParams {
    /// The most tokens to generate (the stop token not counted).
    pub max_tokens: usize,
    /// Softmax temperature; 0 means greedy (the most likely token, lowest id on ties).
    pub temperature: f32,
    /// Nucleus sampling: sample among the most likely tokens whose probabilities add up to at
    /// least this (1 keeps all). Ignored when greedy.
    pub top_p: f32,
    /// Seed of the sampler's PRNG: equal seeds give equal outputs.
    pub seed: u64,
    /// How many alternatives to report per generated token, at most [`MAX_TOP_LOGPROBS`].
    pub top_logprobs: usize,
}

impl Default for GenerateParams {
    fn default() -> Self {
        Self {
            max_tokens: 256,
            temperature: 0.0,
            top_p: 1.0,
            seed: 0,
            top_logprobs: 0,
        }
    }
}

/// One position's log-probabilities.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenLogprobs {
    /// The token at this position (generated, or given to [`Llm::score`]).
    pub token: u32,
    /// Its log-probability (natural log, ≤ 0).
    pub logprob: f32,
    /// The most likely tokens with their log-probabilities, most likely first (lower id first
    /// on ties).
    pub top: Vec<(u32, f32)>,
}

/// A generated token, as the streaming callback sees it.
#[derive(Debug)]
pub struct TokenEvent<'a> {
    /// The token's log-probabilities (and the token id).
    pub logprobs: &'a TokenLogprobs,
    /// The text this token completes: may be empty while a UTF-8 character is split across
    /// tokens, and then carries the whole character with the token that finishes it.
    pub text: &'a str,
}

/// Why generation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// The model produced an end-of-generation token (`<|im_end|>`, eos).
    Stop,
    /// `max_tokens` were generated.
    Length,
    /// The caller's `on_token` asked to stop.
    Abandoned,
}

impl FinishReason {
    /// OpenAI's name for it: `stop` or `length`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::Length => "length",
            Self::Abandoned => "abandoned",
        }
    }
}

/// The result of [`Llm::generate`].
#[derive(Debug, Clone)]
pub struct Generation {
    /// The generated tokens, without the stop token.
    pub tokens: Vec<u32>,
    /// Their text.
    pub text: String,
    /// Per generated token: its log-probability and the top alternatives.
    pub logprobs: Vec<TokenLogprobs>,
    /// The end-of-generation token the model produced (`<|im_end|>`, eos), with its
    /// log-probability and top alternatives like any generated token's: present iff
    /// `finish_reason` is [`FinishReason::Stop`]. It is not part of `tokens` or `text`; a
    /// validator scores it as one more position (`tokens ++ [stop.token]`), which is how it
    /// tells a complete answer from one cut short with a stop token appended.
    pub stop: Option<TokenLogprobs>,
    /// Why generation stopped.
    pub finish_reason: FinishReason,
    /// The number of prompt tokens.
    pub prompt_tokens: usize,
}

/// `round(logprob * 2^16)`: the fixed-point form the chain compares (ties away from zero;
/// `-inf` and anything below `i32::MIN / 2^16` saturate to `i32::MIN`), at most 0: a
/// log-softmax that rounds a hair above 0 for a certain token counts as 0, as the chain
/// requires of every log-probability.
pub fn logprob_to_fixed(logprob: f32) -> i32 {
    let x = (logprob as f64 * 65536.0).round();
    // `as` saturates at the i32 range and maps NaN to 0.
    (x as i32).min(0)
}

/// [`logprob_to_fixed`] as an `i64`.
pub fn logprob_to_fixed_i64(logprob: f32) -> i64 {
    let x = (logprob as f64 * 65536.0).round();
    x as i64
}

static MODEL_LOADED: AtomicBool = AtomicBool::new(false);

/// Sets the number of CPU threads the model's kernels use (candle's pools are sized once per
/// process): call before the first [`Llm::load`]. 1 or 2 on the project's machines.
pub fn set_threads(threads: usize) -> Result<(), Error> {
    if threads == 0 {
        return Err(Error::InvalidRequest("threads must be at least 1".into()));
    }
    if MODEL_LOADED.load(Ordering::SeqCst) {
        return Err(Error::ThreadsAlreadySet);
    }
    // candle sizes its barrier pool (which this crate's kernel uses too) from
    // CANDLE_NUM_THREADS and its rayon pool (softmax, norms) from RAYON_NUM_THREADS, each on
    // first use.
    std::env::set_var("CANDLE_NUM_THREADS", threads.to_string());
    std::env::set_var("RAYON_NUM_THREADS", threads.to_string());
    Ok(())
}

/// Where `scripts/fetch-model.sh` stores the model: `${GONKA_HOME:-$HOME/.gonka}/models/`.
pub fn default_model_path() -> PathBuf {
    let home = std::env::var_os("GONKA_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".gonka")
        });
    home.join("models").join(MODEL_FILE_NAME)
}

/// A loaded model: weights, tokenizer and chat template. Read-only, so one instance serves
/// concurrent requests (each call keeps its own KV cache).
pub struct Llm {
    model: Model,
    tokenizer: Tokenizer,
    template: chat::ChatTemplate,
    weights: WeightFormat,
}

impl std::fmt::Debug for Llm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Llm")
            .field("layers", &self.model.cfg.n_layer)
            .field("width", &self.model.cfg.n_embd)
            .field("vocab", &self.tokenizer.vocab_size())
            .field("weights", &self.weights)
            .finish()
    }
}

impl Llm {
    /// Loads a GGUF model file.
    pub fn load(path: impl AsRef<Path>, options: LoadOptions) -> Result<Self, Error> {
        Self::load_variant(path.as_ref(), options, variant::Variant::default())
    }

    fn load_variant(
        path: &Path,
        options: LoadOptions,
        variant: variant::Variant,
    ) -> Result<Self, Error> {
        if !path.is_file() {
            return Err(Error::ModelMissing {
                path: path.to_path_buf(),
            });
        }
        let io = |e: &dyn std::fmt::Display| Error::Io {
            path: path.to_path_buf(),
            message: e.to_string(),
        };
        let mut reader = BufReader::new(File::open(path).map_err(|e| io(&e))?);
        let content = Content::read(&mut reader).map_err(|e| io(&e))?;
        MODEL_LOADED.store(true, Ordering::SeqCst);
        let tokenizer = Tokenizer::from_gguf(&content)?;
        let template = chat::ChatTemplate::from_gguf(&content, &tokenizer)?;
        let model = Model::load(&content, &mut reader, options.weights, variant)?;
        Ok(Self {
            model,
            tokenizer,
            template,
            weights: options.weights,
        })
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// How the weights are held.
    pub fn weight_format(&self) -> WeightFormat {
        self.weights
    }

    /// The model's context length in tokens (prompt plus output).
    pub fn context_length(&self) -> usize {
        self.model.cfg.context_length
    }

    /// Renders the GGUF's chat template over OpenAI-style messages, with
    /// `add_generation_prompt=true`.
    pub fn render_chat(&self, messages: &[ChatMessage]) -> Result<String, Error> {
        self.template.render(messages)
    }

    /// The prompt tokens of a chat: the rendered template, control tokens parsed.
    pub fn chat_prompt(&self, messages: &[ChatMessage]) -> Result<Vec<u32>, Error> {
        Ok(self.tokenizer.encode(&self.render_chat(messages)?, true))
    }

    /// Generates after `prompt`, calling `on_token` with every generated token as it comes
    /// (not with the stop token, which is reported in [`Generation::stop`]); `on_token`
    /// returns whether to go on, so a streaming caller whose client went away stops the
    /// generation ([`FinishReason::Abandoned`]).
    pub fn generate(
        &self,
        prompt: &[u32],
        params: &GenerateParams,
        mut on_token: impl FnMut(&TokenEvent<'_>) -> bool,
    ) -> Result<Generation, Error> {
        self.check_tokens(prompt, params.max_tokens, params.top_logprobs)?;
        if !(params.temperature >= 0.0 && params.temperature.is_finite()) {
            return Err(Error::InvalidRequest(format!(
                "temperature {} is not a finite number ≥ 0",
                params.temperature
            )));
        }
        if !(params.top_p > 0.0 && params.top_p <= 1.0) {
            return Err(Error::InvalidRequest(format!(
                "top_p {} is not in (0, 1]",
                params.top_p
            )));
        }
        let mut rng = Rng::new(params.seed);
        let mut cache = self.model.new_cache();
        let mut logits = self
            .model
            .forward(prompt, &mut cache, prompt.len() - 1..prompt.len())?
            .squeeze(0)?
            .to_vec1::<f32>()?;
        let mut out = Generation {
            tokens: Vec::new(),
            text: String::new(),
            logprobs: Vec::new(),
            stop: None,
            finish_reason: FinishReason::Length,
            prompt_tokens: prompt.len(),
        };
        let mut stream = Utf8Stream::default();
        let mut text = String::new();
        while out.tokens.len() < params.max_tokens {
            let lp = log_softmax(&logits);
            let token = if params.temperature == 0.0 {
                top_k(&lp, 1)[0].0
            } else {
                sampling::sample(&logits, params.temperature, params.top_p, &mut rng)
            };
            let entry = TokenLogprobs {
                token,
                logprob: lp[token as usize],
                top: top_k(&lp, params.top_logprobs),
            };
            if self.tokenizer.is_end_of_generation(token) {
                out.finish_reason = FinishReason::Stop;
                out.stop = Some(entry);
                break;
            }
            let piece = stream.push(self.tokenizer.token_bytes(token));
            text.push_str(&piece);
            let go_on = on_token(&TokenEvent {
                logprobs: &entry,
                text: &piece,
            });
            out.tokens.push(token);
            out.logprobs.push(entry);
            if !go_on {
                out.finish_reason = FinishReason::Abandoned;
                break;
            }
            if out.tokens.len() == params.max_tokens {
                break;
            }
            logits = self
                .model
                .forward(&[token], &mut cache, 0..1)?
                .squeeze(0)?
                .to_vec1::<f32>()?;
        }
        text.push_str(&stream.finish());
        out.text = text;
        Ok(out)
    }

    /// Teacher-forced scoring: runs `prompt` followed by `output` through the model in one
    /// forward pass and returns, for every output position, the log-probability of the given
    /// token and the `top_k` most likely tokens there — what a validator compares with an
    /// executor's reported log-probabilities. To check an answer that stopped, `output` ends
    /// with its stop token ([`Generation::stop`]): with [`WeightFormat::Exact`] the result equals
    /// generation's `logprobs` followed by its `stop` entry exactly.
    pub fn score(
        &self,
        prompt: &[u32],
        output: &[u32],
        top_k_n: usize,
    ) -> Result<Vec<TokenLogprobs>, Error> {
        self.check_tokens(prompt, output.len(), top_k_n)?;
        let vocab = self.tokenizer.vocab_size();
        if let Some(t) = output.iter().find(|t| **t as usize >= vocab) {
            return Err(Error::InvalidRequest(format!(
                "output token {t} is outside the vocabulary of {vocab}"
            )));
        }
        if output.is_empty() {
            return Ok(Vec::new());
        }
        let mut all = Vec::with_capacity(prompt.len() + output.len());
        all.extend_from_slice(prompt);
        all.extend_from_slice(output);
        // The logits at position i predict token i + 1: rows prompt.len() - 1 .. end - 1.
        let rows = prompt.len() - 1..all.len() - 1;
        let mut cache = self.model.new_cache();
        let logits = self
            .model
            .forward(&all, &mut cache, rows)?
            .to_vec2::<f32>()?;
        Ok(logits
            .iter()
            .zip(output)
            .map(|(row, &token)| {
                let lp = log_softmax(row);
                TokenLogprobs {
                    token,
                    logprob: lp[token as usize],
                    top: top_k(&lp, top_k_n),
                }
            })
            .collect())
    }

    fn check_tokens(&self, prompt: &[u32], more: usize, k: usize) -> Result<(), Error> {
        if prompt.is_empty() {
            return Err(Error::InvalidRequest("the prompt has no tokens".into()));
        }
        let vocab = self.tokenizer.vocab_size();
        if let Some(t) = prompt.iter().find(|t| **t as usize >= vocab) {
            return Err(Error::InvalidRequest(format!(
                "token {t} is outside the vocabulary of {vocab}"
            )));
        }
        if k > MAX_TOP_LOGPROBS {
            return Err(Error::InvalidRequest(format!(
                "{k} top log-probabilities asked, at most {MAX_TOP_LOGPROBS}"
            )));
        }
        let ctx = self.context_length();
        if prompt.len() + more > ctx {
            return Err(Error::InvalidRequest(format!(
                "{} prompt tokens plus {more} output tokens exceed the context of {ctx}",
                prompt.len()
            )));
        }
        Ok(())
    }
}

/// Deliberately altered models, for measuring logprobs validation
/// (`examples/validation_rates.rs`): the `testing` feature, not part of the release API.
#[cfg(feature = "testing")]
pub mod testing {
    use std::path::Path;

    pub use crate::variant::{Perturb, Variant};
    use crate::{Error, Llm, LoadOptions};

    /// Loads the model at `path` altered as `variant` says (noise on the weights, layers
    /// dropped): a cheating executor's model.
    pub fn load(
        path: impl AsRef<Path>,
        options: LoadOptions,
        variant: Variant,
    ) -> Result<Llm, Error> {
        Llm::load_variant(path.as_ref(), options, variant)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_model_is_shared_across_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<super::Llm>();
    }
}
