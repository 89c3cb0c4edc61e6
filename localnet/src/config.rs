//! Rewriting the files `cometbft testnet` generates: each node's `config.toml` (ports, peers,
//! timeouts) and the shared `genesis.json` (chain id, app state).
//!
//! No TOML crate is used: `config.toml` is CometBFT's own template, one `key = value` per line
//! under `[section]` headers, so a section-aware line rewrite is exact and keeps every comment.
//! Every edited key must appear exactly once in its section, so a CometBFT upgrade that moves a
//! key fails loudly here instead of leaving a node on a default port.

use std::net::Ipv4Addr;

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;

use crate::ports::NodePorts;

/// One `key = value` replacement inside a section of a TOML file (`""` is the top level).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TomlEdit {
    /// Section name as written between the brackets, or `""` for keys before the first header.
    pub section: &'static str,
    /// Key name.
    pub key: &'static str,
    /// The TOML value literal to write (already quoted if it is a string).
    pub value: String,
}

impl TomlEdit {
    /// An edit that sets `section.key` to the string `value`.
    pub fn string(section: &'static str, key: &'static str, value: &str) -> TomlEdit {
        TomlEdit {
            section,
            key,
            value: toml_string(value),
        }
    }

    /// An edit that sets `section.key` to the boolean `value`.
    pub fn boolean(section: &'static str, key: &'static str, value: bool) -> TomlEdit {
        TomlEdit {
            section,
            key,
            value: value.to_string(),
        }
    }
}

/// Quotes `s` as a TOML basic string.
pub(crate) fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The section a header line opens, if `line` is a header (`[p2p]`, `[[x]]`).
fn section_header(line: &str) -> Option<&str> {
    let t = line.trim();
    if !t.starts_with('[') {
        return None;
    }
    let inner = t.trim_start_matches('[');
    let end = inner.find(']')?;
    Some(inner[..end].trim())
}

/// If `line` assigns `key`, the byte offset where its value starts.
fn assignment_value_start(line: &str, key: &str) -> Option<usize> {
    let indent = line.len() - line.trim_start().len();
    let rest = line[indent..].strip_prefix(key)?;
    let after_key = rest.trim_start();
    // `laddr` must not match `laddr_extra = ...`: only whitespace may sit between key and `=`.
    let after_eq = after_key.strip_prefix('=')?;
    Some(line.len() - after_eq.trim_start().len())
}

/// Applies `edits` to the TOML text `text`, keeping every other line byte for byte.
/// Fails if an edited key is missing from its section, appears twice, or holds a multi-line value.
pub(crate) fn rewrite_toml(text: &str, edits: &[TomlEdit]) -> Result<String> {
    let mut hits = vec![0usize; edits.len()];
    let mut section = String::new();
    let mut out = String::with_capacity(text.len() + 256);
    for line in text.split_inclusive('\n') {
        let (body, newline) = match line.strip_suffix('\n') {
            Some(b) => match b.strip_suffix('\r') {
                Some(b2) => (b2, "\r\n"),
                None => (b, "\n"),
            },
            None => (line, ""),
        };
        if let Some(name) = section_header(body) {
            section = name.to_string();
            out.push_str(line);
            continue;
        }
        let mut replaced = false;
        for (i, edit) in edits.iter().enumerate() {
            if edit.section != section {
                continue;
            }
            let Some(start) = assignment_value_start(body, edit.key) else {
                continue;
            };
            let old = body[start..].trim();
            if old.starts_with("\"\"\"")
                || old.starts_with("'''")
                || (old.starts_with('[') && !old.contains(']'))
            {
                bail!(
                    "config.toml key {} holds a multi-line value ({old}); this rewriter only \
                     edits one-line values",
                    qualified(edit)
                );
            }
            hits[i] += 1;
            let indent = &body[..body.len() - body.trim_start().len()];
            out.push_str(indent);
            out.push_str(edit.key);
            out.push_str(" = ");
            out.push_str(&edit.value);
            out.push_str(newline);
            replaced = true;
            break;
        }
        if !replaced {
            out.push_str(line);
        }
    }
    for (edit, n) in edits.iter().zip(hits) {
        match n {
            1 => {}
            0 => bail!(
                "expected key {} in CometBFT's config.toml but found none; is this CometBFT v0.38?",
                qualified(edit)
            ),
            n => bail!(
                "expected key {} once in config.toml but found it {n} times",
                qualified(edit)
            ),
        }
    }
    Ok(out)
}

fn qualified(edit: &TomlEdit) -> String {
    if edit.section.is_empty() {
        edit.key.to_string()
    } else {
        format!("[{}] {}", edit.section, edit.key)
    }
}

