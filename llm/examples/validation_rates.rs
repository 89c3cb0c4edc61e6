//! Logprobs validation, measured: how far honest executors land from a validator's scores, and
//! how far cheats do, under `gonka_proto::scored::compare`.
//!
//! ```text
//! cargo run --release -p gonka-llm --example validation_rates -- [options]
//! ```
//!
//! Every executor answers the same chat prompts (written below) at temperature 0 and 0.7
//! (seeded) with top-k log-probabilities; its `ScoredOutput` (every generated token, plus the
//! stop position when it stopped) is compared with the validator's — this crate's exact
//! kernel, `Llm::score` over the executor's tokens and stop token — and the distance of each
//! answer is recorded. Honest executors: the exact kernel in this process and in a child
//! process at another thread count, candle's kernels (Q8_0 and Q4_1), llama.cpp
//! (`tests/llama/dump_logprobs.py`, when `tests/llama/.venv` exists). Cheats: the model with
//! noise on its weights, the model without its last layers, made-up log-probabilities, an
//! answer cut at half with a stop token appended. Prints the distances, the false-mismatch
//! and detection rates at candidate thresholds, a recommended threshold and the cost of
//! scoring against generating; writes everything to `target/validation-rates.json`
//! (`--report FILE` prints a results file again).
//!
//! Measured with the defaults (40 prompts × T 0 and 0.7, max_tokens 48, k 5, 1 thread; 24
//! minutes on the 2 shared cores), mean distance per answer p50 / max in nats: exact vs exact
//! at 1 and 2 threads 0 / 0 (bit-identical); llama.cpp 0.086 / 0.136; candle Q4_1
//! 0.085 / 0.112; candle Q8_0 0.119 / 0.193 — int8 activations move every logit by ~0.1, and
//! the top-k alternatives (tail tokens) carry most of the distance. Cheats: weights ±1 %
//! 0.141 / 0.226, inside the honest range; ±5 % 0.62; one layer fewer 1.65; made-up
//! log-probabilities 1.89; an answer cut at half 0.18 p50. At 0.4 nats (2× the worst honest
//! answer) no honest answer mismatches, and ±5 %, dropped layers and made-up log-probabilities
//! are all caught, but ±1 % never and a truncation only 7.5 % of the time: the mean dilutes the
//! one false stop position (~45 nats) over the answer. Bounding the worst position too
//! (20 nats, 2× the worst honest 9) catches 97.5 % of truncations with no false mismatch.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use gonka_llm::testing::{Perturb, Variant};
use gonka_llm::{
    logprob_to_fixed, ChatMessage, GenerateParams, Llm, LoadOptions, TokenLogprobs, WeightFormat,
};
use gonka_proto::disputes::{ScoredOutput, ScoredToken};
use gonka_proto::scored::{check_against, check_shape, compare, Distance};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

const HELP: &str = "\
validation_rates: false-mismatch and detection rates of logprobs validation (gonka_proto::scored)

