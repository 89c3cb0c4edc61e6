//! The `gonka-sidecar ml-node` command line.

use std::io::Write;
use std::net::SocketAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, Context};
use gonka_client::Client;
use gonka_proto::inference::Node;
use k256::ecdsa::SigningKey;
use k256::elliptic_curve::rand_core::OsRng;

use super::access::{self, Callers};
use super::forward::Upstream;
use super::register::{self, Registration};
use super::MlNodeConfig;
use gonka_client::key_from_mnemonic_file;
use gonka_client::server::ServerArgs;
use gonka_model as reference;

/// How often an ML node on chain re-reads the registered transfer agents it serves.
const TRANSFER_AGENT_REFRESH: Duration = Duration::from_secs(10);

/// Arguments of `gonka-sidecar ml-node`.
#[derive(Debug, clap::Args)]
pub struct MlNodeArgs {
    /// Address to listen on.
    #[arg(long, env = "GONKA_ML_NODE_LISTEN", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Model id clients must name in requests (and the node registers on chain).
    #[arg(long, default_value = super::DEFAULT_MODEL_ID)]
    model_id: String,
    /// Id of this ML node on chain and in its receipts: 1 to 64 of [A-Za-z0-9._-].
    #[arg(long, default_value = super::DEFAULT_NODE_ID, value_parser = parse_node_id)]
    node_id: String,
    /// File holding the hex of the node's 32-byte secp256k1 response key, which signs
    /// receipts; created (mode 0600) if missing. Without it the node signs no receipts.
    #[arg(long, value_name = "PATH")]
    response_key_file: Option<PathBuf>,
    /// Seed of the reference model's weights (every ML node of a network must agree).
    #[arg(long, default_value_t = reference::DEFAULT_SEED)]
    seed: u64,
    /// Serve the weights file at this URL instead of the seed's: a model trained on chain,
    /// published by its trainers at http://TRAINER/pol/v1/jobs/{job}/model. Checked against
    /// the SHA-256 the chain's model table holds for --model-id (with --chain-rpc) or
    /// --weights-sha256; the node refuses to start on a mismatch.
    #[arg(long, value_name = "URL", conflicts_with = "upstream_url")]
    weights_url: Option<String>,
    /// Hex SHA-256 the --weights-url file must have; needed without --chain-rpc, and must
    /// equal the model table's hash with it.
    #[arg(long, value_name = "HEX", requires = "weights_url", value_parser = parse_sha256)]
    weights_sha256: Option<[u8; 32]>,
    /// Also serve the language model in this GGUF file (SmolLM2-135M-Instruct as
    /// `scripts/fetch-model.sh` stores it) under --llm-model-id, run on this machine's CPU.
    #[arg(long, value_name = "PATH")]
    llm_model_file: Option<PathBuf>,
    /// Model id of --llm-model-file, as clients name it and the chain prices it.
    #[arg(long, default_value = super::LLM_MODEL_ID, requires = "llm_model_file")]
    llm_model_id: String,
    /// Receipt --llm-model-file's answers as the chain does for a model it validates by
    /// log-probabilities: over their scored output with K alternatives per position (1 to
    /// 20). With --chain-rpc the chain's model table decides (its logprob_top_k for a
    /// "logprobs" model, text receipts for an "exact" one) and this flag only warns when it
    /// disagrees; for nodes off chain and tests.
    #[arg(
        long,
        value_name = "K",
        requires = "llm_model_file",
        value_parser = clap::value_parser!(u32).range(1..=i64::from(gonka_proto::scored::MAX_TOP_K))
    )]
    llm_logprob_top_k: Option<u32>,
    /// Forward requests to this OpenAI-compatible server (vLLM, llama.cpp),
    /// http://HOST:PORT, instead of running the built-in reference model.
    #[arg(long, value_name = "URL")]
    upstream_url: Option<String>,
    /// Model name sent to the upstream instead of --model-id.
    #[arg(long, value_name = "NAME", requires = "upstream_url")]
    upstream_model: Option<String>,
    /// API key sent to the upstream as `Authorization: Bearer`.
    #[arg(
        long,
        value_name = "KEY",
        env = "GONKA_ML_NODE_UPSTREAM_API_KEY",
        hide_env_values = true,
        requires = "upstream_url"
    )]
    upstream_api_key: Option<String>,
    /// Requests served at once; more get 503.
    #[arg(
        long,
        default_value_t = 4,
        value_parser = clap::value_parser!(u32).range(1..=gonka_proto::ids::MAX_NODE_CONCURRENCY as i64)
    )]
    max_concurrency: u32,
    /// Largest `max_tokens` a request may ask for.
    #[arg(long, default_value_t = 4096)]
    max_tokens_cap: u32,
    /// `max_tokens` used when a request names none.
    #[arg(long, default_value_t = 256)]
    default_max_tokens: u32,
    /// Largest chat-formatted prompt accepted, in bytes.
    #[arg(long, default_value_t = 64 * 1024)]
    max_prompt_bytes: usize,
    /// Largest request body accepted, in bytes.
    #[arg(long, default_value_t = 1024 * 1024)]
    max_body_bytes: usize,
    /// Largest co-sign request accepted (a transfer agent's batch with every leaf of this
    /// node's host, about 2.5 kB per leaf), in bytes.
    #[arg(long, default_value_t = crate::MAX_COSIGN_BODY_BYTES)]
    max_cosign_body_bytes: usize,
    /// CometBFT RPC of the chain to register this node on (e.g. http://127.0.0.1:26657);
    /// without it the node runs unregistered.
    #[arg(
        long,
        value_name = "URL",
        requires = "mnemonic_file",
        requires = "response_key_file"
    )]
    chain_rpc: Option<String>,
    /// File holding the BIP-39 mnemonic of the host's account (a staked participant), which
    /// signs the registration.
    #[arg(long, value_name = "PATH", requires = "chain_rpc")]
    mnemonic_file: Option<PathBuf>,
    /// URL transfer agents reach this node at, as registered on chain [default: http://LISTEN].
    #[arg(long, value_name = "URL")]
    endpoint: Option<String>,
    /// VRAM of the node in MiB, as registered on chain.
    #[arg(long, default_value_t = 0)]
    vram_mib: u64,
    /// Bandwidth of the node in Mbit/s, as registered on chain.
    #[arg(long, default_value_t = 1000)]
    bandwidth_mbps: u64,
    #[command(flatten)]
    server: ServerArgs,
    #[command(flatten)]
    testing: TestingArgs,
}

