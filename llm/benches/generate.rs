//! gonka-llm throughput on the real model: `cargo bench -p gonka-llm`.
//!
//! Prefill and decode tokens/s at 1 and 2 threads, on this crate's kernel (`exact`) and on
//! candle's quantized matmul with the weights as loaded (Q4_1) and requantized to Q8_0, and the time of a validator's teacher-forced scoring of a 64-token
//! answer against the time of generating it. Each configuration runs in a child process of
//! this binary, because candle sizes its thread pools once per process.
//!
//! The results are also written as JSON to `target/gonka-llm-bench.json`, which
//! `scripts/bench-llm-anchor.sh` reads to run llama.cpp (llama-cpp-python) on the same
//! tokens and print both side by side. `GONKA_LLM_BENCH_CONFIGS=1:exact,2:candle_q8_0` picks
//! configurations; the model path comes from `GONKA_LLM_MODEL` or the fetch script's default.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use gonka_llm::{ChatMessage, GenerateParams, Llm, LoadOptions, WeightFormat};

const CHILD_ENV: &str = "GONKA_LLM_BENCH_CHILD";
const REPEATS: usize = 3;
const DECODE_TOKENS: usize = 128;
const ANSWER_TOKENS: usize = 64;

fn model_path() -> PathBuf {
    std::env::var_os("GONKA_LLM_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(gonka_llm::default_model_path)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// A chat prompt of ~130 tokens (prefill) and a story request that runs past 128 tokens.
fn prompts(llm: &Llm) -> (Vec<u32>, Vec<u32>) {
    let long = "Summarise the following text in one sentence. The river rose slowly through the \
        night, covering the lower fields and the old stone bridge. By morning the villagers had \
        moved their animals to the hills, and the miller was counting sacks of flour on the \
        upper floor of his mill. Nobody in the village remembered a flood like it, although \
        the oldest woman said her grandmother had spoken of one, long before the railway came \
        to the valley and the new road was built along the northern bank.";
    let prefill = llm
        .chat_prompt(&[ChatMessage::new("user", long)])
        .expect("chat prompt");
    let story = llm
        .chat_prompt(&[ChatMessage::new(
            "user",
            "Write a long, detailed story about a dragon who learns to bake bread.",
        )])
        .expect("chat prompt");
    (prefill, story)
}

fn child(spec: &str) {
    let (threads, format) = spec.split_once(':').expect("threads:format");
    let threads: usize = threads.parse().expect("thread count");
    let weights = match format {
        "exact" => WeightFormat::Exact,
        "candle_q4_1" => WeightFormat::CandleAsLoaded,
        "candle_q8_0" => WeightFormat::CandleQ8_0,
        other => panic!("unknown weight format {other}"),
    };
    gonka_llm::set_threads(threads).expect("set threads");
    let t = Instant::now();
    let llm = Llm::load(model_path(), LoadOptions { weights }).expect("load the model");
    let load_s = t.elapsed().as_secs_f64();
    let (prefill_prompt, story) = prompts(&llm);
    let greedy = |max_tokens, top_logprobs| GenerateParams {
        max_tokens,
        top_logprobs,
        ..GenerateParams::default()
    };
    // Warm-up (pools, caches).
    llm.generate(&story, &greedy(4, 0), |_| true).unwrap();

    let prefill_s = median(
        (0..REPEATS)
            .map(|_| {
                let t = Instant::now();
                llm.generate(&prefill_prompt, &greedy(1, 0), |_| true)
                    .unwrap();
                t.elapsed().as_secs_f64()
            })
            .collect(),
    );
    // Decode: from the first generated token to the last, timed in the streaming callback.
    let mut decoded = Vec::new();
    let decode_tps = median(
        (0..REPEATS)
            .map(|_| {
                let mut stamps = Vec::new();
                let g = llm
                    .generate(&story, &greedy(DECODE_TOKENS, 0), |_| {
                        stamps.push(Instant::now());
                        true
                    })
                    .unwrap();
                decoded = g.tokens;
                let span = stamps[stamps.len() - 1] - stamps[0];
                (stamps.len() - 1) as f64 / span.as_secs_f64()
            })
            .collect(),
    );

    // Validation: generate a 64-token answer with top-5 logprobs, then score it in one pass.
    let mut answer = Vec::new();
    let gen_s = median(
        (0..REPEATS)
            .map(|_| {
                let t = Instant::now();
                let g = llm
                    .generate(&story, &greedy(ANSWER_TOKENS, 5), |_| true)
                    .unwrap();
                let s = t.elapsed().as_secs_f64();
                answer = g.tokens;
                s
            })
            .collect(),
    );
    let score_s = median(
        (0..REPEATS)
            .map(|_| {
                let t = Instant::now();
                llm.score(&story, &answer, 5).unwrap();
                t.elapsed().as_secs_f64()
            })
            .collect(),
    );
    let ids = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    // One JSON object per child on stdout's last line; the parent collects them.
    println!(
        "{{\"threads\":{threads},\"weights\":\"{format}\",\"load_s\":{load_s:.3},\
         \"prefill_tokens\":{},\"prefill_s\":{prefill_s:.5},\"prefill_tps\":{:.1},\
         \"decode_tokens\":{},\"decode_tps\":{decode_tps:.1},\
         \"answer_tokens\":{},\"generate_s\":{gen_s:.5},\"score_s\":{score_s:.5},\
         \"score_over_generate\":{:.4},\
         \"prefill_prompt\":[{}],\"decode_prompt\":[{}],\"decoded\":[{}]}}",
        prefill_prompt.len(),
        prefill_prompt.len() as f64 / prefill_s,
        decoded.len(),
        answer.len(),
        score_s / gen_s,
        ids(&prefill_prompt),
        ids(&story),
        ids(&decoded),
    );
}

fn field<'a>(json: &'a str, key: &str) -> &'a str {
    let at = json
        .find(&format!("\"{key}\":"))
        .unwrap_or_else(|| panic!("{key} in {json}"));
    let rest = &json[at + key.len() + 3..];
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    rest[..end].trim_matches('"')
}