usage: cargo run --release -p gonka-llm --example validation_rates -- [options]

  --model FILE            the GGUF model (default: $GONKA_LLM_MODEL or the fetch script's path)
  --threads N             kernel threads of this process (default 1)
  --prompts N             use the first N of the 48 built-in chat prompts (default 40)
  --max-tokens N          most tokens per answer (default 48)
  --k N                   top log-probabilities per position (default 5)
  --seed N                sampling seed of prompt i is N + i (default 1)
  --temperatures LIST     comma-separated (default 0,0.7)
  --perturb LIST          noise strengths of the perturbed-model cheats (default 0.01,0.05)
  --skip-layers LIST      layers dropped by the cheaper-model cheats (default 1,4)
  --no-spawn              skip the exact executor at another thread count (a child process)
  --no-llama-cpp          skip llama.cpp even if tests/llama/.venv exists
  --executor-json FILE    also score an honest executor's answers from FILE (repeatable):
                          the format --dump and tests/llama/dump_logprobs.py write
  --out FILE              the results (default target/validation-rates.json)

  --report FILE           only print the report of an earlier run's results file again
  --dump FILE             only run the exact executor and write its answers to FILE
  --write-prompts FILE    only write the prompt tokens and settings for dump_logprobs.py
  -h, --help              this text

Distances are gonka_proto::scored::compare's mean absolute difference per compared
log-probability, in 2^-16 nats; an answer is a mismatch at threshold T when !within(T).";

/// The chat prompts: short questions, instructions, code, lists, arithmetic.
const PROMPTS: &[&str] = &[
    "What is the capital of France?",
    "How many legs does a spider have?",
    "Why is the sky blue?",
    "What is photosynthesis?",
    "Who wrote Romeo and Juliet?",
    "What is the boiling point of water in Fahrenheit?",
    "How far is the Moon from the Earth?",
    "What causes the seasons on Earth?",
    "What is the difference between a virus and a bacterium?",
    "Is a tomato a fruit or a vegetable?",
    "Write a haiku about autumn leaves.",
    "Give me three tips for better sleep.",
    "Summarize the plot of Cinderella in two sentences.",
    "Translate 'Good morning, how are you?' into Spanish.",
    "Write a short thank-you note to a colleague who helped me move.",
    "Explain recursion to a ten-year-old.",
    "Describe a sunset over the ocean in one paragraph.",
    "Suggest a name for a bakery that sells only cinnamon rolls.",
    "Rewrite this sentence in the passive voice: The cat chased the mouse.",
    "Write a limerick about a programmer who loves coffee.",
    "Write a Python function that reverses a string.",
    "How do I read a file line by line in Rust?",
    "Write a SQL query that counts the users in each country.",
    "What does `git rebase` do?",
    "Write a JavaScript function that checks whether a number is prime.",
    "Explain what a hash map is and when to use one.",
    "Fix this Python code: for i in range(10) print(i)",
    "Write a bash one-liner that counts the lines of all .txt files in a directory.",
    "What is the difference between a process and a thread?",
    "Write a C function that returns the maximum of an array of integers.",
    "List five fruits that are rich in vitamin C.",
    "Name the planets of the solar system in order.",
    "List the steps to make a cup of tea.",
    "Give me a packing list for a weekend camping trip.",
    "List four famous painters and one painting by each.",
    "What are the primary colors?",
    "List three advantages and three disadvantages of remote work.",
    "Name five programming languages and what they are mostly used for.",
    "What is 17 times 23?",
    "If a train travels 60 miles in 1.5 hours, what is its average speed?",
    "Solve for x: 2x + 6 = 14.",
    "What is the square root of 144?",
    "Convert 5 kilometers to miles.",
    "Tell me a fun fact about octopuses.",
    "What should I cook for dinner tonight with rice, eggs and spinach?",
    "Write the opening line of a mystery novel.",
    "Hello! Who are you?",
    "Explain the rules of tic-tac-toe.",
];

/// Candidate thresholds, in nats.
const THRESHOLDS_NATS: &[f64] = &[0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 1.0];

/// Per-position thresholds of the comparison table, in nats.
const WORST_NATS: [f64; 6] = [1.0, 2.0, 5.0, 10.0, 20.0, 40.0];

/// The recommended threshold is at least this many times the worst honest answer's distance.
const SAFETY_FACTOR: f64 = 2.0;

const UNIT: f64 = 65536.0;

struct Opts {
    model: PathBuf,
    threads: usize,
    prompts: usize,
    max_tokens: usize,
    k: usize,
    seed: u64,
    temperatures: Vec<f32>,
    perturb: Vec<f32>,
    skip_layers: Vec<usize>,
    spawn: bool,
    llama_cpp: bool,
    executor_json: Vec<PathBuf>,
    out: PathBuf,
    dump: Option<PathBuf>,
    write_prompts: Option<PathBuf>,
    report: Option<PathBuf>,
}

fn workspace_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the crate is in the workspace")
        .to_path_buf()
}

fn list<T: std::str::FromStr>(flag: &str, s: &str) -> Result<Vec<T>, String> {
    s.split(',')
        .filter(|x| !x.is_empty())
        .map(|x| {
            x.trim()
                .parse()
                .map_err(|_| format!("{flag}: cannot parse {x:?}"))
        })
        .collect()
}

fn parse_args() -> Result<Opts, String> {
    let mut o = Opts {
        model: std::env::var_os("GONKA_LLM_MODEL")
            .map(PathBuf::from)
            .unwrap_or_else(gonka_llm::default_model_path),
        threads: 1,
        prompts: 40,
        max_tokens: 48,
        k: 5,
        seed: 1,
        temperatures: vec![0.0, 0.7],
        perturb: vec![0.01, 0.05],
        skip_layers: vec![1, 4],
        spawn: true,
        llama_cpp: true,
        executor_json: Vec::new(),
        out: workspace_dir().join("target").join("validation-rates.json"),
        dump: None,
        write_prompts: None,
        report: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        let num = |v: String| -> Result<usize, String> {
            v.parse().map_err(|_| format!("{flag}: not a number: {v}"))
        };
        match flag.as_str() {
            "-h" | "--help" => {
                println!("{HELP}");
                std::process::exit(0);
            }
            "--model" => o.model = value()?.into(),
            "--threads" => o.threads = num(value()?)?,
            "--prompts" => o.prompts = num(value()?)?,
            "--max-tokens" => o.max_tokens = num(value()?)?,
            "--k" => o.k = num(value()?)?,
            "--seed" => o.seed = num(value()?)? as u64,
            "--temperatures" => o.temperatures = list(&flag, &value()?)?,
            "--perturb" => o.perturb = list(&flag, &value()?)?,
            "--skip-layers" => o.skip_layers = list(&flag, &value()?)?,
            "--no-spawn" => o.spawn = false,
            "--no-llama-cpp" => o.llama_cpp = false,
            "--executor-json" => o.executor_json.push(value()?.into()),
            "--out" => o.out = value()?.into(),
            "--dump" => o.dump = Some(value()?.into()),
            "--write-prompts" => o.write_prompts = Some(value()?.into()),
            "--report" => o.report = Some(value()?.into()),
            other => return Err(format!("unknown argument {other} (see --help)")),
        }
    }
    if o.prompts == 0 || o.prompts > PROMPTS.len() {
        return Err(format!("--prompts must be 1 to {}", PROMPTS.len()));
    }
    if o.k == 0 || o.k > gonka_llm::MAX_TOP_LOGPROBS {
        return Err(format!("--k must be 1 to {}", gonka_llm::MAX_TOP_LOGPROBS));
    }
    if o.max_tokens == 0 || o.temperatures.is_empty() {
        return Err("--max-tokens and --temperatures must not be empty or 0".into());
    }
    Ok(o)
}

