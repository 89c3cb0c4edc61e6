//! Finding the `cometbft` binary and running its one-shot subcommands (`version`, `testnet`,
//! `init`, `show-node-id`).

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

/// The command (run from the repository root) that builds and installs the CometBFT gonka-rs
/// runs: v0.38.25 with the patches in `scripts/cometbft/`, into `$(go env GOPATH)/bin`.
pub const COMETBFT_INSTALL: &str = "source scripts/ensure-cometbft.sh";

/// The exact CometBFT release gonka-rs is tested with.
pub const COMETBFT_VERSION: &str = "0.38.25";

/// What `cometbft version` reports for [`COMETBFT_VERSION`] built with gonka's patches.
pub const COMETBFT_BUILD: &str = "0.38.25+gonka.1";

/// The release line every node must run (ABCI 2.0 as gonka-rs speaks it).
pub const COMETBFT_SERIES: &str = "0.38.";

/// Finds `cometbft` on `PATH`, then in `$GOPATH/bin` and `~/go/bin` (where
/// `scripts/ensure-cometbft.sh` puts it), and checks that `cometbft version` reports a v0.38 release. The error names the install
/// command ([`COMETBFT_INSTALL`]) and says to put `$(go env GOPATH)/bin` on `PATH`.
pub fn find_cometbft() -> Result<PathBuf> {
    let path = locate(
        std::env::var_os("PATH"),
        std::env::var_os("GOPATH"),
        std::env::var_os("HOME"),
    )?;
    let version = cometbft_version(&path)?;
    check_version(&path, &version)?;
    Ok(path)
}

/// The `cometbft` candidates in search order: each `PATH` entry, each `GOPATH` entry's `bin`,
/// then `$HOME/go/bin` (Go's default GOPATH).
fn candidates(
    path_var: Option<OsString>,
    gopath: Option<OsString>,
    home: Option<OsString>,
) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    if let Some(p) = path_var {
        out.extend(std::env::split_paths(&p).map(|d| d.join("cometbft")));
    }
    if let Some(g) = gopath {
        out.extend(std::env::split_paths(&g).map(|d| d.join("bin").join("cometbft")));
    }
    if let Some(h) = home {
        out.push(PathBuf::from(h).join("go").join("bin").join("cometbft"));
    }
    out
}

