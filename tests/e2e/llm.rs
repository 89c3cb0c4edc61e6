//! A real language model end to end: ML nodes 0 to 2 also serve SmolLM2-135M-Instruct (the
//! GGUF file `scripts/fetch-model.sh` fetches) beside the reference model. Through transfer
//! agent 0, at temperature 0, "What is the capital of France? Answer in one word." is answered
//! with text containing "Paris", plain and streamed alike, with OpenAI log-probabilities; the
//! official `openai` Python client gets them through `gonkad proxy` in the OpenAI schema (top-k
//! of length k, values ≤ 0 and sorted, tokens concatenating to the text); and the answers
//! settle on chain at the language model's own price; each is validated by log-probabilities
//! (the model table says so): another node's validator scores the executor's committed tokens
//! and agrees.
//!
//! The model file is found at `GONKA_LLM_MODEL` or under `${GONKA_HOME:-~/.gonka}/models/`; when it is missing
//! the test fails in CI (`CI` set) and is skipped elsewhere with a note.

use std::path::PathBuf;
use std::sync::Arc;

use gonka_client::chat::{
    llm_model_entry, ChatClient, ChatRequest, Message, Sampling, LLM_LOGPROB_TOP_K, LLM_MODEL,
    LLM_MODEL_FILE,
};
use gonka_client::keys::well_known_mnemonic;
use gonka_client::Key;
use gonka_localnet::AppStateFn;

use crate::inference::{
    alice_escrow, alice_escrow_balance, decided_validation, eventually, genesis_config,
    keyring_with_alice, register_bls_keys, sidecars, wait_for_registry, COMMISSION,
};
use crate::proxy::{run_openai_script, start_proxy};
use crate::support::{addr, Net, VALIDATORS};

/// The language model's price per token in ngnk (the reference model's is 3 here).
const LLM_PRICE: u128 = 2;
/// The question, and the word the answer must hold.
const QUESTION: &str = "What is the capital of France? Answer in one word.";
const TOP_K: u32 = 3;

/// One generated token as an answer reports it: text, log-probability, alternatives.
type Scored = (String, f64, Vec<(String, f64)>);