/// One position as an executor reports it (the chain's fixed point).
#[derive(Serialize, Deserialize, Clone, Debug)]
struct Position {
    token: u32,
    logprob: i32,
    top: Vec<(u32, i32)>,
}

/// One executor answer: the tokens, the stop token if it stopped, and per position (the
/// tokens, then the stop token) what the executor reports.
#[derive(Serialize, Deserialize, Clone, Debug)]
struct Answer {
    prompt: usize,
    temperature: f32,
    prompt_tokens: Vec<u32>,
    tokens: Vec<u32>,
    stop: Option<u32>,
    positions: Vec<Position>,
    generate_s: f64,
}

/// What `--dump` and `tests/llama/dump_logprobs.py` write.
#[derive(Serialize, Deserialize)]
struct AnswerFile {
    source: String,
    k: usize,
    max_tokens: usize,
    answers: Vec<Answer>,
}

fn position(lp: &TokenLogprobs) -> Position {
    Position {
        token: lp.token,
        logprob: logprob_to_fixed(lp.logprob),
        top: lp
            .top
            .iter()
            .map(|(t, l)| (*t, logprob_to_fixed(*l)))
            .collect(),
    }
}

fn scored(prompt_tokens: usize, positions: &[Position]) -> ScoredOutput {
    ScoredOutput {
        prompt_tokens: prompt_tokens as u64,
        positions: positions
            .iter()
            .map(|p| ScoredToken {
                token: p.token,
                logprob: p.logprob,
                top_tokens: p.top.iter().map(|t| t.0).collect(),
                top_logprobs: p.top.iter().map(|t| t.1).collect(),
            })
            .collect(),
    }
}

fn chat_prompts(llm: &Llm, n: usize) -> Vec<Vec<u32>> {
    PROMPTS[..n]
        .iter()
        .map(|p| {
            llm.chat_prompt(&[ChatMessage::new("user", *p)])
                .expect("chat prompt")
        })
        .collect()
}

/// Runs `llm` as an executor over every prompt and temperature.
fn execute(llm: &Llm, prompts: &[Vec<u32>], o: &Opts, label: &str) -> Vec<Answer> {
    let mut answers = Vec::new();
    let t0 = Instant::now();
    for (i, prompt) in prompts.iter().enumerate() {
        for &temperature in &o.temperatures {
            let params = GenerateParams {
                max_tokens: o.max_tokens,
                temperature,
                top_p: 1.0,
                seed: o.seed + i as u64,
                top_logprobs: o.k,
            };
            let t = Instant::now();
            let g = llm.generate(prompt, &params, |_| true).expect("generate");
            let generate_s = t.elapsed().as_secs_f64();
            let mut positions: Vec<Position> = g.logprobs.iter().map(position).collect();
            positions.extend(g.stop.as_ref().map(position));
            answers.push(Answer {
                prompt: i,
                temperature,
                prompt_tokens: prompt.clone(),
                tokens: g.tokens,
                stop: g.stop.map(|s| s.token),
                positions,
                generate_s,
            });
        }
    }
    eprintln!(
        "  {label}: {} answers in {:.1} s",
        answers.len(),
        t0.elapsed().as_secs_f64()
    );
    answers
}

/// One answer checked by the validator.
#[derive(Serialize, Deserialize, Clone, Debug)]
struct Checked {
    prompt: usize,
    temperature: f32,
    tokens: usize,
    stopped: bool,
    total: u128,
    entries: u64,
    /// total / entries, in 2^-16 nats (unrounded).
    mean: f64,
    worst_position: u64,
    /// Mean |Δ| of the chosen tokens' own log-probabilities, in 2^-16 nats.
    token_mean: f64,
    /// Positions where both sides have the same most likely token.
    top1_agree: usize,
    generate_s: f64,
    score_s: f64,
    /// Whether the tokens equal the exact executor's answer to the same prompt and temperature.
    same_tokens_as_exact: Option<bool>,
}

struct Scenario {
    name: String,
    honest: bool,
    about: String,
    checked: Vec<Checked>,
}

