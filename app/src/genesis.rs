//! Building genesis `app_state`, the JSON CometBFT's genesis.json carries for `InitChain`.

use gonka_proto::gas::GasPrice;
use gonka_proto::{auth, bank, bls, disputes, epochs, inference, pol, rewards, settlement, stake};

/// Share of each epoch's rewards a chain built from [`GenesisConfig`] sends to the
/// validation pool when no rewards parameters are given: 5%, which pays the re-execution of
/// the 1% to 10% of work records the disputes module samples, at the records' own price.
pub const DEFAULT_VALIDATION_SHARE_PPM: u64 = 50_000;

/// Disputes parameters for short-lived test networks: the default sampling, rewards and
/// penalties, with an 8-block challenge window (2 blocks to validate, 1 to reveal, 3 to vote,
/// user disputes within 3 blocks), which fits an unbonding as short as 8 blocks.
pub fn quick_disputes_params() -> disputes::Params {
    disputes::Params {
        validation_deadline_blocks: 2,
        reveal_deadline_blocks: 1,
        dispute_deadline_blocks: 3,
        dispute_window_blocks: 3,
        ..gonka_disputes::default_params()
    }
}

/// One funded genesis account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenesisAccount {
    /// Bech32 address.
    pub address: String,
    /// Balance in ngnk.
    pub ngnk: u128,
}

/// A genesis participant that is also a genesis validator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenesisValidator {
    /// Operator account (bech32).
    pub operator: String,
    /// Display name.
    pub moniker: String,
    /// CometBFT ed25519 consensus public key.
    pub consensus_pubkey: [u8; 32],
    /// Bonded stake in ngnk (minted into the bonded pool).
    pub stake_ngnk: u128,
}

/// What a new chain starts with. Unset module parameters take their defaults.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GenesisConfig {
    /// Funded accounts.
    pub accounts: Vec<GenesisAccount>,
    /// Bonded participants with consensus keys: the initial validator set. Empty keeps
    /// CometBFT's genesis.json validators.
    pub validators: Vec<GenesisValidator>,
    /// Least fee per unit of gas (`None`: the auth default).
    pub min_gas_price: Option<GasPrice>,
    /// Blocks per epoch (`None`: the epochs default).
    pub epoch_length: Option<u64>,
    /// Stake parameters (`None`: defaults).
    pub stake_params: Option<stake::Params>,
    /// Rewards parameters (`None`: the rewards defaults with a validation share of
    /// [`DEFAULT_VALIDATION_SHARE_PPM`], so validations are paid).
    pub rewards_params: Option<rewards::Params>,
    /// Models ML nodes may serve, with their prices.
    pub models: Vec<inference::Model>,
    /// Disputes parameters (`None`: defaults). Their challenge window must fit in
    /// `unbonding_epochs × epoch_length` (genesis refuses it otherwise).
    pub disputes_params: Option<disputes::Params>,
    /// Registered BLS keys. The validators' keys make them the genesis signers, who sign
    /// epoch certificates until the first group exists and vouch for its key.
    pub bls_keys: Vec<bls::BlsKey>,
    /// Settlement parameters (`None`: the defaults with the challenge window shortened to
    /// fit inside the unbonding period, which genesis requires, and the leaf answer time
    /// inside the window).
    pub settlement_params: Option<settlement::Params>,
    /// Escrows open from the start; their money is minted into the settlement pool.
    pub escrows: Vec<GenesisEscrow>,
    /// Pol (training) parameters (`None`: defaults).
    pub pol_params: Option<pol::Params>,
}

/// An escrow open at genesis: `ngnk` of `requester` for `transfer_agent`, closing at height
/// `expires_at` and released a challenge window later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenesisEscrow {
    /// The requester (bech32).
    pub requester: String,
    /// The transfer agent it pays (bech32).
    pub transfer_agent: String,
    /// Its balance.
    pub ngnk: u128,
    /// Height from which it is closing.
    pub expires_at: u64,
}