/// The test-only flags of `gonka-sidecar ml-node` (`testing` feature).
#[cfg(feature = "testing")]
#[derive(Debug, clap::Args)]
struct TestingArgs {
    /// FOR TESTS AND THE SIMULATION ONLY: answer this fraction (0.0 to 1.0) of the requests
    /// a transfer agent sends with a wrong completion, signed as if it were right, so
    /// validators catch it and the host is slashed. Built-in reference model only.
    #[arg(
        long,
        default_value_t = 0.0,
        value_parser = parse_fraction,
        conflicts_with = "upstream_url"
    )]
    testing_cheat_fraction: f64,
}

/// Release builds (no `testing` feature) have no test-only flags.
#[cfg(not(feature = "testing"))]
#[derive(Debug, clap::Args)]
struct TestingArgs {}

/// A fraction between 0.0 and 1.0.
#[cfg(feature = "testing")]
fn parse_fraction(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(f) if (0.0..=1.0).contains(&f) => Ok(f),
        _ => Err(format!(
            "expected a fraction between 0.0 and 1.0, found {text:?}"
        )),
    }
}

/// Node ids as the chain accepts them ([`gonka_proto::ids::is_valid_node_id`]).
fn parse_node_id(id: &str) -> Result<String, String> {
    if gonka_proto::ids::is_valid_node_id(id) {
        Ok(id.to_string())
    } else {
        Err(format!(
            "node id {id:?} must be {}",
            gonka_proto::ids::NODE_ID_RULE
        ))
    }
}

