//! `--consensus-key`: a CometBFT ed25519 public key, given as base64 or as the path of a
//! key file.

use std::path::Path;

use anyhow::{bail, Context, Result};
use serde_json::Value;

/// CometBFT's JSON type tag of ed25519 public keys.
const ED25519_TYPE: &str = "tendermint/PubKeyEd25519";

/// Parses `text`: the path of a CometBFT `priv_validator_key.json` (or of the output of
/// `cometbft show-validator`), else the base64 of the 32-byte public key.
pub fn parse_consensus_key(text: &str) -> Result<[u8; 32]> {
    let path = Path::new(text);
    if path.is_file() {
        return from_key_file(path);
    }
    if text.ends_with(".json") {
        bail!("consensus key file {text} does not exist");
    }
    let bytes = crate::b64::decode(text.trim()).map_err(|e| {
        anyhow::anyhow!(
            "--consensus-key {text:?} is neither a key file nor base64 ({e}); pass the path of \
             priv_validator_key.json or the base64 `value` of its pub_key"
        )
    })?;
    to_key(bytes, "--consensus-key")
}

/// Reads `.pub_key` of a `priv_validator_key.json`, or a bare `{"type", "value"}` key.
fn from_key_file(path: &Path) -> Result<[u8; 32]> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {shown}"))?;
    let json: Value = serde_json::from_str(&text)
        .with_context(|| format!("{shown} is not JSON; expected a priv_validator_key.json"))?;
    let pub_key = json.get("pub_key").unwrap_or(&json);
    let key_type = pub_key.get("type").and_then(Value::as_str);
    if key_type.is_some_and(|t| t != ED25519_TYPE) {
        bail!(
            "{shown} holds a {} key; validators need an ed25519 key ({ED25519_TYPE})",
            key_type.unwrap_or_default()
        );
    }
    let value = pub_key
        .get("value")
        .and_then(Value::as_str)
        .with_context(|| format!("{shown} has no pub_key.value"))?;
    let bytes = crate::b64::decode(value)
        .map_err(|e| anyhow::anyhow!("pub_key.value of {shown} is not base64: {e}"))?;
    to_key(bytes, &format!("pub_key.value of {shown}"))
}

fn to_key(bytes: Vec<u8>, what: &str) -> Result<[u8; 32]> {
    let len = bytes.len();
    bytes
        .try_into()
        .map_err(|_| anyhow::anyhow!("{what} is {len} bytes; an ed25519 public key is 32 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY_B64: &str = "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=";

    #[test]
    fn parses_base64() {
        assert_eq!(parse_consensus_key(KEY_B64).unwrap(), [7; 32]);
        let short = parse_consensus_key("BwcH").unwrap_err().to_string();
        assert!(short.contains("3 bytes"), "{short}");
        let garbage = parse_consensus_key("not a key!").unwrap_err().to_string();
        assert!(garbage.contains("priv_validator_key.json"), "{garbage}");
        assert!(parse_consensus_key("/nowhere/priv_validator_key.json").is_err());
    }

    /// Writes `contents` to `name` in `dir` and parses that path.
    fn parse_file(dir: &tempfile::TempDir, name: &str, contents: &str) -> Result<[u8; 32]> {
        let path = dir.path().join(name);
        std::fs::write(&path, contents).unwrap();
        parse_consensus_key(path.to_str().unwrap())
    }

    #[test]
    fn reads_priv_validator_key_json() {
        let dir = tempfile::tempdir().unwrap();
        let priv_validator_key = format!(
            r#"{{
  "address": "A1B2",
  "pub_key": {{"type": "tendermint/PubKeyEd25519", "value": "{KEY_B64}"}},
  "priv_key": {{"type": "tendermint/PrivKeyEd25519", "value": "c2VjcmV0"}}
}}"#
        );
        let key = parse_file(&dir, "priv_validator_key.json", &priv_validator_key);
        assert_eq!(key.unwrap(), [7; 32]);

        // `cometbft show-validator` prints the bare public key.
        let shown = format!(r#"{{"type":"tendermint/PubKeyEd25519","value":"{KEY_B64}"}}"#);
        assert_eq!(parse_file(&dir, "shown.json", &shown).unwrap(), [7; 32]);

        let secp = r#"{"pub_key":{"type":"tendermint/PubKeySecp256k1","value":"AA=="}}"#;
        let err = parse_file(&dir, "secp.json", secp).unwrap_err().to_string();
        assert!(err.contains("ed25519"), "{err}");

        let short = r#"{"pub_key":{"value":"BwcH"}}"#;
        let err = parse_file(&dir, "short.json", short)
            .unwrap_err()
            .to_string();
        assert!(err.contains("3 bytes"), "{err}");

        assert!(parse_file(&dir, "broken.json", "{").is_err());
        assert!(parse_file(&dir, "no-key.json", "{}").is_err());
    }
}
