//! Training on the localnet: three validators' trainers join a job created with `gonkad tx pol
//! create-job`, train two DiLoCo rounds together (exchanging pseudo-gradients directly), and
//! commit every checkpoint on chain. One trainer cheats (stale weights); with every
//! checkpoint sampled, its verifier re-executes the round and disagrees, the committee agrees
//! with the verifier, and the cheat is slashed 20% while the honest workers' checkpoints are
//! verified and paid. The fourth validator's trainer only re-executes.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gonka_client::keys::well_known_mnemonic;
use gonka_localnet::AppStateFn;
use gonka_proto::pol::{
    CheckpointStatus, JobStatus, QueryCheckpointsRequest, QueryJobRequest, TrainingJob,
};
use gonka_proto::query as q;
use gonka_proto::stake::QueryParticipantRequest;

use crate::inference::{genesis_config, sidecars};
use crate::support::{addr, gonkad, gonkad_json, gonkad_ok, Net, VALIDATORS};

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
    net.clients[1]
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
fn three_trainers_train_together_and_the_cheat_is_slashed() {
    crate::support::run(async {
        let net = Net::start_with("training", VALIDATORS, |config| {
            config.app_state_for_validators = Some(AppStateFn(Arc::new(|keys| {
                let mut genesis = genesis_config(keys, 100_000);
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

        let home = tempfile::tempdir().unwrap();
        let home = home.path().to_str().unwrap();
        let import = gonkad(&[
            "--home",
            home,
            "keys",
            "import",
            "alice",
            "--mnemonic",
            &well_known_mnemonic("alice"),
        ]);
        assert!(import.status.success(), "{import:?}");
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
        let checkpoints: Vec<_> = net.clients[2]
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
        assert!(bonded(&net, &cheat).await <= bonded_before - bonded_before / 5);

        // The CLI shows the job as JSON.
        let shown = gonkad_json(&[
            "--node", &rpc, "--output", "json", "query", "pol", "job", "1",
        ]);
        assert_eq!(shown["job"]["id"], 1, "{shown}");
    });
}