/// Reads the response key from `path`, or creates one there (mode 0600) if the file does
/// not exist.
fn load_or_create_response_key(path: &Path) -> anyhow::Result<SigningKey> {
    match std::fs::read_to_string(path) {
        Ok(text) => parse_response_key(&text)
            .with_context(|| format!("response key file {}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let key = SigningKey::random(&mut OsRng);
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
                .with_context(|| {
                    format!(
                        "creating the response key file {}; does its directory exist?",
                        path.display()
                    )
                })?;
            writeln!(file, "{}", hex::encode(key.to_bytes()))
                .with_context(|| format!("writing the response key file {}", path.display()))?;
            tracing::info!(
                path = %path.display(),
                pubkey = %hex::encode(key.verifying_key().to_encoded_point(true).as_bytes()),
                "created a new response key"
            );
            Ok(key)
        }
        Err(e) => {
            Err(e).with_context(|| format!("reading the response key file {}", path.display()))
        }
    }
}

/// A 32-byte hash from its 64 hex digits.
fn parse_sha256(text: &str) -> Result<[u8; 32], String> {
    hex::decode(text.trim())
        .ok()
        .and_then(|bytes| bytes.try_into().ok())
        .ok_or_else(|| format!("expected 64 hex digits of a SHA-256, found {text:?}"))
}

/// The trained weights the node serves, if any: those at --weights-url, checked against the
/// chain's model table (with --chain-rpc) and --weights-sha256. A model the table names
/// weights for is never served with the seed's.
async fn trained_weights(
    args: &MlNodeArgs,
    client: Option<&Client>,
) -> anyhow::Result<Option<std::sync::Arc<reference::weights::Weights>>> {
    let trained_id = args
        .model_id
        .starts_with(gonka_proto::ids::TRAINED_MODEL_PREFIX);
    let Some(url) = &args.weights_url else {
        if trained_id {
            anyhow::bail!(
                "{} was trained on chain: start with --weights-url http://TRAINER/pol/v1/jobs/{{job}}/model (any of its workers' trainers)",
                args.model_id
            );
        }
        return Ok(None);
    };
    let on_chain = match client {
        Some(client) => crate::weights::chain_sha256(client, &args.model_id).await?,
        None => None,
    };
    let expected = match (on_chain, args.weights_sha256) {
        (Some(chain), Some(given)) if chain != given => anyhow::bail!(
            "--weights-sha256 {} is not the chain's {} for {}",
            hex::encode(given),
            hex::encode(chain),
            args.model_id
        ),
        (Some(hash), _) | (None, Some(hash)) => hash,
        (None, None) => anyhow::bail!(
            "--weights-url needs --weights-sha256 (or --chain-rpc, whose model table holds the hash of a model trained on chain)"
        ),
    };
    let weights = crate::weights::load(url, &expected).await?;
    tracing::info!(role = "ml-node", model = %args.model_id, %url, sha256 = %hex::encode(expected), "loaded trained weights");
    Ok(Some(std::sync::Arc::new(weights)))
}

/// How the chain's model table validates a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChainValidation {
    /// The table does not list the model.
    Unlisted,
    /// `validation` "exact" (or empty): receipts commit to the text.
    Exact,
    /// `validation` "logprobs" with this `logprob_top_k`.
    Logprobs(u32),
}

/// How long a starting node waits for the chain to answer its model table (a localnet starts
/// its ML nodes beside CometBFT, whose RPC comes up a few seconds later).
const CHAIN_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

