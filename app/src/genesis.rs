//! Building genesis `app_state`, the JSON CometBFT's genesis.json carries for `InitChain`.

use gonka_proto::{auth, bank};

/// One funded genesis account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenesisAccount {
    /// Bech32 address.
    pub address: String,
    /// Balance in ngnk.
    pub ngnk: u128,
}

/// `app_state` with the default auth parameters except `min_fee`, funding `accounts`.
pub fn app_state(accounts: &[GenesisAccount], min_fee: u128) -> serde_json::Value {
    let auth = auth::GenesisState {
        params: Some(auth::Params {
            min_fee: min_fee.to_string(),
            ..gonka_auth::default_params()
        }),
        addresses: Vec::new(),
    };
    let bank = bank::GenesisState {
        balances: accounts
            .iter()
            .map(|account| bank::Balance {
                address: account.address.clone(),
                coins: vec![bank::Coin {
                    denom: gonka_bank::NATIVE_DENOM.into(),
                    amount: account.ngnk.to_string(),
                }],
            })
            .collect(),
    };
    serde_json::json!({ gonka_auth::NAME: auth, gonka_bank::NAME: bank })
}
