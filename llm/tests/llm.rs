//! gonka-llm on the real model file (SmolLM2-135M-Instruct Q4_1, `scripts/fetch-model.sh`).
//!
//! The path comes from `GONKA_LLM_MODEL` or the fetch script's default location. Without the
//! file every test here prints a skip line and passes, except under `CI`, where it fails.

use std::path::PathBuf;
use std::sync::OnceLock;

use gonka_llm::{
    default_model_path, logprob_to_fixed, ChatMessage, FinishReason, GenerateParams, Llm,
    LoadOptions, TokenLogprobs,
};

/// Teacher-forced scores may differ from the incremental pass's by this much (natural log).
/// Every kernel computes a row the same way whether it runs alone (decode) or in a batch (the
/// one-pass forward), so the observed difference is 0; the tolerance leaves room for a kernel
/// that sums in another order (1e-4 is 7 units of the chain's 2^-16 fixed point).
const SCORE_TOLERANCE: f32 = 1e-4;

fn model_path() -> PathBuf {
    std::env::var_os("GONKA_LLM_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(default_model_path)
}

/// The model, loaded once per test binary; `None` (after a skip line) when the file is missing
/// outside CI.
fn model() -> Option<&'static Llm> {
    static MODEL: OnceLock<Option<Llm>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            let path = model_path();
            if !path.is_file() {
                if std::env::var_os("CI").is_some() {
                    panic!(
                        "model {} missing under CI: run scripts/fetch-model.sh",
                        path.display()
                    );
                }
                eprintln!(
                    "skip: model {} missing (run scripts/fetch-model.sh)",
                    path.display()
                );
                return None;
            }
            Some(Llm::load(&path, LoadOptions::default()).expect("the model loads"))
        })
        .as_ref()
}

fn capital_chat() -> Vec<ChatMessage> {
    vec![ChatMessage::new(
        "user",
        "What is the capital of France? Answer in one word.",
    )]
}

fn greedy(max_tokens: usize, top_logprobs: usize) -> GenerateParams {
    GenerateParams {
        max_tokens,
        temperature: 0.0,
        top_logprobs,
        ..GenerateParams::default()
    }
}

#[test]
fn loads_with_its_tokenizer() {
    let Some(llm) = model() else { return };
    assert_eq!(llm.tokenizer().vocab_size(), 49152);
    assert_eq!(llm.context_length(), 8192);
    assert_eq!(llm.tokenizer().eos(), 2);
    assert_eq!(llm.tokenizer().token_id("<|im_end|>"), Some(2));
    assert!(llm.tokenizer().is_end_of_generation(0));
    assert!(llm.tokenizer().is_control(1));
    assert!(!llm.tokenizer().is_control(100));
}

#[test]
fn a_missing_file_names_the_fetch_script() {
    let err = Llm::load("/nonexistent/model.gguf", LoadOptions::default()).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("/nonexistent/model.gguf"), "{msg}");
    assert!(msg.contains("scripts/fetch-model.sh"), "{msg}");
}

#[test]
fn tokenizer_round_trips() {
    let Some(llm) = model() else { return };
    let tok = llm.tokenizer();
    let strings = [
        "",
        "Hello, world!",
        "The quick brown fox jumps over the lazy dog.",
        "  leading and trailing spaces  ",
        "tabs\tand\nnewlines\r\n\n\nand   runs     of      spaces",
        "numbers 0 1 12 123 1234567890 3.14159 -42 1e10 0x1F",
        "unicode: café, naïve, Zürich, São Paulo, Ελληνικά, русский, 日本語, 中文, 한국어",
        "emoji: 😀 👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️",
        "code: fn main() { println!(\"{}\", x + 1); }",
        "def f(x):\n    return [i**2 for i in range(x) if i % 2 == 0]\n",
        "<html><body class=\"a\">&amp; &lt;tag&gt;</body></html>",
        "don't can't I'm you're we've they'll he'd",
        "DON'T CAN'T I'M",
        "mixed123abc456def 7th 21st",
        "arabic: مرحبا بالعالم, hebrew: שלום, hindi: नमस्ते, thai: สวัสดี",
        "math: ∑ ∫ √ π ≈ ≠ ≤ ≥ ∞ → ← ⇒",
        "<|im_start|> written as plain text <|im_end|>",
        "\u{0}\u{1} control \u{7f} chars \u{feff} bom",
        "a\u{300}\u{301} combining marks",
        "     ",
        "\n",
        "x",
        "½ ¾ Ⅻ ² numerics",
    ];
    for s in strings {
        let ids = tok.encode(s, false);
        assert_eq!(tok.decode(&ids), s, "round trip of {s:?} via {ids:?}");
        // Exact counts: the token count is what billing uses.
        assert_eq!(ids.len(), tok.encode(s, false).len());
    }
    // Control tokens are parsed only when asked.
    let s = "<|im_start|>user\nhi<|im_end|>";
    let parsed = tok.encode(s, true);
    assert_eq!(parsed[0], 1);
    assert_eq!(*parsed.last().unwrap(), 2);
    assert_eq!(tok.decode(&parsed), s);
    assert!(tok.encode(s, false).len() > parsed.len());
}

