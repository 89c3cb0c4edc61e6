//! `gonkad export`: the node's state at its last committed height as a genesis `app_state`
//! a new chain can start from (what each module's genesis export carries: params, accounts
//! and balances, participants with their bonds, jailing and unbonding entries, the inference
//! registry; histories stay with the old chain and epochs restart at 0).

use anyhow::{bail, Context, Result};

use crate::Global;

/// Prints the exported `app_state` as JSON.
pub fn run(global: &Global) -> Result<()> {
    let home = global.home();
    let path = home.join("data").join(gonka_app::STATE_FILE);
    if !path.exists() {
        bail!(
            "no state database at {}; pass the home of a node that has run (`--home`)",
            path.display()
        );
    }
    let app = gonka_app::App::open(&path).with_context(|| {
        format!(
            "opening {}; if its node is running, stop it first (the database is locked while it runs)",
            path.display()
        )
    })?;
    let app_state = app.export_genesis()?;
    println!("{}", serde_json::to_string_pretty(&app_state)?);
    Ok(())
}
