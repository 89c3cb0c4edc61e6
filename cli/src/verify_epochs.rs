//! `gonkad verify-epochs`: a light client of the epoch certificates. It trusts only the
//! genesis.json it is given (the chain id and the genesis validators' BLS keys), fetches the
//! certificates and group handovers from the node, and checks every link itself
//! (`gonka_bls::light`): the node it asks cannot make it accept a tampered summary or key.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use gonka_bls::light::{signer_name, verify_epochs, Trust};
use gonka_proto::bls::{QueryCertificateRequest, QueryHandoverRequest, SignRequest};
use gonka_proto::query as q;
use serde_json::json;

use crate::Global;

/// Arguments of `gonkad verify-epochs`.
#[derive(clap::Args)]
pub struct Args {
    /// The chain's genesis.json (e.g. `.localnet/node0/cometbft/config/genesis.json`): the
    /// only thing trusted.
    #[arg(long, value_name = "FILE")]
    genesis: PathBuf,
    /// Last epoch to verify [default: every signed certificate].
    #[arg(long, value_name = "EPOCH")]
    to: Option<u64>,
}

/// Fetches and verifies the certificates; fails naming the first bad link.
pub async fn run(global: &Global, args: Args) -> Result<()> {
    let text = std::fs::read(&args.genesis)
        .with_context(|| format!("reading {}", args.genesis.display()))?;
    let genesis: serde_json::Value = serde_json::from_slice(&text)
        .with_context(|| format!("{} is not JSON", args.genesis.display()))?;
    let trust = Trust::from_genesis(&genesis).map_err(anyhow::Error::msg)?;
    let client = global.client()?;
    let mut certificates: Vec<SignRequest> = Vec::new();
    loop {
        let epoch = certificates.len() as u64;
        if args.to.is_some_and(|to| epoch > to) {
            break;
        }
        let Ok(answer) = client
            .query::<q::bls::Certificate>(&QueryCertificateRequest { epoch })
            .await
        else {
            break;
        };
        match answer.certificate {
            Some(c) if !c.signature.is_empty() => certificates.push(c),
            _ => break,
        }
        eprint!("\rfetched {} certificates", certificates.len());
    }
    eprintln!();
    if certificates.is_empty() {
        bail!("the node has no signed epoch certificate yet; the first comes in the block after epoch 0 ends");
    }
    let mut wanted: BTreeSet<u64> = certificates
        .iter()
        .flat_map(|c| {
            [
                c.signer_round,
                c.summary.as_ref().map_or(0, |s| s.group_round),
            ]
        })
        .filter(|r| *r > 0)
        .collect();
    let mut handovers = BTreeMap::new();
    while let Some(round) = wanted.pop_first() {
        if handovers.contains_key(&round) {
            continue;
        }
        let request = QueryHandoverRequest { round };
        if let Ok(answer) = client.query::<q::bls::Handover>(&request).await {
            if let Some(handover) = answer.handover {
                if handover.signer_round > 0 {
                    wanted.insert(handover.signer_round);
                }
                handovers.insert(round, handover);
            }
        }
    }
    match verify_epochs(&trust, &certificates, &handovers) {
        Ok(verified) => {
            global.output.print(
                json!({
                    "chain_id": trust.chain_id,
                    "verified_epochs": verified.len(),
                    "epochs": verified.iter().map(|v| json!({"epoch": v.epoch, "signer_round": v.signer_round})).collect::<Vec<_>>(),
                }),
                || {
                    verified
                        .iter()
                        .map(|v| format!("epoch {}: verified (signed by {})", v.epoch, signer_name(v.signer_round)))
                        .chain([format!(
                            "{} epochs of {} verified from {}",
                            verified.len(),
                            trust.chain_id,
                            args.genesis.display()
                        )])
                        .collect::<Vec<_>>()
                        .join("\n")
                },
            );
            Ok(())
        }
        Err(bad) => bail!(
            "epoch {} does not verify: {} (epochs before it verified)",
            bad.epoch,
            bad.reason
        ),
    }
}