/// The validator's side: score the executor's tokens (and stop token) and compare.
fn check(validator: &Llm, k: usize, a: &Answer, reference: Option<&[Answer]>) -> Checked {
    let executor = scored(a.prompt_tokens.len(), &a.positions);
    check_shape("executor", &executor).expect("a well-formed executor output");
    check_against("executor", &executor, k as u32, a.tokens.len() as u64)
        .expect("as many positions as tokens (and the stop)");
    let mut output = a.tokens.clone();
    output.extend(a.stop);
    assert_eq!(output.len(), a.positions.len(), "one position per token");
    let t = Instant::now();
    let v = validator
        .score(&a.prompt_tokens, &output, k)
        .expect("score");
    let score_s = t.elapsed().as_secs_f64();
    let v: Vec<Position> = v.iter().map(position).collect();
    let d: Distance =
        compare(&executor, &scored(a.prompt_tokens.len(), &v)).expect("the same tokens and prompt");
    let token_total: u64 = a
        .positions
        .iter()
        .zip(&v)
        .map(|(x, y)| (i64::from(x.logprob) - i64::from(y.logprob)).unsigned_abs())
        .sum();
    let top1_agree = a
        .positions
        .iter()
        .zip(&v)
        .filter(|(x, y)| x.top.first().map(|t| t.0) == y.top.first().map(|t| t.0))
        .count();
    Checked {
        prompt: a.prompt,
        temperature: a.temperature,
        tokens: a.tokens.len(),
        stopped: a.stop.is_some(),
        total: d.total,
        entries: d.entries,
        mean: if d.entries == 0 {
            0.0
        } else {
            d.total as f64 / d.entries as f64
        },
        worst_position: d.worst_position,
        token_mean: token_total as f64 / v.len().max(1) as f64,
        top1_agree,
        generate_s: a.generate_s,
        score_s,
        same_tokens_as_exact: reference.and_then(|r| {
            r.iter()
                .find(|x| x.prompt == a.prompt && x.temperature == a.temperature)
                .map(|x| x.tokens == a.tokens && x.stop == a.stop)
        }),
    }
}

fn check_all(
    validator: &Llm,
    k: usize,
    answers: &[Answer],
    reference: Option<&[Answer]>,
) -> Vec<Checked> {
    answers
        .iter()
        .map(|a| check(validator, k, a, reference))
        .collect()
}

/// Cheat: the executor reports log-probabilities it did not compute: each token as top-1 at
/// log-probability 0, then made-up alternatives (the next token ids) at -3, -4, … nats.
fn made_up(a: &Answer, k: usize, vocab: usize) -> Answer {
    let positions = a
        .positions
        .iter()
        .map(|p| {
            let mut top = vec![(p.token, 0)];
            for i in 1..k {
                let t = ((p.token as usize + i) % vocab) as u32;
                top.push((t, -((i as i32 + 2) << 16)));
            }
            Position {
                token: p.token,
                logprob: 0,
                top,
            }
        })
        .collect();
    Answer {
        positions,
        ..a.clone()
    }
}

/// Cheat: the honest answer cut at half with a stop token appended; honest scores up to the
/// cut, and at the stop position the claim that the stop token was the top-1 at
/// log-probability 0, followed by the honest alternatives there.
fn truncated(a: &Answer, k: usize, stop_token: u32) -> Option<Answer> {
    if a.tokens.len() < 2 {
        return None;
    }
    let cut = a.tokens.len() / 2;
    let honest = &a.positions[cut];
    let mut top = vec![(stop_token, 0)];
    top.extend(
        honest
            .top
            .iter()
            .filter(|(t, _)| *t != stop_token)
            .take(k - 1),
    );
    let mut positions = a.positions[..cut].to_vec();
    positions.push(Position {
        token: stop_token,
        logprob: 0,
        top,
    });
    Some(Answer {
        tokens: a.tokens[..cut].to_vec(),
        stop: Some(stop_token),
        positions,
        ..a.clone()
    })
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn sorted(xs: impl Iterator<Item = f64>) -> Vec<f64> {
    let mut v: Vec<f64> = xs.collect();
    v.sort_by(f64::total_cmp);
    v
}

fn rate(checked: &[Checked], threshold: u64) -> f64 {
    rate_where(checked, |d| !d.within(threshold))
}

/// The share of `checked` answers that `mismatched` says disagree.
fn rate_where(checked: &[Checked], mismatched: impl Fn(&Distance) -> bool) -> f64 {
    let over = checked
        .iter()
        .filter(|c| {
            mismatched(&Distance {
                total: c.total,
                entries: c.entries,
                worst_position: c.worst_position,
            })
        })
        .count();
    over as f64 / checked.len().max(1) as f64
}

/// Prints each scenario's rate under `mismatched` (false mismatches of honest ones, detection
/// of cheats) and returns them as JSON rows.
fn print_rates(scenarios: &[Scenario], mismatched: impl Fn(&Distance) -> bool) -> Vec<Value> {
    let mut rows = Vec::new();
    for s in scenarios {
        let r = rate_where(&s.checked, &mismatched);
        let what = if s.honest {
            "false mismatches"
        } else {
            "detected        "
        };
        println!("  {:<30} {what} {:>5.1}%", s.name, r * 100.0);
        rows.push(json!({"scenario": s.name, "honest": s.honest, "rate": r}));
    }
    rows
}

fn load(o: &Opts, weights: WeightFormat, variant: Variant) -> Llm {
    gonka_llm::testing::load(&o.model, LoadOptions { weights }, variant).expect("load the model")
}

fn write_json(path: &Path, value: &impl Serialize) {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).expect("create the output directory");
    }
    std::fs::write(path, serde_json::to_string(value).expect("json")).expect("write");
}

fn read_answers(path: &Path) -> AnswerFile {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}

/// The prompt tokens and settings `tests/llama/dump_logprobs.py` reads.
fn write_prompts(path: &Path, llm: &Llm, prompts: &[Vec<u32>], o: &Opts) {
    let tok = llm.tokenizer();
    let stop_tokens: Vec<u32> = (0..tok.vocab_size() as u32)
        .filter(|t| tok.is_end_of_generation(*t))
        .collect();
    let spec = json!({
        "k": o.k,
        "max_tokens": o.max_tokens,
        "seed": o.seed,
        "temperatures": o.temperatures,
        "stop_tokens": stop_tokens,
        "vocab": tok.vocab_size(),
        "prompts": prompts.iter().enumerate()
            .map(|(i, t)| json!({"id": i, "text": PROMPTS[i], "tokens": t}))
            .collect::<Vec<_>>(),
    });
    write_json(path, &spec);
}

