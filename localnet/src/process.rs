//! Spawning, signalling and reaping the node processes.
//!
//! - Every child is the leader of its own process group, so the terminal's Ctrl-C (SIGINT to
//!   the foreground group) reaches only the launcher; the launcher then stops the nodes in
//!   order (CometBFT first, then apps) and signals whole groups, so wrapper scripts die with
//!   what they wrap.
//! - On Linux every child gets `PR_SET_PDEATHSIG = SIGTERM`, so nodes do not outlive a launcher
//!   that is SIGKILLed or aborts without running destructors. The kernel sends that signal when
//!   the *thread* that forked the child exits, so all children are forked by one spawner thread
//!   that lives as long as the process.
//! - A child is only ever signalled while it is unreaped and its table lock is held, so a
//!   recycled pid is never hit.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, Context, Result};

/// Which of a node's processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The ABCI application (`gonkad start`).
    App,
    /// The CometBFT node (`cometbft start`).
    Cometbft,
    /// A `gonka-sidecar` role (`ml-node`, `transfer-agent`, `validator`).
    Sidecar(&'static str),
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::App => "app",
            Role::Cometbft => "cometbft",
            Role::Sidecar(role) => role,
        })
    }
}

/// A running (or exited but unreaped) node process with the log it writes to.
#[derive(Debug)]
pub(crate) struct Proc {
    /// The child; its pid is also its process group id.
    pub child: Child,
    /// App or CometBFT.
    pub role: Role,
    /// Index of the node it belongs to.
    pub node: usize,
    /// File receiving its stdout and stderr.
    pub log: PathBuf,
}

impl Proc {
    /// `Some(status)` once the process has exited (it is then reaped).
    pub fn exited(&mut self) -> Result<Option<ExitStatus>> {
        self.child
            .try_wait()
            .with_context(|| format!("checking node {} {}", self.node, self.role))
    }

    /// Sends `signal` to the process's group unless it has already exited.
    /// Returns whether a signal was sent.
    pub fn signal(&mut self, signal: libc::c_int) -> Result<bool> {
        if self.exited()?.is_some() {
            return Ok(false);
        }
        let pgid = self.child.id() as libc::pid_t;
        // SAFETY: plain syscall. The child is unreaped (checked above, under the table lock
        // held by every caller), so `pgid` still names our child's group.
        let rc = unsafe { libc::kill(-pgid, signal) };
        if rc != 0 {
            let err = io::Error::last_os_error();
            // ESRCH: the group is already gone (the leader exited between the checks).
            if err.raw_os_error() != Some(libc::ESRCH) {
                return Err(err).with_context(|| {
                    format!("signalling node {} {} (pid {pgid})", self.node, self.role)
                });
            }
        }
        Ok(true)
    }

    /// SIGKILLs the process group and reaps the process.
    pub fn kill_and_reap(&mut self) -> Result<ExitStatus> {
        self.signal(libc::SIGKILL)?;
        self.child
            .wait()
            .with_context(|| format!("reaping node {} {}", self.node, self.role))
    }
}

/// Work for the spawner thread: a command and where to send the spawned child.
type SpawnJob = (Command, mpsc::Sender<io::Result<Child>>);

/// The spawner thread's queue; see the module doc for why one thread forks every child.
static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnJob>>> = OnceLock::new();

fn spawn_on_spawner_thread(cmd: Command) -> Result<Child> {
    let sender = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnJob>();
        thread::Builder::new()
            .name("gonka-localnet-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("starting the gonka-localnet spawner thread");
        Mutex::new(tx)
    });
    let (reply_tx, reply_rx) = mpsc::channel();
    sender
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .send((cmd, reply_tx))
        .map_err(|_| anyhow!("the gonka-localnet spawner thread is gone"))?;
    let child = reply_rx
        .recv()
        .map_err(|_| anyhow!("the gonka-localnet spawner thread is gone"))??;
    Ok(child)
}

/// Opens `log` for appending, creating it, and writes a header line naming what starts.
fn open_log(log: &Path, what: &str) -> Result<File> {
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("opening log file {}", log.display()))?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    writeln!(
        file,
        "\n=== gonka-localnet: starting {what} (unix time {now}) ==="
    )?;
    Ok(file)
}

/// Starts `program args...` as node `node`'s `role` process: stdin from /dev/null, stdout and
/// stderr appended to `log`, in its own process group, SIGTERMed if this process dies.
pub(crate) fn spawn(
    program: &Path,
    args: &[std::ffi::OsString],
    role: Role,
    node: usize,
    log: &Path,
) -> Result<Proc> {
    let mut line = program.display().to_string();
    for a in args {
        line.push(' ');
        line.push_str(&a.to_string_lossy());
    }
    let out = open_log(log, &line)?;
    let err = out.try_clone()?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .process_group(0);
    die_with_parent(&mut cmd);
    let child = spawn_on_spawner_thread(cmd)
        .with_context(|| format!("starting node {node} {role}: {line}"))?;
    tracing::debug!(node, %role, pid = child.id(), command = %line, "spawned");
    Ok(Proc {
        child,
        role,
        node,
        log: log.to_path_buf(),
    })
}