#[derive(serde::Deserialize)]
struct Golden {
    text: String,
    special: bool,
    ids: Vec<u32>,
}

#[test]
fn token_ids_equal_llama_cpp() {
    let Some(llm) = model() else { return };
    let golden: Vec<Golden> =
        serde_json::from_str(include_str!("fixtures/llama_cpp_tokens.json")).unwrap();
    assert!(golden.len() >= 100, "{} golden strings", golden.len());
    let mut wrong = Vec::new();
    for g in &golden {
        let ids = llm.tokenizer().encode(&g.text, g.special);
        if ids != g.ids {
            wrong.push(format!(
                "{:?} (special={}): llama.cpp {:?}, ours {:?}",
                g.text, g.special, g.ids, ids
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} differ:\n{}",
        wrong.len(),
        golden.len(),
        wrong.join("\n")
    );
}

#[test]
fn chat_template_renders_like_jinja2() {
    let Some(llm) = model() else { return };
    let messages = [
        ChatMessage::new("user", "What is 2+2?"),
        ChatMessage::new("assistant", "2 + 2 = 4."),
    ];
    let rendered = llm.render_chat(&messages).unwrap();
    assert_eq!(rendered, include_str!("fixtures/chat_two_messages.txt"));
    assert!(llm.render_chat(&[]).is_err());
}

#[test]
fn greedy_answer_names_paris_with_sound_logprobs() {
    let Some(llm) = model() else { return };
    let prompt = llm.chat_prompt(&capital_chat()).unwrap();
    let mut streamed = String::new();
    let mut events = 0;
    let out = llm
        .generate(&prompt, &greedy(16, 5), |e| {
            streamed.push_str(e.text);
            events += 1;
            true
        })
        .unwrap();
    assert!(out.text.contains("Paris"), "answer: {:?}", out.text);
    assert_eq!(streamed, out.text);
    assert_eq!(events, out.tokens.len());
    assert_eq!(out.prompt_tokens, prompt.len());
    assert_eq!(
        out.finish_reason,
        FinishReason::Stop,
        "answer: {:?}",
        out.text
    );
    for lp in &out.logprobs {
        assert!(lp.logprob <= 0.0);
        assert_eq!(lp.top.len(), 5);
        assert!(lp.top.iter().all(|(_, l)| *l <= 0.0));
        assert!(lp.top.windows(2).all(|w| w[0].1 >= w[1].1), "{:?}", lp.top);
        // Greedy picks the most likely token, so it is the top-1 with the same logprob.
        assert_eq!(lp.top[0], (lp.token, lp.logprob));
    }
}

#[test]
fn length_limit_and_seeded_sampling() {
    let Some(llm) = model() else { return };
    let prompt = llm
        .chat_prompt(&[ChatMessage::new(
            "user",
            "Write a long story about a dragon.",
        )])
        .unwrap();
    let out = llm.generate(&prompt, &greedy(5, 0), |_| true).unwrap();
    assert_eq!(out.tokens.len(), 5);
    assert_eq!(out.finish_reason, FinishReason::Length);
    assert!(out.logprobs.iter().all(|l| l.top.is_empty()));

    // A caller that stops after two tokens (a streaming client gone away) gets those two.
    let mut seen = 0;
    let stopped = llm
        .generate(&prompt, &greedy(5, 0), |_| {
            seen += 1;
            seen < 2
        })
        .unwrap();
    assert_eq!(stopped.finish_reason, FinishReason::Abandoned);
    assert_eq!(stopped.tokens, out.tokens[..2]);

    let sampled = |seed| {
        let p = GenerateParams {
            max_tokens: 12,
            temperature: 1.0,
            top_p: 0.95,
            seed,
            top_logprobs: 0,
        };
        llm.generate(&prompt, &p, |_| true).unwrap().tokens
    };
    assert_eq!(sampled(42), sampled(42));
    let others: Vec<Vec<u32>> = (43..46).map(sampled).collect();
    assert!(
        others.iter().any(|o| *o != sampled(42)),
        "four seeds sampled the same 12 tokens"
    );
    assert!(llm
        .generate(&prompt, &greedy(1, gonka_llm::MAX_TOP_LOGPROBS + 1), |_| {
            true
        })
        .is_err());
}

fn max_diff(a: &[TokenLogprobs], b: &[TokenLogprobs]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x.logprob - y.logprob).abs())
        .fold(0.0, f32::max)
}