/// Reads a one-line value of `section.key` from TOML text, unquoting basic strings without
/// escapes. Used to report on existing configs and in tests.
pub(crate) fn read_toml_value(text: &str, section: &str, key: &str) -> Option<String> {
    let mut current = "";
    for line in text.lines() {
        if let Some(name) = section_header(line) {
            current = name;
            continue;
        }
        if current != section {
            continue;
        }
        if let Some(start) = assignment_value_start(line, key) {
            let v = line[start..].trim();
            return Some(
                v.strip_prefix('"')
                    .and_then(|v| v.strip_suffix('"'))
                    .unwrap_or(v)
                    .to_string(),
            );
        }
    }
    None
}

/// CometBFT's consensus timeouts as a localnet sets them, Go durations such as `"500ms"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Timeouts {
    /// `timeout_commit`: the block interval.
    pub commit: String,
    /// `timeout_propose`: the wait for a proposal, what a height costs when its proposer is down.
    pub propose: String,
    /// `timeout_prevote` and `timeout_precommit`: the wait once votes are split.
    pub vote: String,
}

/// The edits that turn a `cometbft testnet` node config into a localnet node config:
/// listen addresses on the node's `host` (127.0.0.1 unless it runs as a host of its own) from
/// `ports`, `persistent_peers` (`id@host:port` of the other nodes), peer exchange (off when
/// peers are dialed through other addresses than their own, e.g. relays, so that nodes dial
/// only those), peer checks relaxed for one-machine networks, Prometheus on its own port, and
/// the consensus timeouts.
pub(crate) fn node_config_edits(
    moniker: &str,
    host: Ipv4Addr,
    ports: &NodePorts,
    persistent_peers: &[String],
    pex: bool,
    timeouts: &Timeouts,
) -> Vec<TomlEdit> {
    vec![
        TomlEdit::string("", "moniker", moniker),
        TomlEdit::string("", "proxy_app", &format!("tcp://{host}:{}", ports.abci)),
        TomlEdit::string("rpc", "laddr", &format!("tcp://{host}:{}", ports.rpc)),
        TomlEdit::string("p2p", "laddr", &format!("tcp://{host}:{}", ports.p2p)),
        TomlEdit::string("p2p", "external_address", ""),
        TomlEdit::string("p2p", "persistent_peers", &persistent_peers.join(",")),
        TomlEdit::boolean("p2p", "pex", pex),
        TomlEdit::boolean("p2p", "addr_book_strict", false),
        TomlEdit::boolean("p2p", "allow_duplicate_ip", true),
        TomlEdit::string("consensus", "timeout_commit", &timeouts.commit),
        TomlEdit::string("consensus", "timeout_propose", &timeouts.propose),
        TomlEdit::string("consensus", "timeout_prevote", &timeouts.vote),
        TomlEdit::string("consensus", "timeout_precommit", &timeouts.vote),
        TomlEdit::boolean("instrumentation", "prometheus", true),
        TomlEdit::string(
            "instrumentation",
            "prometheus_listen_addr",
            &format!("{host}:{}", ports.prometheus),
        ),
    ]
}

/// Returns `genesis` (a CometBFT genesis.json) with `chain_id` and `app_state` set, and, if
/// given, vote extensions enabled from `vote_extensions_enable_height`. Everything else
/// (validators, genesis time, consensus params) is kept. The output ends with a newline.
pub(crate) fn rewrite_genesis(
    genesis: &str,
    chain_id: &str,
    app_state: &Value,
    vote_extensions_enable_height: Option<u64>,
) -> Result<String> {
    let mut doc: Value =
        serde_json::from_str(genesis).context("genesis.json written by cometbft is not JSON")?;
    let obj = doc
        .as_object_mut()
        .ok_or_else(|| anyhow!("genesis.json is not a JSON object"))?;
    obj.insert("chain_id".into(), Value::String(chain_id.to_string()));
    obj.insert("app_state".into(), app_state.clone());
    if let Some(h) = vote_extensions_enable_height {
        let abci = obj
            .get_mut("consensus_params")
            .and_then(|p| p.get_mut("abci"))
            .and_then(Value::as_object_mut)
            .ok_or_else(|| anyhow!("genesis.json has no consensus_params.abci object"))?;
        // CometBFT encodes int64 params as JSON strings.
        abci.insert(
            "vote_extensions_enable_height".into(),
            Value::String(h.to_string()),
        );
    }
    let mut text = serde_json::to_string_pretty(&doc)?;
    text.push('\n');
    Ok(text)
}

