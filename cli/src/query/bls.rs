//! `gonkad query bls`: `/bls/key`, `/bls/keys`.

use anyhow::Result;
use gonka_proto::bls::{
    BlsKey, QueryKeyRequest, QueryKeyResponse, QueryKeysRequest, QueryKeysResponse,
};
use gonka_proto::query as q;

use super::{show, show_page, PageArgs};
use crate::output::{fields, list};
use crate::Global;

/// `gonkad query bls` subcommands.
#[derive(clap::Subcommand)]
pub enum Query {
    /// A participant's registered BLS public key.
    Key {
        /// Participant address (gonka1...).
        address: String,
    },
    /// Every registered BLS key, by address.
    Keys {
        #[command(flatten)]
        page: PageArgs,
    },
}

/// Runs a `gonkad query bls` subcommand.
pub async fn run(global: &Global, query: Query) -> Result<()> {
    match query {
        Query::Key { address } => {
            show::<q::bls::Key>(
                global,
                QueryKeyRequest { address },
                |r: &QueryKeyResponse| r.key.as_ref().map(key_text).unwrap_or_default(),
            )
            .await
        }
        Query::Keys { page } => {
            show_page::<q::bls::Keys>(
                global,
                QueryKeysRequest::default(),
                &page,
                |r: &QueryKeysResponse| list(&r.keys, "no BLS keys registered", key_text),
            )
            .await
        }
    }
}

fn key_text(k: &BlsKey) -> String {
    fields(&[
        ("address", k.address.clone()),
        ("pubkey", hex::encode(&k.pubkey)),
        ("registered_height", k.registered_height.to_string()),
    ])
}