/// Answers from another process or implementation, checked against this run's prompts.
fn external(
    file: AnswerFile,
    prompts: &[Vec<u32>],
    o: &Opts,
    validator: &Llm,
    reference: &[Answer],
) -> Scenario {
    assert_eq!(file.k, o.k, "{}: k differs", file.source);
    for a in &file.answers {
        assert_eq!(
            prompts.get(a.prompt),
            Some(&a.prompt_tokens),
            "{}: prompt {} has other tokens than this run's",
            file.source,
            a.prompt
        );
    }
    Scenario {
        name: String::new(),
        honest: true,
        checked: check_all(validator, o.k, &file.answers, Some(reference)),
        about: file.source,
    }
}

fn fmt_temp(t: f32) -> String {
    format!("{t}")
}

/// `--report`: the scenarios, generation times and settings of an earlier run's results.
fn report_again(mut o: Opts, path: &Path) {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let r: serde_json::Value = serde_json::from_str(&text).expect("a results file");
    let c = &r["config"];
    let num = |v: &serde_json::Value| v.as_u64().expect("a number") as usize;
    o.threads = num(&c["threads"]);
    o.prompts = num(&c["prompts"]);
    o.max_tokens = num(&c["max_tokens"]);
    o.k = num(&c["k"]);
    o.temperatures = serde_json::from_value(c["temperatures"].clone()).expect("temperatures");
    let scenarios = r["scenarios"]
        .as_array()
        .expect("scenarios")
        .iter()
        .map(|s| Scenario {
            name: s["name"].as_str().unwrap_or_default().into(),
            honest: s["honest"].as_bool().unwrap_or_default(),
            about: s["about"].as_str().unwrap_or_default().into(),
            checked: serde_json::from_value(s["answers"].clone()).expect("answers"),
        })
        .collect::<Vec<_>>();
    let times = r["timing"]["generate"]
        .as_array()
        .expect("generation times")
        .iter()
        .map(|t| {
            (
                t["executor"].as_str().unwrap_or_default().to_string(),
                t["seconds"].as_f64().unwrap_or_default(),
                num(&t["answers"]),
                num(&t["positions"]),
            )
        })
        .collect::<Vec<_>>();
    let run_s = r["timing"]["run_s"].as_f64().unwrap_or_default();
    report(&o, &scenarios, &times, run_s);
}