fn is_executable(p: &Path) -> bool {
    p.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// The first executable `cometbft` among the [`candidates`], or the not-found error.
fn locate(
    path_var: Option<OsString>,
    gopath: Option<OsString>,
    home: Option<OsString>,
) -> Result<PathBuf> {
    if let Some(found) = candidates(path_var, gopath, home)
        .into_iter()
        .find(|p| is_executable(p))
    {
        return Ok(found);
    }
    bail!(
        "cometbft was not found on PATH, in $GOPATH/bin or in ~/go/bin. gonka-rs runs CometBFT \
         {COMETBFT_BUILD} (v{COMETBFT_VERSION} with the patches in scripts/cometbft/); build it \
         from the repository root with\n\n    {COMETBFT_INSTALL}\n\nwhich installs it into \
         $(go env GOPATH)/bin and puts that on PATH (export PATH=\"$(go env GOPATH)/bin:$PATH\" \
         in other shells)."
    )
}

/// What `cometbft version` prints, trimmed.
pub fn cometbft_version(cometbft: &Path) -> Result<String> {
    let out = run(cometbft, &["version".as_ref()])?;
    Ok(out.trim().to_string())
}

fn check_version(path: &Path, version: &str) -> Result<()> {
    if !version.starts_with(COMETBFT_SERIES) {
        bail!(
            "{} reports version {version:?}, but gonka-rs needs CometBFT v0.38 (ABCI 2.0, tested \
             with {COMETBFT_BUILD}); build it from the repository root with\n\n    \
             {COMETBFT_INSTALL}\n\nand put $(go env GOPATH)/bin first on PATH",
            path.display()
        );
    }
    if version == COMETBFT_VERSION {
        tracing::warn!(
            path = %path.display(),
            version,
            expected = COMETBFT_BUILD,
            install = COMETBFT_INSTALL,
            "cometbft is the stock build, whose ABCI socket client spins its flush timer every \
             20 ns under load (scripts/cometbft/socket-client-flush.patch): the network runs, \
             at about two thirds of the throughput"
        );
    } else if version != COMETBFT_BUILD {
        tracing::warn!(
            path = %path.display(),
            version,
            expected = COMETBFT_BUILD,
            "cometbft is a different v0.38 build than the one gonka-rs is tested with"
        );
    }
    Ok(())
}

/// Runs `cometbft <args>` to completion and returns its stdout; a non-zero exit is an error
/// carrying the command line and stderr.
pub(crate) fn run(cometbft: &Path, args: &[&std::ffi::OsStr]) -> Result<String> {
    let out = Command::new(cometbft)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {}", cometbft.display()))?;
    let line = || {
        let mut s = cometbft.display().to_string();
        for a in args {
            s.push(' ');
            s.push_str(&a.to_string_lossy());
        }
        s
    };
    if !out.status.success() {
        bail!(
            "`{}` failed ({}): {}{}",
            line(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim(),
            String::from_utf8_lossy(&out.stdout).trim()
        );
    }
    String::from_utf8(out.stdout).with_context(|| format!("`{}` printed non-UTF-8", line()))
}

/// Runs `cometbft testnet` for `validators` validators into `out_dir` (one home per node,
/// `node0`..), without persistent peers (they are written later with real ports). `scratch_home`
/// is passed as `--home`, because every cometbft command creates a default config under its
/// home, and that must not be the user's `~/.cometbft`.
pub(crate) fn testnet(
    cometbft: &Path,
    validators: usize,
    out_dir: &Path,
    scratch_home: &Path,
) -> Result<()> {
    let v = validators.to_string();
    run(
        cometbft,
        &[
            "testnet".as_ref(),
            "--v".as_ref(),
            v.as_ref(),
            "--n".as_ref(),
            "0".as_ref(),
            "--o".as_ref(),
            out_dir.as_os_str(),
            "--node-dir-prefix".as_ref(),
            "node".as_ref(),
            "--populate-persistent-peers=false".as_ref(),
            "--home".as_ref(),
            scratch_home.as_os_str(),
        ],
    )?;
    Ok(())
}

/// Runs `cometbft init --home <home>`: a fresh node key, validator key and state, a default
/// config.toml and a throwaway genesis.json (the caller replaces it).
pub(crate) fn init(cometbft: &Path, home: &Path) -> Result<()> {
    run(
        cometbft,
        &["init".as_ref(), "--home".as_ref(), home.as_os_str()],
    )?;
    Ok(())
}

/// The P2P node id (hex of the node key's address) of the CometBFT home `home`.
pub(crate) fn show_node_id(cometbft: &Path, home: &Path) -> Result<String> {
    let out = run(
        cometbft,
        &["show-node-id".as_ref(), "--home".as_ref(), home.as_os_str()],
    )?;
    let id = out.trim().to_string();
    if id.len() != 40 || !id.chars().all(|c| c.is_ascii_hexdigit()) {
        bail!(
            "expected a 40-hex-digit node id from `cometbft show-node-id --home {}` but got {id:?}",
            home.display()
        );
    }
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn fake_binary(dir: &Path) -> PathBuf {
        fs::create_dir_all(dir).unwrap();
        let p = dir.join("cometbft");
        fs::write(&p, "#!/bin/sh\necho 0.38.25\n").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    #[test]
    fn not_found_error_names_the_install_line() {
        let empty = tempfile::tempdir().unwrap();
        let err = locate(
            Some(empty.path().as_os_str().to_owned()),
            Some(empty.path().join("gopath").into_os_string()),
            Some(empty.path().join("home").into_os_string()),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains(COMETBFT_INSTALL), "{err}");
        assert!(err.contains("$(go env GOPATH)/bin"), "{err}");
    }

    #[test]
    fn path_comes_first_then_gopath_then_home() {
        let t = tempfile::tempdir().unwrap();
        let on_path = fake_binary(&t.path().join("p"));
        let in_gopath = fake_binary(&t.path().join("g/bin"));
        let in_home = fake_binary(&t.path().join("h/go/bin"));
        let path_var =
            std::env::join_paths([t.path().join("nothing"), t.path().join("p")]).unwrap();
        let gopath = t.path().join("g").into_os_string();
        let home = t.path().join("h").into_os_string();
        assert_eq!(
            locate(Some(path_var), Some(gopath.clone()), Some(home.clone())).unwrap(),
            on_path
        );
        assert_eq!(
            locate(None, Some(gopath), Some(home.clone())).unwrap(),
            in_gopath
        );
        assert_eq!(locate(None, None, Some(home)).unwrap(), in_home);
    }

    #[test]
    fn non_executable_files_are_skipped() {
        let t = tempfile::tempdir().unwrap();
        let p = fake_binary(t.path());
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
        assert!(locate(Some(t.path().as_os_str().to_owned()), None, None).is_err());
    }

    #[test]
    fn only_v0_38_is_accepted() {
        check_version(Path::new("cometbft"), COMETBFT_BUILD).unwrap();
        check_version(Path::new("cometbft"), "0.38.25").unwrap();
        check_version(Path::new("cometbft"), "0.38.17").unwrap();
        let err = check_version(Path::new("cometbft"), "1.0.1")
            .unwrap_err()
            .to_string();
        assert!(err.contains(COMETBFT_INSTALL), "{err}");
        assert!(check_version(Path::new("cometbft"), "0.37.4").is_err());
        assert!(check_version(Path::new("cometbft"), "0.380.0").is_err());
    }
}
