//! `gonkad chat`: ask a model a question through a transfer agent, with a request signed by a
//! key from the keyring, and print the answer as it streams in.

use std::io::Write;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use gonka_client::chat::{
    base_url, discover_transfer_agents, identity, ChatClient, ChatError, ChatRequest, Message,
    DEFAULT_MODEL, LLM_MODEL,
};

use crate::amount::parse_ngnk;
use crate::keys::load_key;
use crate::output::Output;
use crate::Global;

/// Longest wait for a TA's `/v1/identity` when learning the other TAs it knows.
const IDENTITY_TIMEOUT: Duration = Duration::from_secs(5);

/// `gonkad chat` arguments.
#[derive(clap::Args)]
#[command(after_help = "\
Text output streams the answer to stdout; which transfer agent answered (and any it failed \
over from) goes to stderr. --output json prints one object: \
{content, model, usage, inference_id, executor, transfer_agent, failed_over: [{url, error}]}.

A transfer agent that cannot be reached, does not answer within --timeout-secs, or answers \
5xx or 429 is skipped for the next one; any other refusal (e.g. 401 for a bad signature or \
a clock more than a minute off) stops at once.

Examples:
  gonkad chat --from alice 'What is gonka?'
  gonkad chat --from alice --ta http://127.0.0.1:8080 --max-tokens 64 --no-stream Hello")]
pub struct Args {
    /// Key (name in the keyring) that signs the request; its account pays.
    #[arg(long, value_name = "KEY")]
    from: String,
    /// Transfer agent base URL (e.g. http://127.0.0.1:8080); repeat to fail over in order.
    /// Given one, the others it knows (GET /v1/identity) are tried after it. Without --ta,
    /// the transfer agents registered on chain are used (asked over --node).
    #[arg(long = "ta", value_name = "URL")]
    transfer_agents: Vec<String>,
    /// Model to ask [default: the language model HuggingFaceTB/SmolLM2-135M-Instruct when an
    /// ML node on chain serves it, else gonka/reference-1].
    #[arg(long)]
    model: Option<String>,
    /// Most tokens to generate (signed with the request) [default: 256].
    #[arg(long, value_name = "N")]
    max_tokens: Option<u32>,
    /// Most to pay per token (signed with the request; 10ngnk or a bare number of ngnk);
    /// the price the transfer agent lists for the model when omitted.
    #[arg(long, value_name = "NGNK", value_parser = parse_ngnk)]
    max_price: Option<u128>,
    /// Commission offered to the transfer agent, signed with the request (1500ngnk, 0.5gnk
    /// or a bare number of ngnk); higher bids are served first when ML nodes are busy.
    #[arg(long, value_name = "NGNK", default_value = "0", value_parser = parse_ngnk)]
    commission: u128,
    /// A system message (instructions) sent before the prompt.
    #[arg(long, value_name = "TEXT")]
    system: Option<String>,
    /// Wait for the whole answer instead of streaming it token by token.
    #[arg(long)]
    no_stream: bool,
    /// Seconds to wait for a transfer agent to start answering (and between two streamed
    /// chunks) before giving up on it.
    #[arg(long, value_name = "N", default_value_t = 30)]
    timeout_secs: u64,
    /// The question; several words are joined with spaces.
    #[arg(required = true, value_name = "PROMPT")]
    prompt: Vec<String>,
}

