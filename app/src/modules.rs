//! The chain's modules, in the fixed order every hook runs in.
//!
//! Order: `auth`, `bank`, `epochs`, `stake`, `bls`, `inference`, `settlement`, `disputes`,
//! `pol`, `rewards`. Genesis,
//! `begin_block`, `end_block` and `end_epoch` all walk this list front to back; messages and
//! queries go to the one module that claims them. A new module is added here, at the
//! position its dependencies require.
//!
//! `disputes` comes after `inference`, whose stored work records it samples, and before
//! `rewards`, so that in an epoch's last block the work it voided and the validators it
//! jailed (in `begin_block` or by a transaction) are already in the ledger when rewards
//! settle the epoch. Its `begin_block` runs after `epochs`' (the epoch is current) and its
//! jailings are queued before `stake`'s `end_block`, which removes their power in the same
//! block.
//!
//! In the last block of an epoch the app runs, after every `end_block`: `end_epoch` of every
//! module in this order (stake pays matured unbonding and sets the next powers from the
//! closing epoch's work; rewards mints the emission and pays the epoch's rewards by work),
//! then `gonka_epochs::advance`, which opens the next epoch.

use gonka_sdk::Module;

/// Every module, in hook order.
pub fn all() -> Vec<Box<dyn Module>> {
    vec![
        Box::new(gonka_auth::Auth),
        Box::new(gonka_bank::Bank {
            // Stake's genesis mints the bonds and unbonding entries into its pools.
            minted_elsewhere: vec![
                gonka_stake::bonded_pool_address(),
                gonka_stake::unbonding_pool_address(),
            ],
        }),
        Box::new(gonka_epochs::Epochs),
        Box::new(gonka_stake::Stake),
        // Keys belong to stake participants.
        Box::new(gonka_bls::Bls),
        Box::new(gonka_inference::Inference),
        // Pays work through the registry of inference and the keys of bls.
        Box::new(gonka_settlement::Settlement),
        Box::new(gonka_disputes::Disputes),
        // Training: pays and credits verified checkpoints before rewards settle the epoch,
        // drawing validators and committees as disputes does.
        Box::new(gonka_pol::Pol),
        Box::new(gonka_rewards::Rewards),
    ]
}
