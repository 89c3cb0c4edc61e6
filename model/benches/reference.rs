//! Tokens per second of the reference model on one core.
//!
//! `cargo bench -p gonka-model --bench reference` (release). `cargo test -p gonka-model
//! --bench reference` runs the same measurement in the debug profile.

// The model itself reads no clock (the workspace clippy.toml forbids it); the bench must.
#![allow(clippy::disallowed_methods)]

use std::time::Instant;

use gonka_model::{encode_chat, ChatTurn, ReferenceModel, DEFAULT_SEED};

fn main() {
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let started = Instant::now();
    let model = ReferenceModel::new(DEFAULT_SEED);
    println!(
        "reference model ({profile}): weights generated in {:.1} ms",
        started.elapsed().as_secs_f64() * 1e3
    );
    let long = "lorem ipsum dolor sit amet ".repeat(10);
    let prompts = ["Hello, gonka!", "Write a haiku about GPUs.", long.as_str()];
    // Longer than the attention window, so decoding also runs with a full, sliding cache.
    let max_tokens = 512;
    let (mut prompt_total, mut prefill_secs, mut generated, mut decode_secs) = (0, 0.0, 0, 0.0);
    for text in prompts {
        let tokens = encode_chat(&[ChatTurn {
            role: "user",
            content: text,
        }]);
        let t0 = Instant::now();
        let generation = model.stream(&tokens, max_tokens);
        let t1 = Instant::now();
        let out: Vec<u32> = generation.collect();
        let t2 = Instant::now();
        prompt_total += tokens.len();
        prefill_secs += (t1 - t0).as_secs_f64();
        generated += out.len();
        decode_secs += (t2 - t1).as_secs_f64();
    }
    println!(
        "prefill: {prompt_total} prompt tokens in {:.3} s = {:.0} tokens/s",
        prefill_secs,
        prompt_total as f64 / prefill_secs
    );
    println!(
        "decode:  {generated} generated tokens in {:.3} s = {:.0} tokens/s",
        decode_secs,
        generated as f64 / decode_secs
    );
}