/// The model file, or `None` (after a note) when it is missing outside CI.
fn model_file() -> Option<PathBuf> {
    let path = std::env::var_os("GONKA_LLM_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| gonka_client::chat::default_home().join(LLM_MODEL_FILE));
    if path.is_file() {
        return Some(path);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "the language model is missing at {}: scripts/test.sh fetches it with scripts/fetch-model.sh",
        path.display()
    );
    eprintln!(
        "SKIPPED: no language model at {} (scripts/fetch-model.sh fetches it)",
        path.display()
    );
    None
}

/// Checks one answer's log-probabilities against its text: one entry per completion token,
/// values ≤ 0, `k` alternatives sorted most likely first, the chosen (greedy) token first.
fn check_logprobs(tokens: &[Scored], text: &str, completion: u64) {
    assert_eq!(tokens.len() as u64, completion, "one entry per token");
    let joined: String = tokens.iter().map(|(t, _, _)| t.as_str()).collect();
    assert_eq!(joined, text, "the tokens concatenate to the text");
    for (token, logprob, top) in tokens {
        assert!(*logprob <= 0.0, "{token:?}: {logprob}");
        assert_eq!(top.len(), TOP_K as usize, "{token:?}: {top:?}");
        assert!(
            top.windows(2).all(|w| w[0].1 >= w[1].1),
            "{token:?}: alternatives not sorted: {top:?}"
        );
        assert!(top.iter().all(|(_, lp)| *lp <= 0.0), "{top:?}");
        assert_eq!(
            (&top[0].0, top[0].1),
            (token, *logprob),
            "greedy decoding picks the most likely token"
        );
    }
}

#[test]
fn a_real_language_model_answers_with_logprobs_through_a_transfer_agent_and_settles() {
    let Some(model) = model_file() else {
        return;
    };
    crate::support::run(async move {
        let net = Net::start_with("llm", VALIDATORS, |config| {
            config.app_state_for_validators = Some(AppStateFn(Arc::new(|keys| {
                let mut genesis = genesis_config(keys, 100_000);
                genesis.models.push(llm_model_entry(LLM_PRICE));
                genesis.escrows = vec![alice_escrow(0)];
                // Every record is stored and validated: by log-probabilities, as the model
                // table says.
                genesis.settlement_params = Some(gonka_proto::settlement::Params {
                    challenge_window_blocks: 40,
                    leaf_answer_blocks: 10,
                    leaf_sample_ppm: 1_000_000,
                    ..gonka_settlement::default_params()
                });
                let mut state = genesis.app_state();
                let mut disputes = serde_json::to_value(gonka_disputes::default_params()).unwrap();
                for (field, value) in [
                    ("min_sample_ppm", 1_000_000),
                    ("max_sample_ppm", 1_000_000),
                    ("validation_deadline_blocks", 40),
                    ("reveal_deadline_blocks", 10),
                ] {
                    disputes[field] = value.into();
                }
                state["disputes"] = serde_json::json!({ "params": disputes });
                state
            })));
            let mut sidecars = sidecars();
            sidecars.validator_role = true;
            // Three ML nodes load the language model; the fourth serves the reference model
            // alone. Three, so that every record has a validator serving the model other than
            // its executor's host and its transfer agent (validator 0), both excluded.
            sidecars.ml_node_args = vec![vec!["--llm-model-file".into(), model.clone().into()]; 3];
            sidecars.transfer_agent_args =
                vec![["--batch-max-records", "1"].map(Into::into).to_vec()];
            config.sidecar = Some(sidecars);
        })
        .await;
        wait_for_registry(&net).await;
        register_bls_keys(&net).await;
        let ta = addr("validator0");
        let before = alice_escrow_balance(&net, &ta).await;

        // Through TA 0 with gonka's own client: plain, then streamed.
        let tas = net.net.transfer_agent_urls();
        let alice = Key::from_mnemonic(&well_known_mnemonic("alice")).unwrap();
        let client = ChatClient::new(alice, std::slice::from_ref(&tas[0])).unwrap();
        let mut request = ChatRequest::new(LLM_MODEL, vec![Message::user(QUESTION)]);
        request.max_tokens = Some(16);
        request.commission = COMMISSION;
        request.sampling = Sampling {
            temperature: Some(0.0),
            logprobs: true,
            top_logprobs: Some(TOP_K),
            ..Sampling::default()
        };
        let mut answers = Vec::new();
        for stream in [false, true] {
            request.stream = stream;
            let answer = client.chat(&request, |_| {}).await.unwrap();
            assert!(
                answer.content.contains("Paris"),
                "stream {stream}: {:?}",
                answer.content
            );
            assert_eq!(answer.model, LLM_MODEL);
            assert!(
                matches!(
                    answer.executor.as_deref(),
                    Some("node0-ml" | "node1-ml" | "node2-ml")
                ),
                "{:?}",
                answer.executor
            );
            let usage = answer.usage.expect("usage");
            let tokens: Vec<_> = answer
                .logprobs
                .as_ref()
                .expect("logprobs were asked for")
                .content
                .iter()
                .map(|t| {
                    let top = t
                        .top_logprobs
                        .iter()
                        .map(|a| (a.token.clone(), a.logprob))
                        .collect();
                    (t.token.clone(), t.logprob, top)
                })
                .collect();
            check_logprobs(&tokens, &answer.content, usage.completion_tokens);
            answers.push(answer);
        }
        assert_eq!(
            answers[0].content, answers[1].content,
            "greedy decoding answers the same plain and streamed"
        );
        assert_eq!(answers[0].logprobs, answers[1].logprobs);

        // The official client through the signing proxy.
        let keyring = keyring_with_alice();
        let home = keyring.path().to_str().unwrap().to_string();
        let (_proxy, listen) = start_proxy(&net, &home, &tas[0]).await;
        let report = run_openai_script("logprobs.py", &listen, LLM_MODEL);
        let read = |key: &str| -> Vec<Scored> {
            report[key]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| {
                    let top = t["top"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|a| {
                            (
                                a["token"].as_str().unwrap().to_string(),
                                a["logprob"].as_f64().unwrap(),
                            )
                        })
                        .collect();
                    (
                        t["token"].as_str().unwrap().to_string(),
                        t["logprob"].as_f64().unwrap(),
                        top,
                    )
                })
                .collect()
        };
        let plain = report["plain"].as_str().unwrap();
        assert!(plain.contains("Paris"), "{report}");
        assert_eq!(plain, answers[0].content, "{report}");
        let completion = report["completion_tokens"].as_u64().unwrap();
        check_logprobs(&read("logprobs"), plain, completion);
        assert_eq!(report["streamed"], plain, "{report}");
        assert_eq!(report["stream_completion_tokens"], completion, "{report}");
        check_logprobs(&read("streamed_logprobs"), plain, completion);

        // Settled on chain at the language model's price: four equal answers in all, two
        // with gonka's client's commission and two with the proxy's (none).
        let usage = answers[0].usage.unwrap();
        let tokens = u128::from(usage.prompt_tokens + usage.completion_tokens);
        let charged = 4 * tokens * LLM_PRICE + 2 * COMMISSION;
        eventually("the four answers settled from alice's escrow", || async {
            (before - alice_escrow_balance(&net, &ta).await == charged).then_some(())
        })
        .await;

        // Every answer was validated by log-probabilities: the validator of the other
        // language-model node scored the executor's committed tokens (and its stop token)
        // and its scores agreed with the executor's once the TA revealed them.
        for answer in &answers {
            let id = answer
                .inference_id
                .clone()
                .expect("the answer's inference id");
            let validation = decided_validation(&net, &id).await;
            assert_eq!(validation.status, "matched", "{validation:?}");
            let scored = validation.scored.expect("the validator's scores");
            let completion = usage.completion_tokens;
            assert!(
                [completion, completion + 1].contains(&(scored.positions.len() as u64)),
                "{} positions for {completion} completion tokens",
                scored.positions.len()
            );
            assert!(scored
                .positions
                .iter()
                .all(|p| p.top_tokens.len() == LLM_LOGPROB_TOP_K as usize));
        }
    });
}
