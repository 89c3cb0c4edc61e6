//! Training on the localnet: three validators' trainers join a job created with `gonkad tx pol
//! create-job`, train two DiLoCo rounds together (exchanging pseudo-gradients directly), and
//! commit every checkpoint on chain. One trainer cheats (stale weights, and it withholds
//! the pseudo-gradients it commits, which its peers leave out rather than stall); with every
//! checkpoint sampled, its verifier re-executes the round and disagrees, the committee agrees
//! with the verifier, and the cheat is slashed 20% while the honest workers' checkpoints are
//! verified and paid. The fourth validator's trainer only re-executes.
//!
//! Then the network serves what it trained: the honest workers attest the SHA-256 of the
//! final weights, which publishes the model `pol/job-1` to the model table; an ML node
//! started with `--model-id pol/job-1 --weights-url <a trainer's model file>` loads and checks
//! those weights, registers, and answers a signed chat request through a transfer agent,
//! exactly as the reference runtime with the published weights does.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gonka_client::chat::{ChatClient, ChatRequest, Message};
use gonka_client::keys::well_known_mnemonic;
use gonka_client::Key;
use gonka_localnet::AppStateFn;
use gonka_proto::inference::{QueryModelsRequest, QueryNodeRequest};
use gonka_proto::pol::{
    CheckpointStatus, JobStatus, QueryCheckpointsRequest, QueryJobRequest, TrainingJob,
};
use gonka_proto::query as q;
use gonka_proto::stake::QueryParticipantRequest;

use crate::inference::{alice_escrow, eventually, genesis_config, keyring_with_alice, sidecars};
use crate::support::{addr, gonkad_json, gonkad_ok, http_get_bytes, KillOnDrop, Net, VALIDATORS};

/// The cheating trainer's validator.
const CHEAT: usize = 2;
/// Bound on the whole job.
const JOB_WAIT: Duration = Duration::from_secs(240);

async fn job(net: &Net) -> Option<TrainingJob> {
    net.clients[0]
        .query::<q::pol::Job>(&QueryJobRequest { id: 1 })
        .await
        .ok()?
        .job
}