fn main() {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}\n\n{HELP}");
            std::process::exit(2);
        }
    };
    if let Some(path) = o.report.clone() {
        report_again(o, &path);
        return;
    }
    if !o.model.is_file() {
        eprintln!(
            "model {} missing: run scripts/fetch-model.sh (or --model FILE)",
            o.model.display()
        );
        std::process::exit(1);
    }
    gonka_llm::set_threads(o.threads).expect("set threads");
    let started = Instant::now();
    let exact = load(&o, WeightFormat::Exact, Variant::default());
    let prompts = chat_prompts(&exact, o.prompts);

    if let Some(path) = &o.write_prompts {
        write_prompts(path, &exact, &prompts, &o);
        return;
    }
    if let Some(path) = &o.dump {
        let answers = execute(&exact, &prompts, &o, "exact executor");
        let file = AnswerFile {
            source: format!("gonka-llm exact, {} thread(s), another process", o.threads),
            k: o.k,
            max_tokens: o.max_tokens,
            answers,
        };
        write_json(path, &file);
        return;
    }

    let target = o.out.parent().map(Path::to_path_buf).unwrap_or_default();
    let vocab = exact.tokenizer().vocab_size();
    let im_end = exact
        .tokenizer()
        .token_id("<|im_end|>")
        .unwrap_or_else(|| exact.tokenizer().eos());
    let mut scenarios: Vec<Scenario> = Vec::new();
    let mut generate_times: Vec<(String, f64, usize, usize)> = Vec::new();
    let mut note_times = |name: &str, answers: &[Answer]| {
        let s: f64 = answers.iter().map(|a| a.generate_s).sum();
        let tokens: usize = answers.iter().map(|a| a.positions.len()).sum();
        generate_times.push((name.to_string(), s, answers.len(), tokens));
    };

    eprintln!(
        "{} prompts x temperatures {:?}, max_tokens {}, k {}, {} thread(s)",
        o.prompts, o.temperatures, o.max_tokens, o.k, o.threads
    );
    // Honest, same implementation, same process.
    let reference = execute(&exact, &prompts, &o, "exact executor");
    note_times("exact", &reference);
    scenarios.push(Scenario {
        name: format!("honest exact {}t", o.threads),
        honest: true,
        about: format!(
            "gonka-llm exact kernel, generate and score in one process ({} thread(s))",
            o.threads
        ),
        checked: check_all(&exact, o.k, &reference, Some(&reference)),
    });

    // Honest, same implementation, another thread count (a child process).
    if o.spawn {
        let other = if o.threads == 1 { 2 } else { 1 };
        let path = target.join(format!("validation-rates-exact-{other}t.json"));
        eprintln!("  exact executor, {other} thread(s), child process");
        let mut cmd = Command::new(std::env::current_exe().expect("own path"));
        cmd.arg("--model")
            .arg(&o.model)
            .args(["--threads", &other.to_string()])
            .args(["--prompts", &o.prompts.to_string()])
            .args(["--max-tokens", &o.max_tokens.to_string()])
            .args(["--k", &o.k.to_string()])
            .args(["--seed", &o.seed.to_string()])
            .args([
                "--temperatures",
                &o.temperatures
                    .iter()
                    .map(|t| t.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            ])
            .arg("--dump")
            .arg(&path);
        let status = cmd.status().expect("run the child");
        assert!(status.success(), "child failed: {status}");
        let file = read_answers(&path);
        note_times(&format!("exact {other}t"), &file.answers);
        let mut s = external(file, &prompts, &o, &exact, &reference);
        s.name = format!("honest exact {other}t");
        scenarios.push(s);
    }

    // Honest, other implementations of the same model.
    for (name, weights, about) in [
        (
            "honest candle q8_0",
            WeightFormat::CandleQ8_0,
            "candle's quantized matmul, weights requantized to Q8_0, int8 activations",
        ),
        (
            "honest candle q4_1",
            WeightFormat::CandleAsLoaded,
            "candle's quantized matmul on the file's Q4_1 weights, int8 activations",
        ),
    ] {
        let llm = load(&o, weights, Variant::default());
        let answers = execute(&llm, &prompts, &o, name);
        drop(llm);
        note_times(name, &answers);
        scenarios.push(Scenario {
            name: name.into(),
            honest: true,
            about: about.into(),
            checked: check_all(&exact, o.k, &answers, Some(&reference)),
        });
    }

    // Honest: llama.cpp, and any answer files given.
    let mut files = o.executor_json.clone();
    let python = workspace_dir().join("tests/llama/.venv/bin/python");
    if o.llama_cpp {
        if python.is_file() {
            let spec = target.join("validation-rates-prompts.json");
            let answers = target.join("validation-rates-llama-cpp.json");
            write_prompts(&spec, &exact, &prompts, &o);
            eprintln!("  llama.cpp executor (tests/llama/dump_logprobs.py)");
            let status = Command::new(&python)
                .arg(workspace_dir().join("tests/llama/dump_logprobs.py"))
                .arg("--prompts")
                .arg(&spec)
                .arg("--out")
                .arg(&answers)
                .arg("--model")
                .arg(&o.model)
                .args(["--threads", &o.threads.to_string()])
                .status()
                .expect("run tests/llama/dump_logprobs.py");
            assert!(status.success(), "dump_logprobs.py failed: {status}");
            files.push(answers);
        } else {
            eprintln!(
                "  skip llama.cpp: {} missing (scripts/bench-llm-anchor.sh creates it)",
                python.display()
            );
        }
    }
    for path in files {
        let file = read_answers(&path);
        let name = if file.source.starts_with("llama.cpp") {
            "honest llama.cpp".to_string()
        } else {
            format!(
                "honest {}",
                path.file_stem().unwrap_or_default().to_string_lossy()
            )
        };
        note_times(&name, &file.answers);
        let mut s = external(file, &prompts, &o, &exact, &reference);
        s.name = name;
        scenarios.push(s);
    }

    // Cheats: altered models.
    let mut variants: Vec<(String, String, Variant)> = Vec::new();
    for &strength in &o.perturb {
        variants.push((
            format!("cheat perturbed {}%", strength * 100.0),
            format!(
                "every block scale d of the weights times 1 + {strength}·u, u uniform in [-1, 1)"
            ),
            Variant {
                perturb: Some(Perturb { seed: 7, strength }),
                ..Variant::default()
            },
        ));
    }
    for &skip in &o.skip_layers {
        variants.push((
            format!("cheat skip last {skip} layer(s)"),
            format!("the model without its last {skip} transformer layer(s)"),
            Variant {
                skip_last_layers: skip,
                ..Variant::default()
            },
        ));
    }
    for (name, about, variant) in variants {
        let llm = load(&o, WeightFormat::Exact, variant);
        let answers = execute(&llm, &prompts, &o, &name);
        drop(llm);
        note_times(&name, &answers);
        scenarios.push(Scenario {
            name,
            honest: false,
            about,
            checked: check_all(&exact, o.k, &answers, Some(&reference)),
        });
    }

    // Cheats: reports made up or cut short, on the honest exact answers.
    let fake: Vec<Answer> = reference.iter().map(|a| made_up(a, o.k, vocab)).collect();
    scenarios.push(Scenario {
        name: "cheat made-up logprobs".into(),
        honest: false,
        about: "the honest tokens, each reported as top-1 at logprob 0 with made-up alternatives"
            .into(),
        checked: check_all(&exact, o.k, &fake, None),
    });
    let cut: Vec<Answer> = reference
        .iter()
        .filter_map(|a| truncated(a, o.k, im_end))
        .collect();
    scenarios.push(Scenario {
        name: "cheat truncated at half".into(),
        honest: false,
        about: "the honest answer cut at half with <|im_end|> appended, claimed top-1 at logprob 0"
            .into(),
        checked: check_all(&exact, o.k, &cut, None),
    });

    report(
        &o,
        &scenarios,
        &generate_times,
        started.elapsed().as_secs_f64(),
    );
}