/// Checks `chain_id` against CometBFT's rules (non-empty, at most 50 bytes) and keeps it to
/// printable ASCII without spaces so it is safe in file names and shell lines.
pub(crate) fn validate_chain_id(chain_id: &str) -> Result<()> {
    if chain_id.is_empty() {
        bail!("chain id is empty");
    }
    if chain_id.len() > 50 {
        bail!(
            "chain id {chain_id:?} is {} bytes long but CometBFT allows at most 50",
            chain_id.len()
        );
    }
    if let Some(c) = chain_id.chars().find(|c| !c.is_ascii_graphic()) {
        bail!("chain id {chain_id:?} contains {c:?}; use printable ASCII without spaces");
    }
    Ok(())
}

/// Checks that `d` is a Go duration as CometBFT parses it (e.g. `"500ms"`, `"1s"`, `"1m30s"`).
/// `key` names the setting in the error.
pub(crate) fn validate_go_duration(key: &str, d: &str) -> Result<()> {
    const UNITS: [&str; 7] = ["ns", "us", "µs", "ms", "s", "m", "h"];
    let bad = || anyhow!("{key} {d:?} is not a duration such as \"500ms\" or \"1s\"");
    if d == "0" {
        return Ok(());
    }
    let mut rest = d;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let num = &rest[..num_len];
        if num.is_empty() || num == "." || num.matches('.').count() > 1 {
            return Err(bad());
        }
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        if !UNITS.contains(&&rest[..unit_len]) {
            return Err(bad());
        }
        rest = &rest[unit_len..];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An excerpt of the config.toml `cometbft testnet` v0.38.25 writes, with the traps a
    /// naive rewrite falls into: `laddr` in several sections, `prometheus` as a prefix of
    /// `prometheus_listen_addr`, keys that only differ by section.
    const SAMPLE: &str = r#"# This is a TOML config file.
version = "0.38.25"
proxy_app = "tcp://127.0.0.1:26658"
moniker = "node0"

#######################################################
###       RPC Server Configuration Options          ###
#######################################################
[rpc]

# TCP or UNIX socket address for the RPC server to listen on
laddr = "tcp://127.0.0.1:26657"
cors_allowed_methods = ["HEAD", "GET", "POST", ]
grpc_laddr = ""
pprof_laddr = ""

[p2p]

# Address to listen for incoming connections
laddr = "tcp://0.0.0.0:26656"
external_address = ""
seeds = ""
persistent_peers = ""
addr_book_strict = false
allow_duplicate_ip = true
pex = true

[mempool]
size = 5000

[consensus]
timeout_propose = "3s"
timeout_prevote = "1s"
timeout_precommit = "1s"
timeout_commit = "1s"

[instrumentation]
prometheus = false
prometheus_listen_addr = ":26660"
namespace = "cometbft"
"#;

    fn ports() -> NodePorts {
        NodePorts::for_node(26700, 1).unwrap()
    }

    fn timeouts(commit: &str, propose: &str, vote: &str) -> Timeouts {
        Timeouts {
            commit: commit.into(),
            propose: propose.into(),
            vote: vote.into(),
        }
    }

    fn peers() -> Vec<String> {
        vec!["aa@127.0.0.1:26700".into(), "cc@127.0.0.1:26720".into()]
    }

    #[test]
    fn rewrites_the_right_keys_in_the_right_sections() {
        let edits = node_config_edits(
            "node1",
            Ipv4Addr::LOCALHOST,
            &ports(),
            &peers(),
            true,
            &timeouts("500ms", "800ms", "300ms"),
        );
        let out = rewrite_toml(SAMPLE, &edits).unwrap();
        let get = |s, k| read_toml_value(&out, s, k).unwrap();
        assert_eq!(get("", "proxy_app"), "tcp://127.0.0.1:26712");
        assert_eq!(get("", "moniker"), "node1");
        assert_eq!(get("rpc", "laddr"), "tcp://127.0.0.1:26711");
        assert_eq!(get("p2p", "laddr"), "tcp://127.0.0.1:26710");
        assert_eq!(
            get("p2p", "persistent_peers"),
            "aa@127.0.0.1:26700,cc@127.0.0.1:26720"
        );
        assert_eq!(get("p2p", "addr_book_strict"), "false");
        assert_eq!(get("p2p", "allow_duplicate_ip"), "true");
        assert_eq!(get("p2p", "pex"), "true");
        assert_eq!(get("consensus", "timeout_commit"), "500ms");
        assert_eq!(get("consensus", "timeout_propose"), "800ms");
        assert_eq!(get("consensus", "timeout_prevote"), "300ms");
        assert_eq!(get("consensus", "timeout_precommit"), "300ms");
        assert_eq!(get("instrumentation", "prometheus"), "true");
        assert_eq!(
            get("instrumentation", "prometheus_listen_addr"),
            "127.0.0.1:26713"
        );
    }

    #[test]
    fn leaves_every_other_line_alone() {
        let edits = node_config_edits(
            "node0",
            Ipv4Addr::LOCALHOST,
            &ports(),
            &peers(),
            true,
            &timeouts("1s", "3s", "1s"),
        );
        let out = rewrite_toml(SAMPLE, &edits).unwrap();
        let before: Vec<&str> = SAMPLE.lines().collect();
        let after: Vec<&str> = out.lines().collect();
        assert_eq!(before.len(), after.len(), "line count changed");
        let changed: Vec<(&str, &str)> = before
            .iter()
            .zip(&after)
            .filter(|(a, b)| a != b)
            .map(|(a, b)| (*a, *b))
            .collect();
        // moniker and timeout_commit keep their values; external_address stays "".
        let expected = [
            "proxy_app = \"tcp://127.0.0.1:26658\"",
            "laddr = \"tcp://127.0.0.1:26657\"",
            "laddr = \"tcp://0.0.0.0:26656\"",
            "persistent_peers = \"\"",
            "prometheus = false",
            "prometheus_listen_addr = \":26660\"",
        ];
        assert_eq!(
            changed.iter().map(|(a, _)| *a).collect::<Vec<_>>(),
            expected
        );
        // Untouched neighbours with look-alike names.
        assert_eq!(read_toml_value(&out, "rpc", "grpc_laddr").unwrap(), "");
        assert_eq!(read_toml_value(&out, "rpc", "pprof_laddr").unwrap(), "");
        assert_eq!(
            read_toml_value(&out, "instrumentation", "namespace").unwrap(),
            "cometbft"
        );
        assert_eq!(
            read_toml_value(&out, "consensus", "timeout_propose").unwrap(),
            "3s"
        );
        assert!(out.ends_with("namespace = \"cometbft\"\n"));
    }

    #[test]
    fn missing_or_duplicated_keys_are_errors() {
        let err = rewrite_toml(SAMPLE, &[TomlEdit::string("p2p", "no_such_key", "x")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("[p2p] no_such_key"), "{err}");
        // `size` exists, but in [mempool], not [p2p].
        assert!(rewrite_toml(SAMPLE, &[TomlEdit::string("p2p", "size", "1")]).is_err());
        let doubled = format!("{SAMPLE}[p2p]\nseeds = \"x\"\n");
        let err = rewrite_toml(&doubled, &[TomlEdit::string("p2p", "seeds", "")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("2 times"), "{err}");
    }

    #[test]
    fn string_values_are_escaped() {
        assert_eq!(toml_string(r#"a"b\c"#), r#""a\"b\\c""#);
        let out = rewrite_toml(SAMPLE, &[TomlEdit::string("", "moniker", "x\"y")]).unwrap();
        assert!(out.contains("moniker = \"x\\\"y\"\n"));
    }

    #[test]
    fn genesis_gets_chain_id_and_app_state_and_keeps_the_rest() {
        let input = r#"{"genesis_time":"2024-01-01T00:00:00Z","chain_id":"chain-xyz",
            "consensus_params":{"abci":{"vote_extensions_enable_height":"0"}},
            "validators":[{"power":"1"},{"power":"1"}],"app_hash":""}"#;
        let app_state =
            serde_json::json!({"bank": {"balances": [{"address": "gonka1x", "amount": "5"}]}});
        let out = rewrite_genesis(input, "gonka-test", &app_state, Some(2)).unwrap();
        let doc: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(doc["chain_id"], "gonka-test");
        assert_eq!(doc["app_state"], app_state);
        assert_eq!(doc["validators"].as_array().unwrap().len(), 2);
        assert_eq!(doc["genesis_time"], "2024-01-01T00:00:00Z");
        assert_eq!(
            doc["consensus_params"]["abci"]["vote_extensions_enable_height"],
            "2"
        );
        let out = rewrite_genesis(input, "gonka-test", &app_state, None).unwrap();
        let doc: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            doc["consensus_params"]["abci"]["vote_extensions_enable_height"],
            "0"
        );
    }

    #[test]
    fn durations_and_chain_ids_are_checked() {
        for ok in ["500ms", "1s", "1m30s", "1.5s", "0", "200us"] {
            validate_go_duration("timeout_commit", ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for bad in ["", "5", "1 s", "fast", "ms", "1.2.3s", "1sec"] {
            assert!(
                validate_go_duration("timeout_commit", bad).is_err(),
                "{bad:?} accepted"
            );
        }
        validate_chain_id("gonka-localnet").unwrap();
        assert!(validate_chain_id("").is_err());
        assert!(validate_chain_id("has space").is_err());
        assert!(validate_chain_id(&"x".repeat(51)).is_err());
    }
}