#[test]
fn teacher_forced_scoring_reproduces_generation() {
    let Some(llm) = model() else { return };
    let prompt = llm
        .chat_prompt(&[ChatMessage::new(
            "user",
            "Explain in two sentences why the sky is blue.",
        )])
        .unwrap();
    let p = GenerateParams {
        max_tokens: 48,
        temperature: 0.7,
        top_p: 0.9,
        seed: 7,
        top_logprobs: 5,
    };
    let gen = llm.generate(&prompt, &p, |_| true).unwrap();
    assert!(gen.tokens.len() >= 8, "answer: {:?}", gen.text);
    let scored = llm.score(&prompt, &gen.tokens, 5).unwrap();
    assert_eq!(scored.len(), gen.tokens.len());
    let diff = max_diff(&gen.logprobs, &scored);
    eprintln!(
        "teacher-forced vs generated: max |Δ logprob| = {diff:.2e} over {} tokens",
        scored.len()
    );
    assert!(diff <= SCORE_TOLERANCE, "max |Δ logprob| {diff}");
    for (g, s) in gen.logprobs.iter().zip(&scored) {
        assert_eq!(g.token, s.token);
        // The fixed-point forms the chain compares agree within the same tolerance.
        let fixed = (logprob_to_fixed(g.logprob) - logprob_to_fixed(s.logprob)).abs();
        assert!(fixed as f32 <= SCORE_TOLERANCE * 65536.0 + 1.0);
        // The same top-1 unless the two best are within the tolerance of each other.
        if g.top[0].0 != s.top[0].0 {
            assert!((g.top[0].1 - g.top[1].1).abs() <= SCORE_TOLERANCE);
        }
    }
}

#[test]
fn the_stop_position_is_reported_and_scored_exactly() {
    let Some(llm) = model() else { return };
    let prompt = llm.chat_prompt(&capital_chat()).unwrap();
    let sampled = GenerateParams {
        max_tokens: 32,
        temperature: 0.7,
        top_p: 1.0,
        seed: 3,
        top_logprobs: 5,
    };
    for params in [greedy(32, 5), sampled] {
        let gen = llm.generate(&prompt, &params, |_| true).unwrap();
        assert_eq!(
            gen.finish_reason,
            FinishReason::Stop,
            "answer: {:?}",
            gen.text
        );
        let stop = gen
            .stop
            .clone()
            .expect("a stopped generation reports its stop token");
        assert!(llm.tokenizer().is_end_of_generation(stop.token));
        assert!(!gen.tokens.contains(&stop.token));
        assert_eq!(stop.top.len(), 5);
        assert!(stop.logprob <= 0.0);

        // The validator's teacher-forced pass over tokens ++ [stop] reproduces every position,
        // the stop one included, bit for bit (WeightFormat::Exact).
        let mut output = gen.tokens.clone();
        output.push(stop.token);
        let scored = llm.score(&prompt, &output, 5).unwrap();
        let mut expected = gen.logprobs.clone();
        expected.push(stop);
        assert_eq!(scored, expected);
    }
    // A generation cut by max_tokens has no stop position.
    let cut = llm.generate(&prompt, &greedy(1, 5), |_| true).unwrap();
    assert_eq!(cut.finish_reason, FinishReason::Length);
    assert_eq!(cut.stop, None);
}

