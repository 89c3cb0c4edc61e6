//! `gonkad query epochs`: `/epochs/current`, `/epochs/epoch`.

use anyhow::Result;
use gonka_proto::epochs::{
    Epoch, QueryCurrentRequest, QueryCurrentResponse, QueryEpochRequest, QueryEpochResponse,
};
use gonka_proto::query as q;

use super::show;

use crate::output::{fields, unix_time};
use crate::Global;

/// `gonkad query epochs` subcommands.
#[derive(clap::Subcommand)]
pub enum Query {
    /// The running epoch and the epoch length.
    Current,
    /// One epoch, finished or running.
    Epoch {
        /// Epoch number.
        number: u64,
    },
}

/// Runs a `gonkad query epochs` subcommand.
pub async fn run(global: &Global, query: Query) -> Result<()> {
    match query {
        Query::Current => {
            show::<q::epochs::Current>(
                global,
                QueryCurrentRequest {},
                |r: &QueryCurrentResponse| {
                    let length = r.params.as_ref().map_or(0, |p| p.epoch_length);
                    format!("{}\nepoch_length: {length} blocks", epoch_text(&r.epoch))
                },
            )
            .await
        }
        Query::Epoch { number } => {
            show::<q::epochs::Epoch>(
                global,
                QueryEpochRequest { number },
                |r: &QueryEpochResponse| epoch_text(&r.epoch),
            )
            .await
        }
    }
}

fn epoch_text(epoch: &Option<Epoch>) -> String {
    let Some(epoch) = epoch else {
        return "no epoch in the answer".into();
    };
    let mut rows = vec![
        ("epoch", epoch.number.to_string()),
        ("start_height", epoch.start_height.to_string()),
        ("start_time", unix_time(epoch.start_time)),
    ];
    if epoch.end_height == 0 {
        rows.push(("end_height", "running".into()));
    } else {
        rows.push(("end_height", epoch.end_height.to_string()));
        rows.push(("end_time", unix_time(epoch.end_time)));
    }
    fields(&rows)
}