impl GenesisConfig {
    /// The `app_state` JSON, one section per module.
    pub fn app_state(&self) -> serde_json::Value {
        let auth = auth::GenesisState {
            params: Some(auth::Params {
                min_gas_price: self
                    .min_gas_price
                    .map_or(gonka_auth::default_params().min_gas_price, |price| {
                        price.to_string()
                    }),
                ..gonka_auth::default_params()
            }),
            addresses: Vec::new(),
        };
        let escrowed: u128 = self.escrows.iter().map(|e| e.ngnk).sum();
        let pool = (escrowed > 0).then(|| GenesisAccount {
            address: gonka_settlement::pool_address(),
            ngnk: escrowed,
        });
        let bank = bank::GenesisState {
            balances: self
                .accounts
                .iter()
                .chain(pool.as_ref())
                .map(|account| bank::Balance {
                    address: account.address.clone(),
                    coins: vec![bank::Coin {
                        denom: gonka_bank::NATIVE_DENOM.into(),
                        amount: account.ngnk.to_string(),
                    }],
                })
                .collect(),
        };
        let epochs = epochs::GenesisState {
            params: self
                .epoch_length
                .map(|epoch_length| epochs::Params { epoch_length }),
        };
        let stake = stake::GenesisState {
            params: self.stake_params.clone(),
            participants: self
                .validators
                .iter()
                .map(|v| stake::GenesisParticipant {
                    operator: v.operator.clone(),
                    moniker: v.moniker.clone(),
                    consensus_pubkey: v.consensus_pubkey.to_vec(),
                    amount: v.stake_ngnk.to_string(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let rewards = rewards::GenesisState {
            params: Some(
                self.rewards_params
                    .clone()
                    .unwrap_or_else(|| rewards::Params {
                        validation_share_ppm: DEFAULT_VALIDATION_SHARE_PPM,
                        ..gonka_rewards::default_params()
                    }),
            ),
        };
        let inference = inference::GenesisState {
            params: None,
            models: self.models.clone(),
            ..Default::default()
        };
        let disputes = disputes::GenesisState {
            params: self.disputes_params.clone(),
        };
        let settlement_params = self.settlement_params.clone().unwrap_or_else(|| {
            let unbonding_epochs = self
                .stake_params
                .as_ref()
                .map_or(gonka_stake::default_params().unbonding_epochs, |p| {
                    p.unbonding_epochs
                });
            let epoch_length = self
                .epoch_length
                .unwrap_or(gonka_epochs::default_params().epoch_length);
            let defaults = gonka_settlement::default_params();
            let window = defaults
                .challenge_window_blocks
                .min((unbonding_epochs * epoch_length).saturating_sub(1))
                .max(2);
            settlement::Params {
                challenge_window_blocks: window,
                leaf_answer_blocks: defaults.leaf_answer_blocks.min(window - 1),
                ..defaults
            }
        });
        let settlement = settlement::GenesisState {
            escrows: self
                .escrows
                .iter()
                .map(|e| settlement::Escrow {
                    requester: e.requester.clone(),
                    transfer_agent: e.transfer_agent.clone(),
                    balance: e.ngnk.to_string(),
                    expires_at: e.expires_at,
                    release_at: e
                        .expires_at
                        .saturating_add(settlement_params.challenge_window_blocks),
                })
                .collect(),
            params: Some(settlement_params),
            ..Default::default()
        };
        let mut state = serde_json::json!({
            gonka_auth::NAME: auth,
            gonka_bank::NAME: bank,
            gonka_epochs::NAME: epochs,
            gonka_stake::NAME: stake,
            gonka_inference::NAME: inference,
            gonka_settlement::NAME: settlement,
            gonka_disputes::NAME: disputes,
            gonka_pol::NAME: pol::GenesisState {
                params: self.pol_params.clone(),
                ..Default::default()
            },
            gonka_rewards::NAME: rewards,
        });
        if !self.bls_keys.is_empty() {
            state[gonka_bls::NAME] = serde_json::json!(bls::GenesisState {
                keys: self.bls_keys.clone(),
                params: None,
            });
        }
        state
    }
}

/// `app_state` funding `accounts`, with `min_gas_price` and every other parameter at its
/// default.
pub fn app_state(accounts: &[GenesisAccount], min_gas_price: GasPrice) -> serde_json::Value {
    GenesisConfig {
        accounts: accounts.to_vec(),
        min_gas_price: Some(min_gas_price),
        ..Default::default()
    }
    .app_state()
}

/// Checks that `app_state` starts chain `chain_id`: imports it into a new store at `path`
/// exactly as `InitChain` would (vote extensions from height 1), and returns the genesis app
/// hash and the initial validator set.
pub fn check(
    path: &std::path::Path,
    chain_id: &str,
    app_state: &serde_json::Value,
) -> anyhow::Result<([u8; 32], Vec<gonka_sdk::ValidatorUpdate>)> {
    let app = crate::App::open(path)?;
    app.init_chain(chain_id, 1, 1, &serde_json::to_vec(app_state)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::TestChain;
    use prost::Message;

    #[test]
    fn genesis_escrows_are_open_with_their_money_in_the_settlement_pool() {
        let (alice, ta) = (
            gonka_auth::module_address("test-alice"),
            gonka_auth::module_address("test-ta"),
        );
        let config = GenesisConfig {
            accounts: vec![GenesisAccount {
                address: alice.clone(),
                ngnk: 5,
            }],
            escrows: vec![GenesisEscrow {
                requester: alice.clone(),
                transfer_agent: ta.clone(),
                ngnk: 1_000,
                expires_at: 50,
            }],
            ..Default::default()
        };
        let dir = tempfile::tempdir().unwrap();
        let mut chain =
            TestChain::new(&dir.path().join("s.redb"), "c", &config.app_state()).unwrap();
        chain.next_block(Vec::new());
        let answer = chain.query(
            "/settlement/escrow",
            settlement::QueryEscrowRequest {
                requester: alice,
                transfer_agent: ta,
            }
            .encode_to_vec(),
        );
        assert_eq!(answer.code, 0, "{}", answer.log);
        let escrow = settlement::QueryEscrowResponse::decode(answer.value.as_ref())
            .unwrap()
            .escrow
            .unwrap();
        let window = gonka_settlement::default_params()
            .challenge_window_blocks
            .min(
                gonka_stake::default_params().unbonding_epochs
                    * gonka_epochs::default_params().epoch_length
                    - 1,
            );
        assert_eq!(
            (
                escrow.balance.as_str(),
                escrow.expires_at,
                escrow.release_at
            ),
            ("1000", 50, 50 + window)
        );
    }
}