/// A copy of the model with its final norm scaled per channel: the same tokenizer and
/// architecture, other weights.
fn perturbed_copy(dir: &std::path::Path) -> PathBuf {
    use candle_core::quantized::{gguf_file, QTensor};
    let src = model_path();
    let mut reader = std::io::BufReader::new(std::fs::File::open(&src).unwrap());
    let content = gguf_file::Content::read(&mut reader).unwrap();
    let mut names: Vec<&String> = content.tensor_infos.keys().collect();
    names.sort();
    let mut tensors: Vec<(String, QTensor)> = Vec::new();
    for name in names {
        let t = content
            .tensor(&mut reader, name, &candle_core::Device::Cpu)
            .unwrap();
        let t = if name == "output_norm.weight" {
            let w = t.dequantize(&candle_core::Device::Cpu).unwrap();
            let n = w.dims1().unwrap();
            let scale: Vec<f32> = (0..n)
                .map(|i| 1.0 + 0.5 * ((i * 7919 % 13) as f32 / 12.0 - 0.5))
                .collect();
            let scale = candle_core::Tensor::from_vec(scale, n, &candle_core::Device::Cpu).unwrap();
            QTensor::quantize(&(w * scale).unwrap(), t.dtype()).unwrap()
        } else {
            t
        };
        tensors.push((name.clone(), t));
    }
    let mut md: Vec<(&String, &gguf_file::Value)> = content.metadata.iter().collect();
    md.sort_by(|a, b| a.0.cmp(b.0));
    let md: Vec<(&str, &gguf_file::Value)> = md.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    let ts: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let out = dir.join("perturbed.gguf");
    let mut w = std::io::BufWriter::new(std::fs::File::create(&out).unwrap());
    gguf_file::write(&mut w, &md, &ts).unwrap();
    out
}

#[test]
fn scores_of_another_model_diverge() {
    let Some(llm) = model() else { return };
    let prompt = llm.chat_prompt(&capital_chat()).unwrap();
    let gen = llm.generate(&prompt, &greedy(8, 0), |_| true).unwrap();
    let honest = llm.score(&prompt, &gen.tokens, 0).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let other = Llm::load(perturbed_copy(dir.path()), LoadOptions::default()).unwrap();
    let cheat = other.score(&prompt, &gen.tokens, 0).unwrap();
    let diff = max_diff(&honest, &cheat);
    eprintln!("perturbed model: max |Δ logprob| = {diff:.3}");
    assert!(diff > 50.0 * SCORE_TOLERANCE, "max |Δ logprob| {diff}");
}

#[test]
fn altered_models_for_measuring_validation() {
    use gonka_llm::testing::{load, Perturb, Variant};
    let Some(llm) = model() else { return };
    let prompt = llm.chat_prompt(&capital_chat()).unwrap();
    let gen = llm.generate(&prompt, &greedy(8, 0), |_| true).unwrap();
    let honest = llm.score(&prompt, &gen.tokens, 3).unwrap();
    let perturbed = |seed| Variant {
        perturb: Some(Perturb {
            seed,
            strength: 0.05,
        }),
        ..Variant::default()
    };
    let scores = |variant| {
        load(model_path(), LoadOptions::default(), variant)
            .unwrap()
            .score(&prompt, &gen.tokens, 3)
            .unwrap()
    };
    // No alteration is the file's model; equal seeds are equal models; every alteration moves
    // the log-probabilities.
    assert_eq!(scores(Variant::default()), honest);
    let a = scores(perturbed(1));
    assert_eq!(a, scores(perturbed(1)));
    let shorter = scores(Variant {
        skip_last_layers: 1,
        ..Variant::default()
    });
    for other in [a, scores(perturbed(2)), shorter] {
        let diff = max_diff(&honest, &other);
        assert!(diff > 1e-3, "max |Δ logprob| {diff}");
    }
    let all = Variant {
        skip_last_layers: 30,
        ..Variant::default()
    };
    assert!(load(model_path(), LoadOptions::default(), all).is_err());
}

#[test]
fn fixed_point_logprobs() {
    assert_eq!(logprob_to_fixed(0.0), 0);
    assert_eq!(logprob_to_fixed(-1.0), -65536);
    assert_eq!(logprob_to_fixed(-0.5 / 65536.0), -1); // ties away from zero
    assert_eq!(logprob_to_fixed(-1.25), -81920);
    assert_eq!(logprob_to_fixed(f32::NEG_INFINITY), i32::MIN);
    assert_eq!(gonka_llm::logprob_to_fixed_i64(-40000.0), -40000 * 65536);
}