async fn bonded(net: &Net, label: &str) -> u128 {
    // Node 0, the node the test waits on: its state holds every slash it reported.
    net.clients[0]
        .query::<q::stake::Participant>(&QueryParticipantRequest {
            operator: addr(label),
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}"))
        .participant
        .expect("a genesis validator is a participant")
        .bonded
        .parse()
        .unwrap()
}

#[test]
fn three_trainers_train_together_the_cheat_is_slashed_and_the_model_is_served() {
    crate::support::run(async {
        let net = Net::start_with("training", VALIDATORS, |config| {
            config.app_state_for_validators = Some(AppStateFn(Arc::new(|keys| {
                let mut genesis = genesis_config(keys, 100_000);
                // Alice pays validator 0's transfer agent for the chat with the trained model.
                genesis.escrows = vec![alice_escrow(0)];
                genesis.pol_params = Some(gonka_proto::pol::Params {
                    checkpoint_sample_ppm: 1_000_000,
                    verification_deadline_blocks: 60,
                    dispute_deadline_blocks: 60,
                    min_reward_budget: "1".into(),
                    ..gonka_pol::default_params()
                });
                genesis.app_state()
            })));
            let mut sidecar = sidecars();
            sidecar.trainer_role = true;
            sidecar.trainer_args = (0..VALIDATORS)
                .map(|i| match i {
                    CHEAT => vec![
                        "--auto-join".into(),
                        "--cheat".into(),
                        "stale-weights".into(),
                        "--withhold-pseudo-gradients".into(),
                    ],
                    3 => Vec::new(),
                    _ => vec!["--auto-join".into()],
                })
                .collect();
            config.sidecar = Some(sidecar);
        })
        .await;
        let cheat = format!("validator{CHEAT}");
        let bonded_before = bonded(&net, &cheat).await;

        // The dataset root of seed 7's corpus, as the trainer prints it.
        let binary = Path::new(env!("CARGO_BIN_EXE_gonkad")).with_file_name("gonka-sidecar");
        let out = std::process::Command::new(&binary)
            .args(["trainer", "--dataset-root-of", "7"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let root = String::from_utf8(out.stdout).unwrap().trim().to_string();
        assert_eq!(root.len(), 64, "{root}");

        let keyring = keyring_with_alice();
        let home = keyring.path().to_str().unwrap();
        let rpc = net.node(0).rpc_url.clone();
        gonkad_ok(&[
            "--home",
            home,
            "--node",
            &rpc,
            "tx",
            "pol",
            "create-job",
            "alice",
            "9000ngnk",
            "--dataset-root",
            &root,
            "--workers",
            "3",
            "--rounds",
            "2",
            "--inner-steps",
            "3",
            "--batch-size",
            "4",
            "--round-blocks",
            "60",
            "--seed",
            "7",
        ]);

        // The three auto-joining trainers fill the job; they train both rounds.
        let started = Instant::now();
        let done = loop {
            let job = job(&net).await;
            if let Some(job) = job
                .as_ref()
                .filter(|j| j.status() == JobStatus::Completed && j.checkpoints_in_review == 0)
            {
                break job.clone();
            }
            assert!(
                started.elapsed() < JOB_WAIT,
                "training job 1 did not complete in {JOB_WAIT:?}: {job:?}\ntrainer logs: {}",
                (0..VALIDATORS)
                    .map(|i| net
                        .node(i)
                        .app_log
                        .with_file_name("trainer.log")
                        .display()
                        .to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        };
        let workers: Vec<&str> = done.workers.iter().map(|w| w.host.as_str()).collect();
        for i in [0, 1, CHEAT] {
            assert!(
                workers.contains(&addr(&format!("validator{i}")).as_str()),
                "{workers:?}"
            );
        }
        // Read from node 0, which reported the job complete with nothing in review: another
        // node may be a block behind, with the cheat's last dispute still open there.
        let checkpoints: Vec<_> = net.clients[0]
            .query::<q::pol::Checkpoints>(&QueryCheckpointsRequest {
                job_id: 1,
                round: 0,
                pagination: None,
            })
            .await
            .unwrap_or_else(|e| panic!("{e:#}"))
            .checkpoints;
        // Round 1: all three on chain. The cheat is faulted; the honest ones verified and paid.
        let round1: Vec<_> = checkpoints.iter().filter(|c| c.round == 1).collect();
        assert_eq!(round1.len(), 3, "{checkpoints:?}");
        for c in &checkpoints {
            if c.worker == addr(&cheat) {
                assert_eq!(c.status(), CheckpointStatus::Faulted, "{c:?}");
                assert_eq!(c.paid, "0");
            } else {
                assert_eq!(c.status(), CheckpointStatus::Verified, "{c:?}");
                assert!(c.paid.parse::<u128>().unwrap() > 0);
                assert!(c.work_units > 0);
            }
        }
        // Honest workers committed round 2 from the same agreed weights.
        let round2: Vec<_> = checkpoints
            .iter()
            .filter(|c| c.round == 2 && c.worker != addr(&cheat))
            .collect();
        assert_eq!(round2.len(), 2, "{checkpoints:?}");
        assert_eq!(round2[0].start_weights_hash, round2[1].start_weights_hash);
        // ... having left out the cheat's pseudo-gradient, which it committed and withheld.
        for i in [0, 1] {
            let log =
                std::fs::read_to_string(net.node(i).app_log.with_file_name("trainer.log")).unwrap();
            assert!(
                log.contains("leaving out a committed pseudo-gradient"),
                "trainer {i} never left out the withheld pseudo-gradient"
            );
        }
        assert!(bonded(&net, &cheat).await <= bonded_before - bonded_before / 5);

        // Each honest trainer's metrics count the checkpoints the chain holds of it, and the
        // trainers together count the re-executions the chain's verdicts came from.
        let mut reexecuted = 0.0;
        for i in 0..VALIDATORS {
            let metrics =
                crate::support::scrape(gonka_localnet::sidecar::trainer_addr(net.node(i)));
            let worker = addr(&format!("validator{i}"));
            let on_chain = checkpoints.iter().filter(|c| c.worker == worker).count();
            if worker != addr(&cheat) {
                let committed = metrics
                    .get("gonka_trainer_checkpoints_total{outcome=\"committed\"}")
                    .copied()
                    .unwrap_or(0.0);
                assert!(
                    committed >= on_chain as f64,
                    "trainer {i}: {committed} counted, {on_chain} on chain: {metrics:?}"
                );
            }
            reexecuted += metrics
                .iter()
                .filter(|(name, _)| name.starts_with("gonka_trainer_reexecutions_total"))
                .map(|(_, v)| v)
                .sum::<f64>();
        }
        assert!(reexecuted > 0.0, "no trainer counted a re-execution");

        // The CLI shows the job as JSON.
        let shown = gonkad_json(&[
            "--node", &rpc, "--output", "json", "query", "pol", "job", "1",
        ]);
        assert_eq!(shown["job"]["id"], 1, "{shown}");

        serve_the_trained_model(&net, &done).await;
    });
}

/// The honest workers publish the trained model; an ML node of validator 0 loads it from a
/// trainer, registers, and answers a chat through TA 0 as the reference runtime does with
/// the published weights.
async fn serve_the_trained_model(net: &Net, done: &TrainingJob) {
    let model = eventually("the trained model in the model table", || async {
        net.clients[0]
            .query_all::<q::inference::Models>(QueryModelsRequest::default())
            .await
            .ok()?
            .into_iter()
            .find(|m| m.id == "pol/job-1")
    })
    .await;
    assert_eq!(model.trained_by_job, 1);
    let published = eventually("job 1 naming its model", || async {
        job(net).await.filter(|j| !j.model_id.is_empty())
    })
    .await;
    assert_eq!(published.model_id, "pol/job-1");

    // The model file of an honest worker hashes to the published SHA-256.
    let honest = done
        .workers
        .iter()
        .find(|w| w.active)
        .expect("an honest worker");
    let trainer: std::net::SocketAddr = honest
        .endpoint
        .trim_start_matches("http://")
        .parse()
        .unwrap();
    let (status, file) = http_get_bytes(trainer, "/pol/v1/jobs/1/model");
    assert_eq!(status, 200);
    use sha2::Digest;
    assert_eq!(sha2::Sha256::digest(&file).to_vec(), model.weights_sha256);

    // An ML node of validator 0 serving it: the hash comes from the chain.
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let binary = Path::new(env!("CARGO_BIN_EXE_gonkad")).with_file_name("gonka-sidecar");
    let node_home = &net.node(0).home;
    let log = std::fs::File::create(node_home.join("trained-ml-node.log")).unwrap();
    let _node = KillOnDrop(
        std::process::Command::new(&binary)
            .args([
                "ml-node",
                "--chain-rpc",
                &net.node(0).rpc_url,
                "--mnemonic-file",
            ])
            .arg(node_home.join("sidecar").join("operator.mnemonic"))
            .args(["--response-key-file"])
            .arg(dir.path().join("trained.key"))
            .args([
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--node-id",
                "node0-trained",
                "--model-id",
                "pol/job-1",
                "--weights-url",
                &format!("{}/pol/v1/jobs/1/model", honest.endpoint),
            ])
            .env("RUST_LOG", "info")
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    eventually("the trained model's ML node registered", || async {
        net.clients[0]
            .query::<q::inference::Node>(&QueryNodeRequest {
                node_id: "node0-trained".into(),
            })
            .await
            .ok()?
            .node
            .filter(|n| n.models == ["pol/job-1"])
    })
    .await;

    // A chat through TA 0, retried while the TA re-reads the registry.
    let alice = Key::from_mnemonic(&well_known_mnemonic("alice")).unwrap();
    let tas = net.net.transfer_agent_urls();
    let client = ChatClient::new(alice, &tas[..1]).unwrap();
    let prompt = "Train me, gonka";
    let mut request = ChatRequest::new("pol/job-1", vec![Message::user(prompt)]);
    request.max_tokens = Some(24);
    request.stream = false;
    request.commission = crate::inference::COMMISSION;
    let answer = eventually("a chat answered by the trained model", || async {
        client.chat(&request, |_| {}).await.ok()
    })
    .await;
    assert_eq!(answer.executor.as_deref(), Some("node0-trained"));
    // Exactly what the reference runtime makes of the published weights, and not what the
    // untrained reference model says.
    let prompt_tokens = gonka_model::encode_chat(&[gonka_model::ChatTurn {
        role: "user",
        content: prompt,
    }]);
    let say = |model: gonka_model::ReferenceModel| {
        gonka_model::decode(&model.generate(&prompt_tokens, 24))
    };
    let weights = gonka_model::weights::Weights::from_bytes(&file).unwrap();
    assert_eq!(
        answer.content,
        say(gonka_model::ReferenceModel::from_weights(0, weights))
    );
    assert_ne!(
        answer.content,
        say(gonka_model::ReferenceModel::new(gonka_model::DEFAULT_SEED)),
        "training changed what the model says"
    );
}