/// [`chain_validation`], asked again every second while the chain does not answer, for at
/// most [`CHAIN_WAIT`].
async fn chain_validation_soon(client: &Client, model_id: &str) -> anyhow::Result<ChainValidation> {
    let deadline = tokio::time::Instant::now() + CHAIN_WAIT;
    loop {
        match chain_validation(client, model_id).await {
            Ok(validation) => return Ok(validation),
            Err(e) if tokio::time::Instant::now() < deadline => {
                tracing::warn!(role = "ml-node", error = %format!("{e:#}"), "the chain does not answer yet; asking again in 1 s");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
            Err(e) => {
                return Err(e.context(format!(
                    "the chain at --chain-rpc did not answer within {CHAIN_WAIT:?}; is it running?"
                )))
            }
        }
    }
}

/// How the chain's model table validates `model_id`.
async fn chain_validation(client: &Client, model_id: &str) -> anyhow::Result<ChainValidation> {
    use gonka_proto::query as q;
    let models = client
        .query_all::<q::inference::Models>(gonka_proto::inference::QueryModelsRequest::default())
        .await
        .context("reading the chain's model table")?;
    let Some(model) = models.into_iter().find(|m| m.id == model_id) else {
        return Ok(ChainValidation::Unlisted);
    };
    if model.validation != "logprobs" {
        return Ok(ChainValidation::Exact);
    }
    let k = model.logprob_top_k;
    if !(1..=gonka_proto::scored::MAX_TOP_K).contains(&k) {
        anyhow::bail!(
            "the chain validates {model_id} by logprobs with logprob_top_k {k}, expected 1 to {}",
            gonka_proto::scored::MAX_TOP_K
        );
    }
    Ok(ChainValidation::Logprobs(k))
}

/// The scored-receipt top-k of the language model `model_id` ([`crate::LlmModel::logprob_top_k`]):
/// the chain's when the node runs on one (`chain`), else `--llm-logprob-top-k` (`flag`). A
/// flag the chain contradicts is overruled, with a warning.
fn llm_logprob_top_k(
    model_id: &str,
    chain: Option<ChainValidation>,
    flag: Option<u32>,
) -> Option<u32> {
    match (chain, flag) {
        (None, flag) => flag,
        (Some(ChainValidation::Unlisted), flag) => {
            tracing::warn!(role = "ml-node", model = %model_id, "the chain's model table does not list the language model; its receipts follow --llm-logprob-top-k");
            flag
        }
        (Some(ChainValidation::Exact), Some(k)) => {
            tracing::warn!(role = "ml-node", model = %model_id, flag = k, "the chain validates the language model exactly: its receipts commit to the text, --llm-logprob-top-k is ignored");
            None
        }
        (Some(ChainValidation::Exact), None) => None,
        (Some(ChainValidation::Logprobs(k)), Some(f)) if f != k => {
            tracing::warn!(role = "ml-node", model = %model_id, chain = k, flag = f, "the chain validates the language model by logprobs with its own top-k, which overrules --llm-logprob-top-k");
            Some(k)
        }
        (Some(ChainValidation::Logprobs(k)), _) => Some(k),
    }
}

/// A response key from the hex of its 32-byte secret.
fn parse_response_key(text: &str) -> anyhow::Result<SigningKey> {
    gonka_client::keys::parse_secret_key_hex(text)
}

/// Runs an ML node until Ctrl-C, registering it on chain in the background with
/// `--chain-rpc`.
pub async fn run(args: MlNodeArgs) -> anyhow::Result<()> {
    let response_key = args
        .response_key_file
        .as_deref()
        .map(load_or_create_response_key)
        .transpose()?;
    let upstream = args
        .upstream_url
        .as_deref()
        .map(|url| {
            Upstream::new(
                url,
                args.upstream_model.clone(),
                args.upstream_api_key.clone(),
            )
        })
        .transpose()
        .map_err(|e| anyhow!("--upstream-url {e}"))?;
    let chain = match (&args.chain_rpc, &args.mnemonic_file) {
        (Some(rpc), Some(mnemonic_file)) => {
            Some((Client::new(rpc)?, key_from_mnemonic_file(mnemonic_file)?))
        }
        _ => None,
    };
    let trained_weights = trained_weights(&args, chain.as_ref().map(|(client, _)| client)).await?;
    let llm = match &args.llm_model_file {
        None => None,
        Some(path) => {
            let started = std::time::Instant::now();
            let path = path.clone();
            let model = tokio::task::spawn_blocking(move || {
                gonka_llm::Llm::load(&path, gonka_llm::LoadOptions::default())
            })
            .await??;
            let chain_validation = match &chain {
                Some((client, _)) => Some(chain_validation_soon(client, &args.llm_model_id).await?),
                None => None,
            };
            let logprob_top_k =
                llm_logprob_top_k(&args.llm_model_id, chain_validation, args.llm_logprob_top_k);
            tracing::info!(role = "ml-node", model = %args.llm_model_id, ?model, ?logprob_top_k, load_ms = started.elapsed().as_millis() as u64, "language model loaded");
            Some(crate::LlmModel {
                id: args.llm_model_id.clone(),
                model: std::sync::Arc::new(model),
                logprob_top_k,
            })
        }
    };
    // On chain the node serves its host and the registered transfer agents only.
    let callers = chain.as_ref().map(|(client, host)| {
        let callers = Callers::on_chain(host.address(), client.clone());
        tokio::spawn(access::refresh_from_chain(
            callers.clone(),
            TRANSFER_AGENT_REFRESH,
        ));
        callers
    });
    // On chain the node co-signs its host's batches with the host's BLS key.
    let cosigner = std::sync::Arc::new(std::sync::OnceLock::new());
    if let Some((client, host)) = &chain {
        let served = std::iter::once(args.model_id.clone())
            .chain(llm.as_ref().map(|m| m.id.clone()))
            .collect();
        tokio::spawn(crate::cosign::prepare(
            client.clone(),
            gonka_client::bls::account_bls_key(host),
            served,
            cosigner.clone(),
        ));
    }
    let config = MlNodeConfig {
        listen: args.listen,
        model_id: args.model_id,
        node_id: args.node_id,
        host: chain
            .as_ref()
            .map(|(_, host)| host.address().to_string())
            .unwrap_or_default(),
        max_skew_secs: MlNodeConfig::default().max_skew_secs,
        callers,
        response_key,
        cosigner,
        upstream,
        seed: args.seed,
        trained_weights,
        llm,
        max_concurrency: args.max_concurrency as usize,
        max_tokens_cap: args.max_tokens_cap,
        default_max_tokens: args.default_max_tokens,
        max_prompt_bytes: args.max_prompt_bytes,
        max_body_bytes: args.max_body_bytes,
        max_cosign_body_bytes: args.max_cosign_body_bytes,
        server: args.server.limits(),
        testing_delay_per_token: Duration::ZERO,
        #[cfg(feature = "testing")]
        testing_cheat_fraction: args.testing.testing_cheat_fraction,
    };
    #[cfg(feature = "testing")]
    if config.testing_cheat_fraction > 0.0 {
        tracing::warn!(
            role = "ml-node",
            fraction = config.testing_cheat_fraction,
            "TESTING: this ML node CHEATS: it answers this fraction of receipted requests with a wrong completion and signs it; never run this outside tests and simulations"
        );
    }
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding the ML node to {}", config.listen))?;
    let addr = listener.local_addr()?;
    let backend = match (&config.upstream, &config.trained_weights) {
        (Some(upstream), _) => upstream.url(),
        (None, Some(_)) => "reference runtime, trained weights",
        (None, None) => "reference model",
    };
    tracing::info!(
        role = "ml-node",
        %addr,
        node_id = %config.node_id,
        model = %config.model_id,
        backend,
        receipts = config.response_key.is_some(),
        max_concurrency = config.max_concurrency,
        "ML node listening"
    );
    match chain {
        Some((client, host)) => {
            let key = config.response_key.as_ref().ok_or_else(|| {
                anyhow!("--chain-rpc needs --response-key-file: the chain registers the key that signs receipts")
            })?;
            if args.endpoint.is_none() && addr.ip().is_unspecified() {
                tracing::warn!(%addr, "the registered endpoint defaults to http://{addr}, which transfer agents cannot reach; set --endpoint");
            }
            let node = Node {
                id: config.node_id.clone(),
                host: host.address().to_string(),
                models: config.models(),
                vram_mib: args.vram_mib,
                bandwidth_mbps: args.bandwidth_mbps,
                max_concurrency: config.max_concurrency as u64,
                endpoint: args.endpoint.unwrap_or_else(|| format!("http://{addr}")),
                pubkey: key
                    .verifying_key()
                    .to_encoded_point(true)
                    .as_bytes()
                    .to_vec(),
                key_proof: Vec::new(),
            };
            tokio::spawn(register::run(Registration {
                client,
                host,
                node,
                node_key: key.clone(),
            }));
        }
        None => tracing::info!(
            role = "ml-node",
            "no --chain-rpc: the ML node runs without registering on chain"
        ),
    }
    super::serve(listener, config, async {
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!(role = "ml-node", "shutting down");
    })
    .await
    .context("serving the ML node")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn response_keys_are_created_once_then_read_back() {
        let dir = std::env::temp_dir().join(format!("gonka-ml-node-key-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("response.key");
        let _ = std::fs::remove_file(&path);
        let created = load_or_create_response_key(&path).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let read = load_or_create_response_key(&path).unwrap();
        assert_eq!(created.to_bytes(), read.to_bytes());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn malformed_response_keys_say_what_was_expected() {
        let short = parse_response_key("abcd").unwrap_err().to_string();
        assert!(short.contains("found 2 bytes"), "{short}");
        let not_hex = parse_response_key("zz").unwrap_err().to_string();
        assert!(not_hex.contains("not hex"), "{not_hex}");
        assert!(parse_response_key(&"00".repeat(32)).is_err());
        assert!(parse_response_key(&format!("{}\n", "11".repeat(32))).is_ok());
    }

    /// `gonka-sidecar ml-node` as the binary parses it.
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: MlNodeArgs,
    }

    fn parse(args: &[&str]) -> Result<MlNodeArgs, clap::Error> {
        use clap::Parser;
        Cli::try_parse_from(std::iter::once("ml-node").chain(args.iter().copied())).map(|c| c.args)
    }

    /// Serves `body` to every connection at 127.0.0.1 (one request each), as a trainer
    /// serves its model file.
    async fn serve_file(body: Vec<u8>) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut request = [0u8; 1024];
                let _ = socket.read(&mut request).await;
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = socket.write_all(head.as_bytes()).await;
                let _ = socket.write_all(&body).await;
            }
        });
        format!("http://{addr}/pol/v1/jobs/1/model")
    }

    #[test]
    fn trained_weights_load_only_with_the_hash_they_have() {
        use sha2::{Digest, Sha256};
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let bytes = reference::weights::Weights::generate(5).to_bytes();
            let sha256 = hex::encode(Sha256::digest(&bytes));
            let url = serve_file(bytes.clone()).await;
            let with = |extra: &[&str]| {
                let mut flags = vec!["--model-id", "pol/job-1", "--weights-url", &url];
                flags.extend_from_slice(extra);
                parse(&flags).unwrap()
            };
            let loaded = trained_weights(&with(&["--weights-sha256", &sha256]), None)
                .await
                .unwrap()
                .expect("weights loaded");
            assert_eq!(loaded.to_bytes(), bytes);
            let wrong = "ab".repeat(32);
            let err = trained_weights(&with(&["--weights-sha256", &wrong]), None)
                .await
                .unwrap_err();
            assert!(format!("{err:#}").contains("not the expected"), "{err:#}");
            let err = trained_weights(&with(&[]), None).await.unwrap_err();
            assert!(err.to_string().contains("needs --weights-sha256"), "{err}");
            // A trained model id without weights is refused; a priced one needs none.
            let err = trained_weights(&parse(&["--model-id", "pol/job-1"]).unwrap(), None)
                .await
                .unwrap_err();
            assert!(
                err.to_string().contains("start with --weights-url"),
                "{err}"
            );
            assert!(trained_weights(&parse(&[]).unwrap(), None)
                .await
                .unwrap()
                .is_none());
        });
        assert!(
            parse(&["--weights-sha256", &"ab".repeat(32)]).is_err(),
            "needs --weights-url"
        );
        assert!(parse(&["--weights-url", "http://a:1/m", "--weights-sha256", "abc"]).is_err());
        assert!(parse(&[
            "--weights-url",
            "http://a:1/m",
            "--upstream-url",
            "http://b:1"
        ])
        .is_err());
    }

    #[test]
    fn flags_parse_with_defaults_and_dependencies() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
        let plain = parse(&[]).unwrap();
        assert_eq!(plain.node_id, super::super::DEFAULT_NODE_ID);
        assert!(plain.upstream_url.is_none() && plain.chain_rpc.is_none());
        assert_eq!((plain.vram_mib, plain.bandwidth_mbps), (0, 1000));

        let full = parse(&[
            "--node-id=gpu-1",
            "--response-key-file=/k",
            "--upstream-url=http://127.0.0.1:8000",
            "--upstream-model=Qwen/Qwen2.5-7B-Instruct",
            "--upstream-api-key=sk",
            "--chain-rpc=http://127.0.0.1:26657",
            "--mnemonic-file=/m",
            "--endpoint=http://10.0.0.2:8080",
            "--vram-mib=80000",
            "--bandwidth-mbps=10000",
        ])
        .unwrap();
        assert_eq!(
            full.upstream_model.as_deref(),
            Some("Qwen/Qwen2.5-7B-Instruct")
        );
        assert_eq!(full.endpoint.as_deref(), Some("http://10.0.0.2:8080"));

        // Registration needs the host's mnemonic and the response key; renaming needs an upstream.
        assert!(parse(&[
            "--chain-rpc=http://127.0.0.1:26657",
            "--response-key-file=/k"
        ])
        .is_err());
        assert!(parse(&["--chain-rpc=http://127.0.0.1:26657", "--mnemonic-file=/m"]).is_err());
        assert!(parse(&["--mnemonic-file=/m"]).is_err());
        assert!(parse(&["--upstream-model=x"]).is_err());
        assert!(parse(&["--node-id=bad id"]).is_err());
    }

    #[cfg(feature = "testing")]
    #[test]
    fn the_cheat_fraction_is_a_fraction_of_the_built_in_model() {
        assert_eq!(parse(&[]).unwrap().testing.testing_cheat_fraction, 0.0);
        let cheat = parse(&["--testing-cheat-fraction=0.25"]).unwrap();
        assert_eq!(cheat.testing.testing_cheat_fraction, 0.25);
        assert!(parse(&["--testing-cheat-fraction=1.5"]).is_err());
        assert!(parse(&[
            "--testing-cheat-fraction=0.5",
            "--upstream-url=http://127.0.0.1:8000"
        ])
        .is_err());
    }

    #[test]
    fn the_llm_logprob_top_k_comes_from_the_chain_else_the_flag() {
        assert_eq!(parse(&[]).unwrap().llm_logprob_top_k, None);
        let flagged = parse(&["--llm-model-file=/m.gguf", "--llm-logprob-top-k=5"]).unwrap();
        assert_eq!(flagged.llm_logprob_top_k, Some(5));
        assert!(
            parse(&["--llm-logprob-top-k=5"]).is_err(),
            "needs a model file"
        );
        for bad in ["0", "21"] {
            let flag = format!("--llm-logprob-top-k={bad}");
            assert!(
                parse(&["--llm-model-file=/m.gguf", &flag]).is_err(),
                "{bad}"
            );
        }
        use ChainValidation::*;
        for (chain, flag, expected) in [
            (None, None, None),
            (None, Some(5), Some(5)),
            (Some(Unlisted), Some(5), Some(5)),
            (Some(Exact), Some(5), None),
            (Some(Exact), None, None),
            (Some(Logprobs(8)), None, Some(8)),
            (Some(Logprobs(8)), Some(5), Some(8)),
            (Some(Logprobs(8)), Some(8), Some(8)),
        ] {
            assert_eq!(
                llm_logprob_top_k("m", chain, flag),
                expected,
                "{chain:?} {flag:?}"
            );
        }
    }

    #[test]
    fn node_ids_follow_the_chains_rule() {
        assert!(parse_node_id("gpu-node_1.a").is_ok());
        assert!(parse_node_id("").is_err());
        assert!(parse_node_id("has space").is_err());
        assert!(parse_node_id(&"x".repeat(65)).is_err());
    }
}