fn report(
    o: &Opts,
    scenarios: &[Scenario],
    generate_times: &[(String, f64, usize, usize)],
    run_s: f64,
) {
    let mut temps: Vec<Option<f32>> = o.temperatures.iter().map(|t| Some(*t)).collect();
    temps.push(None);
    println!();
    println!(
        "Distance per answer: gonka_proto::scored::compare mean |Δ logprob| per compared entry \
         (k = {}, max_tokens = {}, {} prompts); u = 2^-16 nats",
        o.k, o.max_tokens, o.prompts
    );
    println!(
        "{:<30} {:>4} {:>4} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>11} {:>11} {:>8} {:>6} {:>5}",
        "scenario",
        "T",
        "n",
        "min u",
        "p50 u",
        "p99 u",
        "max u",
        "p50 nats",
        "max nats",
        "worst p50 u",
        "worst max u",
        "Δtok p50",
        "top1",
        "same"
    );
    let mut summaries = Vec::new();
    for s in scenarios {
        for t in &temps {
            let rows: Vec<&Checked> = s
                .checked
                .iter()
                .filter(|c| t.is_none_or(|t| c.temperature == t))
                .collect();
            if rows.is_empty() {
                continue;
            }
            let means = sorted(rows.iter().map(|c| c.mean));
            let worst = sorted(rows.iter().map(|c| c.worst_position as f64));
            let same = rows
                .iter()
                .filter(|c| c.same_tokens_as_exact == Some(true))
                .count();
            let same = if rows.iter().any(|c| c.same_tokens_as_exact.is_some()) {
                format!("{same}")
            } else {
                "-".into()
            };
            let tname = t.map_or("all".to_string(), fmt_temp);
            let token_means = sorted(rows.iter().map(|c| c.token_mean));
            let positions: usize = rows.iter().map(|c| c.tokens + usize::from(c.stopped)).sum();
            let top1: usize = rows.iter().map(|c| c.top1_agree).sum();
            let top1 = 100.0 * top1 as f64 / positions.max(1) as f64;
            println!(
                "{:<30} {:>4} {:>4} {:>8.1} {:>9.1} {:>9.1} {:>9.1} {:>9.5} {:>9.5} {:>11.0} {:>11.0} {:>8.4} {:>5.1}% {:>5}",
                s.name,
                tname,
                rows.len(),
                means[0],
                percentile(&means, 0.5),
                percentile(&means, 0.99),
                means[means.len() - 1],
                percentile(&means, 0.5) / UNIT,
                means[means.len() - 1] / UNIT,
                percentile(&worst, 0.5),
                worst[worst.len() - 1],
                percentile(&token_means, 0.5) / UNIT,
                top1,
                same
            );
            summaries.push(json!({
                "scenario": s.name,
                "temperature": t,
                "answers": rows.len(),
                "mean_units": {"min": means[0], "p50": percentile(&means, 0.5),
                    "p99": percentile(&means, 0.99), "max": means[means.len() - 1]},
                "worst_position_units": {"p50": percentile(&worst, 0.5), "max": worst[worst.len() - 1]},
                "token_logprob_abs_diff_units_p50": percentile(&token_means, 0.5),
                "top1_agreement": top1 / 100.0,
                "same_tokens_as_exact": same,
            }));
        }
    }
    println!(
        "(worst: the largest sum of |Δ| at one position; Δtok: mean |Δ| of the chosen tokens' own \
         logprobs, nats; top1: positions where both sides' most likely token agree; same: answers \
         whose tokens equal the exact executor's)"
    );

    // Rates at candidate thresholds.
    let worst_honest = scenarios
        .iter()
        .filter(|s| s.honest)
        .flat_map(|s| s.checked.iter().map(|c| c.mean))
        .fold(0.0, f64::max);
    let needed = worst_honest * SAFETY_FACTOR;
    let recommended = THRESHOLDS_NATS
        .iter()
        .map(|n| (n * UNIT).round() as u64)
        .find(|u| *u as f64 >= needed && *u > 0);
    let mut thresholds: Vec<u64> = THRESHOLDS_NATS
        .iter()
        .map(|n| (n * UNIT).round() as u64)
        .collect();
    let exact_needed = needed.ceil().max(1.0) as u64;
    if !thresholds.contains(&exact_needed) {
        thresholds.push(exact_needed);
        thresholds.sort_unstable();
    }
    println!();
    println!(
        "Rates: honest rows are false-mismatch rates, cheat rows detection rates (!within(T))"
    );
    print!("{:<30}", "threshold T (nats / u)");
    for t in &thresholds {
        print!(" {:>12}", format!("{:.4}/{t}", *t as f64 / UNIT));
    }
    println!();
    let mut rates_json = Vec::new();
    for s in scenarios {
        print!("{:<30}", s.name);
        let mut row = Vec::new();
        for t in &thresholds {
            let r = rate(&s.checked, *t);
            print!(" {:>11.1}%", r * 100.0);
            row.push(json!({"threshold_units": t, "rate": r}));
        }
        println!();
        rates_json.push(json!({"scenario": s.name, "honest": s.honest, "rates": row}));
    }

    println!();
    println!(
        "Worst honest answer: {worst_honest:.1} u = {:.5} nats; {SAFETY_FACTOR}x that: {needed:.1} u = {:.5} nats",
        worst_honest / UNIT,
        needed / UNIT
    );
    let mut recommended_json = json!(null);
    match recommended {
        Some(t) => {
            println!(
                "Recommended threshold: {t} u = {:.4} nats (the smallest candidate >= {SAFETY_FACTOR}x the worst honest answer)",
                t as f64 / UNIT
            );
            let detection = print_rates(scenarios, |d| !d.within(t));
            recommended_json = json!({"threshold_units": t, "threshold_nats": t as f64 / UNIT, "rates": detection});
        }
        None => println!("No candidate threshold is >= {SAFETY_FACTOR}x the worst honest answer"),
    }

    // Another criterion, not the chain's: the worst single position.
    println!();
    println!(
        "For comparison, a per-position criterion (not compare's rule): mismatch when worst_position > W"
    );
    print!("{:<30}", "W (nats)");
    for w in WORST_NATS {
        print!(" {:>8}", format!("{w}"));
    }
    println!();
    let mut worst_json = Vec::new();
    for s in scenarios {
        print!("{:<30}", s.name);
        let mut row = Vec::new();
        for w in WORST_NATS {
            let units = (w * UNIT) as u64;
            let over = s
                .checked
                .iter()
                .filter(|c| c.worst_position > units)
                .count();
            let r = over as f64 / s.checked.len().max(1) as f64;
            print!(" {:>7.1}%", r * 100.0);
            row.push(json!({"worst_nats": w, "rate": r}));
        }
        println!();
        worst_json.push(json!({"scenario": s.name, "honest": s.honest, "rates": row}));
    }
    let worst_honest_position = scenarios
        .iter()
        .filter(|s| s.honest)
        .flat_map(|s| s.checked.iter().map(|c| c.worst_position))
        .max()
        .unwrap_or(0) as f64;
    let w_needed = worst_honest_position * SAFETY_FACTOR;
    let w_recommended = WORST_NATS
        .iter()
        .map(|w| (w * UNIT) as u64)
        .find(|w| *w as f64 >= w_needed);
    println!(
        "Worst honest position: {:.2} nats; {SAFETY_FACTOR}x that: {:.2} nats",
        worst_honest_position / UNIT,
        w_needed / UNIT
    );
    let mut combined_json = json!(null);
    if let (Some(t), Some(w)) = (recommended, w_recommended) {
        println!(
            "Both rules, mismatch when !within({t} u = {:.4} nats) or worst_position > {w} u = {:.0} nats:",
            t as f64 / UNIT,
            w as f64 / UNIT
        );
        let rows = print_rates(scenarios, |d| !d.agrees(t, w));
        combined_json = json!({"threshold_units": t, "worst_position_units": w, "rates": rows});
    }

    // Cost of validation.
    println!();
    println!("Generation time per answer (this machine, shared CPU):");
    for (name, s, n, positions) in generate_times {
        println!(
            "  {:<30} {:>8.1} ms/answer {:>7.2} ms/position",
            name,
            1000.0 * s / *n as f64,
            1000.0 * s / *positions as f64
        );
    }
    let exact = &scenarios[0].checked;
    let gen: f64 = exact.iter().map(|c| c.generate_s).sum();
    let score: f64 = exact.iter().map(|c| c.score_s).sum();
    let all_scores: Vec<f64> = scenarios
        .iter()
        .flat_map(|s| s.checked.iter().map(|c| c.score_s))
        .collect();
    println!(
        "Validation cost: score {:.1} ms/answer vs generate {:.1} ms/answer (exact, {} thread(s)): ratio {:.3}",
        1000.0 * score / exact.len() as f64,
        1000.0 * gen / exact.len() as f64,
        o.threads,
        score / gen
    );
    println!("Run time: {run_s:.0} s");

    let results = json!({
        "config": {
            "model": o.model, "threads": o.threads, "prompts": o.prompts,
            "max_tokens": o.max_tokens, "k": o.k, "seed": o.seed,
            "temperatures": o.temperatures, "perturb": o.perturb, "skip_layers": o.skip_layers,
        },
        "scenarios": scenarios.iter().map(|s| json!({
            "name": s.name, "honest": s.honest, "about": s.about, "answers": s.checked,
        })).collect::<Vec<_>>(),
        "summary": summaries,
        "rates": rates_json,
        "worst_position_rates": worst_json,
        "worst_honest_position_units": worst_honest_position,
        "combined": combined_json,
        "worst_honest_units": worst_honest,
        "recommended": recommended_json,
        "timing": {
            "generate": generate_times.iter().map(|(n, s, a, p)| json!({
                "executor": n, "seconds": s, "answers": a, "positions": p})).collect::<Vec<_>>(),
            "exact_generate_s": gen, "exact_score_s": score, "score_over_generate": score / gen,
            "score_s_mean_all": all_scores.iter().sum::<f64>() / all_scores.len().max(1) as f64,
            "run_s": run_s,
        },
    });
    write_json(&o.out, &results);
    println!("Results: {}", o.out.display());
}