/// Runs `gonkad chat`.
pub async fn run(global: &Global, args: Args) -> Result<()> {
    let key = load_key(global, &args.from)?;
    let timeout = Duration::from_secs(args.timeout_secs);
    let transfer_agents = transfer_agents(global, &args.transfer_agents).await?;
    let client = ChatClient::new(key, &transfer_agents)?.with_timeout(timeout);

    let mut messages: Vec<Message> = args.system.into_iter().map(Message::system).collect();
    messages.push(Message::user(args.prompt.join(" ")));
    let model = match args.model {
        Some(model) => model,
        None => default_model(global).await,
    };
    let request = ChatRequest {
        model,
        messages,
        max_tokens: args.max_tokens,
        max_price_per_token: args.max_price,
        stream: !args.no_stream,
        commission: args.commission,
        sampling: Default::default(),
    };

    let text = global.output == Output::Text;
    let mut stdout = std::io::stdout();
    let mut streamed = false;
    let result = client
        .chat(&request, |delta| {
            if text {
                // A closed stdout (e.g. `| head`) ends the output, not the request.
                let _ = stdout
                    .write_all(delta.as_bytes())
                    .and_then(|()| stdout.flush());
                streamed = true;
            }
        })
        .await;
    let response = match result {
        Ok(response) => response,
        Err(e) => {
            if streamed {
                let _ = writeln!(stdout);
            }
            return Err(explain(e));
        }
    };
    if !text {
        let json = serde_json::to_value(&response).expect("a chat response serializes");
        global.output.print(json, String::new);
        return Ok(());
    }
    if !streamed {
        write!(stdout, "{}", response.content)?;
    }
    writeln!(stdout)?;
    stdout.flush()?;
    for failed in &response.failed_over {
        eprintln!("skipped TA {}: {}", failed.url, failed.error);
    }
    let unknown = || "?".to_string();
    eprintln!(
        "via TA {} (inference {}, executor {})",
        response.transfer_agent,
        response.inference_id.clone().unwrap_or_else(unknown),
        response.executor.clone().unwrap_or_else(unknown),
    );
    Ok(())
}

/// The language model when an ML node registered on chain serves it, else the reference
/// model (also when the chain cannot be asked).
async fn default_model(global: &Global) -> String {
    let served = async {
        let nodes = global
            .client()?
            .query::<gonka_proto::query::inference::Nodes>(&Default::default())
            .await?
            .nodes;
        anyhow::Ok(
            nodes
                .iter()
                .any(|n| n.models.iter().any(|m| m == LLM_MODEL)),
        )
    };
    match served.await {
        Ok(true) => LLM_MODEL.to_string(),
        Ok(false) => DEFAULT_MODEL.to_string(),
        Err(e) => {
            tracing::debug!(error = %e, "cannot list the ML nodes on chain; asking the reference model");
            DEFAULT_MODEL.to_string()
        }
    }
}

/// The TAs to try: those given (one given TA adds the others it knows), else those on chain.
pub(crate) async fn transfer_agents(global: &Global, given: &[String]) -> Result<Vec<String>> {
    match given {
        [] => {
            let rpc = global.client()?;
            let found = discover_transfer_agents(&rpc)
                .await
                .context("cannot list the transfer agents registered on chain; pass --ta URL")?;
            if found.is_empty() {
                bail!(
                    "no transfer agent is registered on chain (asked {}); pass --ta URL",
                    rpc.url()
                );
            }
            Ok(found)
        }
        [only] => {
            let mut urls = vec![only.clone()];
            match identity(only, IDENTITY_TIMEOUT).await {
                Ok(identity) => urls.extend(
                    identity
                        .transfer_agents
                        .into_iter()
                        .filter_map(|ta| base_url(&ta.url).ok()),
                ),
                Err(e) => tracing::debug!(error = %e, "cannot learn other TAs from --ta"),
            }
            Ok(urls)
        }
        many => Ok(many.to_vec()),
    }
}

/// A chat error with what to do next.
fn explain(error: ChatError) -> anyhow::Error {
    let hint = match &error {
        ChatError::Refused { status: 401, .. } => {
            "; check that --from names a valid key and that this machine's clock is right"
        }
        ChatError::Refused {
            code: Some(code), ..
        } if code == "model_not_found" => "; pick another --model (the TA lists its models at GET /v1/models)",
        ChatError::Exhausted(_) => {
            "; check that the transfer agents are running and reachable, or retry later (a longer --timeout-secs helps with busy ones)"
        }
        _ => "",
    };
    anyhow::anyhow!("{error}{hint}")
}