fn main() {
    if let Ok(spec) = std::env::var(CHILD_ENV) {
        child(&spec);
        return;
    }
    // `cargo bench` passes `--bench`; a filter argument is not supported.
    let path = model_path();
    if !path.is_file() {
        eprintln!(
            "skip: model {} missing (run scripts/fetch-model.sh)",
            path.display()
        );
        if std::env::var_os("CI").is_some() {
            std::process::exit(1);
        }
        return;
    }
    let configs = std::env::var("GONKA_LLM_BENCH_CONFIGS").unwrap_or_else(|_| {
        "1:exact,2:exact,1:candle_q4_1,2:candle_q4_1,1:candle_q8_0,2:candle_q8_0".into()
    });
    let exe = std::env::current_exe().expect("own path");
    let mut results = Vec::new();
    println!(
        "{:>7} {:>12} {:>8} {:>14} {:>13} {:>12} {:>10} {:>9}",
        "threads",
        "weights",
        "load s",
        "prefill tok/s",
        "decode tok/s",
        "generate ms",
        "score ms",
        "score/gen"
    );
    for spec in configs.split(',') {
        let out = Command::new(&exe)
            .env(CHILD_ENV, spec)
            .output()
            .expect("run the bench child");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let Some(line) = stdout.lines().rev().find(|l| l.starts_with('{')) else {
            panic!(
                "bench child {spec} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        println!(
            "{:>7} {:>12} {:>8} {:>14} {:>13} {:>12.1} {:>10.1} {:>8.1}%",
            field(line, "threads"),
            field(line, "weights"),
            field(line, "load_s"),
            format!(
                "{} ({} tok)",
                field(line, "prefill_tps"),
                field(line, "prefill_tokens")
            ),
            format!(
                "{} ({} tok)",
                field(line, "decode_tps"),
                field(line, "decode_tokens")
            ),
            field(line, "generate_s").parse::<f64>().unwrap() * 1e3,
            field(line, "score_s").parse::<f64>().unwrap() * 1e3,
            field(line, "score_over_generate").parse::<f64>().unwrap() * 100.0,
        );
        results.push(line.to_string());
    }
    let json_path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/gonka-llm-bench.json");
    std::fs::write(&json_path, format!("[\n{}\n]\n", results.join(",\n")))
        .expect("write the bench results");
    println!("results: {}", json_path.display());
}