#[cfg(target_os = "linux")]
fn die_with_parent(cmd: &mut Command) {
    // SAFETY: getpid/prctl/getppid are async-signal-safe; the closure allocates nothing.
    let parent = unsafe { libc::getpid() };
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died before prctl took effect.
            if libc::getppid() != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_cmd: &mut Command) {}

/// Stops `procs`: SIGTERM to every one still running, up to `grace` for all to exit, then
/// SIGKILL for the rest. Every process is reaped on return. Returns how many needed SIGKILL.
pub(crate) fn terminate(procs: &mut [Proc], grace: Duration) -> Result<usize> {
    for p in procs.iter_mut() {
        if p.signal(libc::SIGTERM)? {
            tracing::debug!(node = p.node, role = %p.role, "sent SIGTERM");
        }
    }
    let deadline = Instant::now() + grace;
    loop {
        let mut running = 0;
        for p in procs.iter_mut() {
            if p.exited()?.is_none() {
                running += 1;
            }
        }
        if running == 0 || Instant::now() >= deadline {
            break;
        }
        thread::sleep(Duration::from_millis(50));
    }
    let mut killed = 0;
    for p in procs.iter_mut() {
        if p.exited()?.is_none() {
            tracing::warn!(
                node = p.node,
                role = %p.role,
                grace_ms = grace.as_millis() as u64,
                "still running after SIGTERM; sending SIGKILL"
            );
            p.kill_and_reap()?;
            killed += 1;
        }
    }
    Ok(killed)
}

/// The last `lines` lines of the file at `path` (reading at most its last 64 KiB), for error
/// messages; empty if it cannot be read.
pub(crate) fn log_tail(path: &Path, lines: usize) -> String {
    let Ok(mut f) = File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(64 * 1024);
    if f.seek(SeekFrom::Start(start)).is_err() {
        return String::new();
    }
    let mut buf = Vec::new();
    if f.read_to_end(&mut buf).is_err() {
        return String::new();
    }
    let text = String::from_utf8_lossy(&buf);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, log: &Path) -> Proc {
        spawn(
            Path::new("/bin/sh"),
            &["-c".into(), script.into()],
            Role::App,
            0,
            log,
        )
        .unwrap()
    }

    #[test]
    fn output_is_appended_to_the_log_with_a_header() {
        let t = tempfile::tempdir().unwrap();
        let log = t.path().join("app.log");
        std::fs::write(&log, "earlier run\n").unwrap();
        let mut p = sh("echo to-stdout; echo to-stderr >&2", &log);
        assert!(p.child.wait().unwrap().success());
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(text.starts_with("earlier run\n"), "{text}");
        assert!(
            text.contains("=== gonka-localnet: starting /bin/sh -c"),
            "{text}"
        );
        assert!(
            text.contains("to-stdout") && text.contains("to-stderr"),
            "{text}"
        );
        assert_eq!(log_tail(&log, 2), "to-stdout\nto-stderr");
    }

    #[test]
    fn children_lead_their_own_process_group() {
        let t = tempfile::tempdir().unwrap();
        let mut p = sh("sleep 30", &t.path().join("log"));
        let pid = p.child.id() as libc::pid_t;
        // SAFETY: plain syscalls on our own unreaped child.
        let pgid = unsafe { libc::getpgid(pid) };
        assert_eq!(pgid, pid);
        assert_ne!(pgid, unsafe { libc::getpgrp() });
        p.kill_and_reap().unwrap();
    }

    #[test]
    fn terminate_uses_sigterm_then_sigkill() {
        let t = tempfile::tempdir().unwrap();
        let polite = sh("exec sleep 30", &t.path().join("a"));
        // Ignores SIGTERM, so only SIGKILL ends it; the sleep runs in the same group.
        let stubborn_log = t.path().join("b");
        let stubborn = sh("trap '' TERM; echo trapped; sleep 30 & wait", &stubborn_log);
        // Signal only once the shell has installed its trap. (The log's header line quotes the
        // script, so look for the echoed line itself.)
        let ready = Instant::now() + Duration::from_secs(10);
        while !log_tail(&stubborn_log, 5).lines().any(|l| l == "trapped") {
            assert!(Instant::now() < ready, "the test shell never started");
            thread::sleep(Duration::from_millis(20));
        }
        let mut procs = vec![polite, stubborn];
        let started = Instant::now();
        let killed = terminate(&mut procs, Duration::from_millis(700)).unwrap();
        assert_eq!(killed, 1);
        assert!(started.elapsed() < Duration::from_secs(10));
        for p in &mut procs {
            assert!(p.exited().unwrap().is_some());
        }
        // Already reaped: signalling again is a no-op, not an error.
        assert!(!procs[0].signal(libc::SIGTERM).unwrap());
    }

    #[test]
    fn spawn_failure_names_the_command() {
        let t = tempfile::tempdir().unwrap();
        let err = spawn(
            &t.path().join("no-such-binary"),
            &[],
            Role::Cometbft,
            3,
            &t.path().join("log"),
        )
        .unwrap_err();
        let msg = format!("{err:#}");
        assert!(
            msg.contains("node 3 cometbft") && msg.contains("no-such-binary"),
            "{msg}"
        );
    }
}
