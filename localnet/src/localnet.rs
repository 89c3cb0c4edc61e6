//! The running network: starting, crashing, restarting and stopping node processes, and
//! reading heights over RPC.

use std::ffi::OsString;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use crate::layout::{self, LocalnetConfig, NodeInfo};
use crate::process::{self, log_tail, Proc, Role};
use crate::rpc;
use crate::sidecar;

/// How long `stop` waits after SIGTERM (per phase: CometBFT, then apps) before SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(5);
/// Timeout of each RPC request made by [`Localnet::height`] and the readiness checks.
const RPC_TIMEOUT: Duration = Duration::from_secs(2);
/// Log lines quoted in error messages.
const TAIL_LINES: usize = 15;

/// The processes of one node, when running.
#[derive(Debug, Default)]
struct NodeProcs {
    app: Option<Proc>,
    cometbft: Option<Proc>,
    sidecars: Vec<Proc>,
}

impl NodeProcs {
    /// Every process of the node.
    fn all(&mut self) -> impl Iterator<Item = &mut Proc> {
        self.app
            .iter_mut()
            .chain(self.cometbft.iter_mut())
            .chain(self.sidecars.iter_mut())
    }

    /// The node's `process`, if it has one.
    fn get_mut(&mut self, process: Role) -> Option<&mut Proc> {
        match process {
            Role::App => self.app.as_mut(),
            Role::Cometbft => self.cometbft.as_mut(),
            Role::Sidecar(role) => self
                .sidecars
                .iter_mut()
                .find(|p| p.role.to_string() == role),
        }
    }
}

/// What [`Localnet::supervise`] does when a process exits on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPolicy {
    /// Report it; the node (or sidecar) stays down, the rest keeps running.
    Report,
    /// Report it and start the node (or sidecar) again after a backoff.
    Restart,
}

/// Longest wait before restarting a node that keeps crashing.
pub const MAX_RESTART_BACKOFF: Duration = Duration::from_secs(30);
/// A node that ran this long since its last restart starts over at the shortest backoff.
const STABLE_AFTER: Duration = Duration::from_secs(60);

/// A process that exited on its own.
struct Crash {
    node: usize,
    role: String,
    /// The sidecar role, `None` when the node itself (app or CometBFT) went down.
    sidecar: Option<String>,
    status: std::process::ExitStatus,
    log: std::path::PathBuf,
}

/// A pending restart of a node or a sidecar, with its backoff.
struct Restart {
    node: usize,
    sidecar: Option<String>,
    backoff: Duration,
    last_crash: Instant,
    /// When to start it; `None` once started.
    due: Option<Instant>,
}

impl Restart {
    /// Schedules the restart of `node` (or its `sidecar`) after its backoff, doubled when it
    /// crashed again within [`STABLE_AFTER`]; returns the backoff.
    fn schedule(restarts: &mut Vec<Restart>, node: usize, sidecar: Option<String>) -> Duration {
        let now = Instant::now();
        let at = match restarts
            .iter()
            .position(|r| r.node == node && r.sidecar == sidecar)
        {
            Some(at) => at,
            None => {
                restarts.push(Restart {
                    node,
                    sidecar,
                    backoff: Duration::ZERO,
                    last_crash: now,
                    due: None,
                });
                restarts.len() - 1
            }
        };
        let restart = &mut restarts[at];
        restart.backoff = if restart.backoff.is_zero() || now - restart.last_crash > STABLE_AFTER {
            Duration::from_secs(1)
        } else {
            (restart.backoff * 2).min(MAX_RESTART_BACKOFF)
        };
        restart.last_crash = now;
        restart.due = Some(now + restart.backoff);
        restart.backoff
    }

    /// Schedules another attempt after a failed restart; returns the backoff.
    fn retry(&mut self) -> Duration {
        self.backoff = (self.backoff * 2).min(MAX_RESTART_BACKOFF);
        self.due = Some(Instant::now() + self.backoff);
        self.backoff
    }
}

/// State shared between a [`Localnet`] and its [`Stopper`]s.
#[derive(Debug)]
struct Shared {
    procs: Mutex<Vec<NodeProcs>>,
    /// Set by [`Stopper::stop`]; from then on nothing is started again.
    shutdown: AtomicBool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Vec<NodeProcs>> {
        // A panic while holding the lock leaves the table usable: every entry is still a
        // valid child, and stopping must work precisely then.
        self.procs.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn check_not_shut_down(&self) -> Result<()> {
        if self.shutdown.load(Ordering::SeqCst) {
            bail!("the localnet was shut down (Stopper::stop, e.g. on Ctrl-C); not starting processes");
        }
        Ok(())
    }

    /// SIGTERM every sidecar, then every CometBFT node, then the apps; each phase waits and
    /// SIGKILLs stragglers.
    fn stop_all(&self) -> Result<()> {
        let mut table = self.lock();
        let mut sidecars: Vec<Proc> = table
            .iter_mut()
            .flat_map(|n| std::mem::take(&mut n.sidecars))
            .collect();
        let killed_sidecars = process::terminate(&mut sidecars, STOP_GRACE)?;
        let mut cometbfts: Vec<Proc> = table.iter_mut().filter_map(|n| n.cometbft.take()).collect();
        let mut apps: Vec<Proc> = table.iter_mut().filter_map(|n| n.app.take()).collect();
        if cometbfts.is_empty() && apps.is_empty() && sidecars.is_empty() {
            return Ok(());
        }
        tracing::info!(
            cometbft = cometbfts.len(),
            apps = apps.len(),
            "stopping localnet processes"
        );
        // CometBFT first, so no node sees its app vanish in the middle of a block.
        let killed_cometbft = process::terminate(&mut cometbfts, STOP_GRACE);
        let killed_apps = process::terminate(&mut apps, STOP_GRACE);
        let killed = killed_sidecars + killed_cometbft? + killed_apps?;
        tracing::info!(killed, "localnet processes stopped");
        Ok(())
    }
}

/// A cheap, cloneable, thread-safe handle that stops a [`Localnet`]'s processes, for signal
/// handlers (e.g. `ctrlc::set_handler(move || { let _ = stopper.stop(); })`).
///
/// After [`Stopper::stop`] the localnet refuses to start processes again, so a Ctrl-C that
/// lands in the middle of [`Localnet::start`] makes `start` fail promptly instead of bringing the
/// rest of the network up, and [`Localnet::wait`] returns `Ok(())`.
#[derive(Debug, Clone)]
pub struct Stopper {
    shared: Arc<Shared>,
}

impl Stopper {
    /// Marks the localnet as shut down and stops every process (CometBFT first, then apps,
    /// SIGTERM then SIGKILL after [`STOP_GRACE`]). Idempotent.
    pub fn stop(&self) -> Result<()> {
        self.shared.shutdown.store(true, Ordering::SeqCst);
        self.shared.stop_all()
    }

    /// Whether [`Stopper::stop`] has been called.
    pub fn is_stopped(&self) -> bool {
        self.shared.shutdown.load(Ordering::SeqCst)
    }
}

/// An N-validator CometBFT network on 127.0.0.1, each validator a `gonkad` app plus a
/// `cometbft` node, optionally with full nodes added by [`Localnet::add_full_node`]. Dropping
/// it stops every process it started.
///
/// All methods are called from the thread that owns it; other threads (signal handlers)
/// use a [`Stopper`].
#[derive(Debug)]
pub struct Localnet {
    config: LocalnetConfig,
    nodes: Vec<NodeInfo>,
    shared: Arc<Shared>,
}

impl Localnet {
    /// Creates the network if `config.dir` holds none, or reuses the one there untouched
    /// (resuming the same chain). Creation runs `cometbft testnet`, then rewrites every node's
    /// config.toml (listen addresses on the node's host and ports, `proxy_app`, Prometheus,
    /// `persistent_peers` = the other nodes, `addr_book_strict = false`,
    /// `allow_duplicate_ip = true`, `timeout_commit`) and writes one genesis.json with
    /// `chain_id` and `app_state` to every node. Reusing a network created with a different
    /// validator count, base port or chain id is an error; a different `app_state` or
    /// `timeout_commit` is kept as created, with a warning. Starts nothing.
    pub fn prepare(mut config: LocalnetConfig) -> Result<Localnet> {
        config.dir = std::path::absolute(&config.dir)
            .with_context(|| format!("resolving {}", config.dir.display()))?;
        // A relative binary path must not depend on the working directory at spawn time; a
        // bare name stays a PATH lookup.
        for bin in [&mut config.gonkad, &mut config.cometbft] {
            if bin.components().count() > 1 {
                *bin = std::path::absolute(&*bin)
                    .with_context(|| format!("resolving {}", bin.display()))?;
            }
        }
        let nodes = layout::prepare_dir(&config)?;
        let procs = nodes.iter().map(|_| NodeProcs::default()).collect();
        Ok(Localnet {
            config,
            nodes,
            shared: Arc::new(Shared {
                procs: Mutex::new(procs),
                shutdown: AtomicBool::new(false),
            }),
        })
    }

    /// Deletes the localnet at `dir` (see [`crate::reset`]).
    pub fn reset(dir: &Path) -> Result<()> {
        layout::reset(dir)
    }

    /// The configuration, with `dir` made absolute.
    pub fn config(&self) -> &LocalnetConfig {
        &self.config
    }

    /// The root directory (absolute).
    pub fn dir(&self) -> &Path {
        &self.config.dir
    }

    /// The chain id.
    pub fn chain_id(&self) -> &str {
        &self.config.chain_id
    }

    /// Every node's addresses and paths, by index: the genesis validators, then the full
    /// nodes added by [`Localnet::add_full_node`].
    pub fn nodes(&self) -> &[NodeInfo] {
        &self.nodes
    }

    /// Node `i`'s addresses and paths.
    pub fn node(&self, i: usize) -> Result<&NodeInfo> {
        self.nodes.get(i).ok_or_else(|| {
            anyhow!(
                "no node {i}: the localnet has nodes 0..{}",
                self.nodes.len()
            )
        })
    }

    /// A handle that can stop the processes from another thread.
    pub fn stopper(&self) -> Stopper {
        Stopper {
            shared: self.shared.clone(),
        }
    }

    /// Adds a full node (not a genesis validator) at the next index `N` and returns `N`. It
    /// gets `dir/node{N}/` laid out like the validators': its own ports from the same scheme
    /// ([`crate::NodePorts::for_node`]`(base_port, N)`), a fresh node key and
    /// `priv_validator_key.json` from `cometbft init`, node 0's genesis.json byte for byte, and
    /// config.toml rewritten the same way (listen addresses on its host, `proxy_app`, Prometheus,
    /// `persistent_peers` = every existing node, `addr_book_strict = false`,
    /// `allow_duplicate_ip = true`, the network's `timeout_commit`). The existing nodes'
    /// configs are left alone; the new node dials them.
    ///
    /// The node is recorded in the manifest, so [`Localnet::prepare`] on the same directory
    /// resumes it with the network and [`Localnet::start`] starts it too. Nothing is started
    /// here: call [`Localnet::start_node`]`(N)`, which also checks that its ports are free.
    /// Its consensus key is [`crate::read_consensus_key`]`(&node.cometbft_home)`; staking with
    /// it makes the node a validator (CometBFT signs with it as soon as the key is in the set).
    ///
    /// The network's nodes may be running meanwhile. A port block for `N` must fit below 65536;
    /// [`crate::find_free_base_port`] only checked the ports of the nodes it was asked about,
    /// so ask it for the total number of nodes you will run.
    pub fn add_full_node(&mut self) -> Result<usize> {
        let node = layout::add_full_node(&self.config, &self.nodes)?;
        let index = node.index;
        self.nodes.push(node);
        self.shared.lock().push(NodeProcs::default());
        Ok(index)
    }

    /// Starts every node: its app, then (once the app accepts connections on its ABCI address)
    /// its CometBFT node; stdout and stderr go to the node's `app.log` / `cometbft.log`
    /// (appended). Then waits until every node answers RPC `/status`. The whole start is
    /// bounded by `config.start_timeout`; a timeout or a process that exits names the node and
    /// quotes its log. On any error every process started so far is stopped again.
    ///
    /// Children run in their own process groups (the terminal's Ctrl-C does not reach them;
    /// stop them through [`Localnet::stop`] or a [`Stopper`]) and, on Linux, receive SIGTERM
    /// if this process dies.
    pub fn start(&mut self) -> Result<()> {
        self.shared.check_not_shut_down()?;
        for i in 0..self.nodes.len() {
            self.ensure_stopped(i)?;
        }
        let deadline = Instant::now() + self.config.start_timeout;
        let result = (0..self.nodes.len())
            .try_for_each(|i| self.spawn_node(i, deadline))
            .and_then(|()| (0..self.nodes.len()).try_for_each(|i| self.wait_for_rpc(i, deadline)))
            .and_then(|()| {
                (0..self.nodes.len()).try_for_each(|i| self.spawn_sidecars(i, None, deadline))
            });
        if let Err(e) = result {
            if let Err(stop_err) = self.shared.stop_all() {
                tracing::warn!(error = %stop_err, "stopping after a failed start");
            }
            return Err(e);
        }
        tracing::info!(
            nodes = self.nodes.len(),
            chain_id = %self.config.chain_id,
            "localnet running"
        );
        Ok(())
    }

    /// Starts node `i` again (app, then CometBFT) and waits for its RPC, as [`Localnet::start`]
    /// does for every node, within `config.start_timeout`. Node `i` must not be running. On
    /// error its processes are killed.
    pub fn start_node(&mut self, i: usize) -> Result<()> {
        self.node(i)?;
        self.shared.check_not_shut_down()?;
        self.ensure_stopped(i)?;
        let deadline = Instant::now() + self.config.start_timeout;
        let result = self
            .spawn_node(i, deadline)
            .and_then(|()| self.wait_for_rpc(i, deadline))
            .and_then(|()| self.spawn_sidecars(i, None, deadline));
        if let Err(e) = result {
            self.kill_procs(i);
            return Err(e);
        }
        tracing::info!(node = i, "node running");
        Ok(())
    }

    /// The OpenAI base URL (`http://127.0.0.1:<port>/v1`) of node `i`'s ML node.
    pub fn ml_node_url(&self, i: usize) -> Result<String> {
        Ok(format!(
            "http://{}/v1",
            sidecar::ml_node_addr(self.node(i)?)
        ))
    }

    /// The OpenAI base URLs (`http://127.0.0.1:<port>/v1`) of the transfer agents, by node.
    pub fn transfer_agent_urls(&self) -> Vec<String> {
        let count = self.config.sidecar.as_ref().map_or(0, |s| {
            s.transfer_agents
                .min(s.operator_mnemonics.len())
                .min(self.config.validators)
        });
        self.nodes[..count]
            .iter()
            .map(|n| format!("http://{}/v1", sidecar::transfer_agent_addr(n)))
            .collect()
    }

    /// Starts node `i`'s sidecar `role` (`ml-node`, `transfer-agent`, `validator`) again, e.g.
    /// after [`Localnet::kill_sidecar`], and waits until it answers HTTP. Fails if it is
    /// running or the node has no such sidecar.
    pub fn start_sidecar(&mut self, i: usize, role: &str) -> Result<()> {
        self.node(i)?;
        self.shared.check_not_shut_down()?;
        {
            let mut table = self.shared.lock();
            let sidecars = &mut table[i].sidecars;
            sidecars.retain_mut(|p| !matches!(p.exited(), Ok(Some(_))));
            if sidecars.iter().any(|p| p.role.to_string() == role) {
                bail!("node {i} {role} is already running; kill it first");
            }
        }
        let known = self
            .config
            .sidecar
            .as_ref()
            .map(|c| sidecar::specs(c, &self.nodes[i]))
            .transpose()?
            .unwrap_or_default()
            .iter()
            .any(|s| s.role == role);
        if !known {
            bail!("node {i} runs no {role}");
        }
        let deadline = Instant::now() + self.config.start_timeout;
        self.spawn_sidecars(i, Some(role), deadline)?;
        tracing::info!(node = i, role, "sidecar started again");
        Ok(())
    }

    /// SIGKILLs node `i`'s sidecar `role` (`ml-node`, `transfer-agent`, `validator`) and reaps
    /// it. Fails if it was not running.
    pub fn kill_sidecar(&mut self, i: usize, role: &str) -> Result<()> {
        self.node(i)?;
        let mut table = self.shared.lock();
        let sidecars = &mut table[i].sidecars;
        let at = sidecars
            .iter()
            .position(|p| p.role.to_string() == role)
            .ok_or_else(|| anyhow!("node {i} runs no {role}"))?;
        let mut p = sidecars.remove(at);
        p.kill_and_reap()?;
        tracing::info!(node = i, role, "sidecar killed");
        Ok(())
    }

    /// SIGKILLs node `i`'s processes — sidecars, CometBFT node and app (simulating a crash) —
    /// and reaps them. Fails if none was running.
    pub fn kill_node(&mut self, i: usize) -> Result<()> {
        self.node(i)?;
        if !self.kill_procs(i) {
            bail!("node {i} is not running");
        }
        tracing::info!(node = i, "node killed");
        Ok(())
    }

    /// Sends `signal` (e.g. `libc::SIGKILL`, `SIGSTOP`, `SIGCONT`) to the process group of node
    /// `i`'s `process` — what a fault injector does. Returns whether it was sent (`false` if
    /// that process has already exited); fails if the node has no such process. A process
    /// killed this way stays in the table: [`Localnet::kill_node`] then
    /// [`Localnet::start_node`] (or [`Localnet::start_sidecar`]) bring it back.
    pub fn signal(&mut self, i: usize, process: Role, signal: libc::c_int) -> Result<bool> {
        self.node(i)?;
        let mut table = self.shared.lock();
        let target = table[i]
            .get_mut(process)
            .ok_or_else(|| anyhow!("node {i} runs no {process}"))?;
        target.signal(signal)
    }

    /// The process id of node `i`'s `process`, if it runs one that has not exited (what a
    /// benchmark reads its CPU time from, in `/proc/<pid>/stat`).
    pub fn pid(&self, i: usize, process: Role) -> Option<u32> {
        let mut table = self.shared.lock();
        let running = table.get_mut(i)?.get_mut(process)?;
        matches!(running.exited(), Ok(None)).then(|| running.child.id())
    }

    /// Stops every process: SIGTERM to all CometBFT nodes, up to [`STOP_GRACE`] for them to
    /// exit, SIGKILL for stragglers; then the same for the apps. Chain data stays on disk and
    /// [`Localnet::start`] may be called again. Idempotent.
    pub fn stop(&mut self) -> Result<()> {
        self.shared.stop_all()
    }

    /// Whether node `i` has a CometBFT or app process that has not exited.
    pub fn is_running(&self, i: usize) -> bool {
        let mut table = self.shared.lock();
        let Some(node) = table.get_mut(i) else {
            return false;
        };
        let running = node.all().any(|p| matches!(p.exited(), Ok(None)));
        running
    }

    /// Node `i`'s latest block height, `sync_info.latest_block_height` of its RPC `/status`.
    pub fn height(&self, i: usize) -> Result<u64> {
        let node = self.node(i)?;
        rpc::status(node.rpc_addr, RPC_TIMEOUT)
            .and_then(|st| rpc::latest_block_height(&st))
            .with_context(|| format!("reading the height of node {i} at {}", node.rpc_url))
    }

    /// Polls node `i` until its height is at least `min_height` and returns that height; fails
    /// after `timeout`, naming the node, the last height seen and its CometBFT log.
    pub fn wait_for_height(&self, i: usize, min_height: u64, timeout: Duration) -> Result<u64> {
        let node = self.node(i)?;
        let deadline = Instant::now() + timeout;
        loop {
            let last = match self.height(i) {
                Ok(h) if h >= min_height => return Ok(h),
                Ok(h) => h.to_string(),
                Err(e) => format!("error: {e:#}"),
            };
            if Instant::now() >= deadline {
                bail!(
                    "node {i} did not reach height {min_height} within {:?} (last: {}); see {}\n{}",
                    timeout,
                    last,
                    node.cometbft_log.display(),
                    log_tail(&node.cometbft_log, TAIL_LINES)
                );
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// Blocks until a [`Stopper`] stops the localnet, watching its processes meanwhile (the
    /// CLI's foreground loop). A process that exits on its own is reported (node, process,
    /// exit status, log tail) and the rest of the network keeps running, as a real network
    /// does when one validator falls over:
    ///
    /// - an app or CometBFT node that exits takes its node down: the node's other processes
    ///   are killed too (CometBFT without its app, or sidecars without their node, only fail
    ///   noisily), and the number of nodes still running is reported;
    /// - a sidecar that exits is reported alone.
    ///
    /// With [`CrashPolicy::Restart`] the node (or the sidecar) is started again after a
    /// backoff that doubles while it keeps crashing (1 s up to [`MAX_RESTART_BACKOFF`]) and the
    /// node catches up with the others through CometBFT. Processes removed by
    /// [`Localnet::kill_node`] or [`Localnet::kill_sidecar`] are not watched.
    pub fn supervise(&mut self, policy: CrashPolicy) -> Result<()> {
        let mut restarts: Vec<Restart> = Vec::new();
        loop {
            if self.shared.shutdown.load(Ordering::SeqCst) {
                return Ok(());
            }
            for crash in self.crashes()? {
                if self.shared.shutdown.load(Ordering::SeqCst) {
                    return Ok(());
                }
                let down = match &crash.sidecar {
                    None => {
                        self.kill_procs(crash.node);
                        let running = (0..self.nodes.len())
                            .filter(|&i| self.is_running(i))
                            .count();
                        format!(
                            "node {} is down; {running} of {} nodes running",
                            crash.node,
                            self.nodes.len()
                        )
                    }
                    Some(role) => format!("node {} {role} is down", crash.node),
                };
                let next = match policy {
                    CrashPolicy::Report => {
                        "it stays down (`gonkad localnet --restart-crashed` restarts crashed nodes)"
                            .to_string()
                    }
                    CrashPolicy::Restart => {
                        let backoff =
                            Restart::schedule(&mut restarts, crash.node, crash.sidecar.clone());
                        format!("restarting it in {backoff:?}")
                    }
                };
                tracing::error!(
                    "node {} {} exited unexpectedly ({}); {down}; {next}; see {}\n{}",
                    crash.node,
                    crash.role,
                    crash.status,
                    crash.log.display(),
                    log_tail(&crash.log, TAIL_LINES)
                );
            }
            let now = Instant::now();
            for due in restarts
                .iter_mut()
                .filter(|r| r.due.is_some_and(|d| d <= now))
            {
                due.due = None;
                let started = match &due.sidecar {
                    None => self.start_node(due.node),
                    Some(role) => self.start_sidecar(due.node, role),
                };
                match started {
                    Ok(()) => {
                        tracing::info!(node = due.node, sidecar = ?due.sidecar, "restarted after a crash")
                    }
                    Err(e) => {
                        if self.shared.shutdown.load(Ordering::SeqCst) {
                            return Ok(());
                        }
                        let backoff = due.retry();
                        tracing::error!(node = due.node, sidecar = ?due.sidecar, error = %format!("{e:#}"), ?backoff, "restart failed; trying again");
                    }
                }
            }
            thread::sleep(Duration::from_millis(200));
        }
    }

    /// The processes that exited on their own since the last look: a node's first dead app
    /// or CometBFT (the node counts as one crash), and dead sidecars of nodes still up, each
    /// taken out of the table.
    fn crashes(&self) -> Result<Vec<Crash>> {
        let mut found = Vec::new();
        let mut table = self.shared.lock();
        for (i, node) in table.iter_mut().enumerate() {
            let mut node_down = None;
            for slot in [&mut node.app, &mut node.cometbft] {
                if let Some(p) = slot {
                    if let Some(status) = p.exited()? {
                        node_down.get_or_insert(Crash {
                            node: i,
                            role: p.role.to_string(),
                            sidecar: None,
                            status,
                            log: p.log.clone(),
                        });
                        *slot = None;
                    }
                }
            }
            if let Some(crash) = node_down {
                found.push(crash);
                continue;
            }
            let mut still = Vec::with_capacity(node.sidecars.len());
            for mut p in std::mem::take(&mut node.sidecars) {
                match p.exited()? {
                    None => still.push(p),
                    Some(status) => found.push(Crash {
                        node: i,
                        role: p.role.to_string(),
                        sidecar: match p.role {
                            Role::Sidecar(role) => Some(role.to_string()),
                            _ => None,
                        },
                        status,
                        log: p.log.clone(),
                    }),
                }
            }
            node.sidecars = still;
        }
        Ok(found)
    }

    /// Errors if node `i` has a live process; forgets processes that already exited.
    fn ensure_stopped(&self, i: usize) -> Result<()> {
        let mut table = self.shared.lock();
        let node = &mut table[i];
        for slot in [&mut node.app, &mut node.cometbft] {
            if let Some(p) = slot {
                match p.exited()? {
                    None => bail!(
                        "node {i} {} is already running (pid {}); stop or kill it first",
                        p.role,
                        p.child.id()
                    ),
                    Some(status) => {
                        tracing::debug!(node = i, role = %p.role, %status, "forgetting exited process");
                        *slot = None;
                    }
                }
            }
        }
        for p in &mut node.sidecars {
            if p.exited()?.is_none() {
                bail!(
                    "node {i} {} is already running (pid {}); stop or kill it first",
                    p.role,
                    p.child.id()
                );
            }
        }
        node.sidecars.clear();
        Ok(())
    }

    /// SIGKILLs and reaps node `i`'s processes; returns whether there were any.
    fn kill_procs(&self, i: usize) -> bool {
        let mut table = self.shared.lock();
        let node = &mut table[i];
        let mut any = false;
        let sidecars = std::mem::take(&mut node.sidecars);
        for mut p in sidecars
            .into_iter()
            .chain(node.cometbft.take())
            .chain(node.app.take())
        {
            any = true;
            if let Err(e) = p.kill_and_reap() {
                tracing::warn!(node = i, role = %p.role, error = %e, "killing");
            }
        }
        any
    }

    /// Starts node `i`'s sidecars (if the localnet has any; only `role` if given) and waits
    /// until those with an HTTP API answer. Called once the node's RPC answers, since sidecars
    /// connect to it.
    fn spawn_sidecars(&self, i: usize, role: Option<&str>, deadline: Instant) -> Result<()> {
        let Some(config) = &self.config.sidecar else {
            return Ok(());
        };
        let mut specs = sidecar::specs(config, &self.nodes[i])?;
        specs.retain(|s| role.is_none_or(|r| r == s.role));
        for spec in &specs {
            self.shared.check_not_shut_down()?;
            let proc = process::spawn(
                &config.binary,
                &spec.args,
                Role::Sidecar(spec.role),
                i,
                &spec.log,
            )?;
            self.shared.lock()[i].sidecars.push(proc);
            tracing::info!(node = i, role = spec.role, log = %spec.log.display(), "sidecar started");
        }
        for spec in &specs {
            let Some((addr, path)) = spec.ready_url else {
                continue;
            };
            loop {
                self.check_alive(i)?;
                if rpc::answers_ok(addr, path, RPC_TIMEOUT) {
                    break;
                }
                if Instant::now() >= deadline {
                    bail!(
                        "node {i} {} at http://{addr} did not answer {path} within {:?}; see {}\n{}",
                        spec.role,
                        self.config.start_timeout,
                        spec.log.display(),
                        log_tail(&spec.log, TAIL_LINES)
                    );
                }
                thread::sleep(Duration::from_millis(100));
            }
        }
        Ok(())
    }

    /// Starts node `i`'s app, waits for its ABCI listener, then starts its CometBFT node.
    fn spawn_node(&self, i: usize, deadline: Instant) -> Result<()> {
        self.shared.check_not_shut_down()?;
        let node = &self.nodes[i];
        // A node on a host of its own binds an address this process may not have.
        if !self.config.node_hosts.contains_key(&i) {
            check_ports_free(node, self.config.sidecar.is_some())?;
        }

        let mut app_args: Vec<OsString> = vec![
            "start".into(),
            "--home".into(),
            node.app_home.clone().into(),
            "--abci-addr".into(),
            node.abci_addr.to_string().into(),
            "--metrics-listen".into(),
            SocketAddr::new(node.abci_addr.ip(), node.ports.app_metrics())
                .to_string()
                .into(),
            // gRPC for stock Cosmos clients, backed by this node's RPC.
            "--api-listen".into(),
            SocketAddr::new(node.abci_addr.ip(), node.ports.api())
                .to_string()
                .into(),
            "--node".into(),
            node.rpc_url.clone().into(),
        ];
        if let Some(sidecar) = &self.config.sidecar {
            if let Some(dir) = crate::sidecar::bls_dir(sidecar, node) {
                // The node signs beacons with the shares its validator sidecar keeps.
                app_args.extend(["--bls-dir".into(), dir.into()]);
            }
        }
        app_args.extend(self.config.app_args.iter().cloned());
        if let Some(extra) = self.config.node_app_args.get(&i) {
            app_args.extend(extra.iter().cloned());
        }
        let (program, args) = self.node_command(i, &self.config.gonkad, app_args);
        let app = process::spawn(&program, &args, Role::App, i, &node.app_log)?;
        self.shared.lock()[i].app = Some(app);
        tracing::info!(node = i, abci = %node.abci_addr, log = %node.app_log.display(), "app started");
        self.wait_for_abci(i, deadline)?;

        self.shared.check_not_shut_down()?;
        let cometbft_args: Vec<OsString> = vec![
            "start".into(),
            "--home".into(),
            node.cometbft_home.clone().into(),
        ];
        let (program, args) = self.node_command(i, &self.config.cometbft, cometbft_args);
        let cometbft = process::spawn(&program, &args, Role::Cometbft, i, &node.cometbft_log)?;
        self.shared.lock()[i].cometbft = Some(cometbft);
        tracing::info!(node = i, rpc = %node.rpc_url, log = %node.cometbft_log.display(), "cometbft started");
        Ok(())
    }

    /// `program args` as node `i` runs it: after its host's wrapper
    /// ([`crate::layout::NodeHost`]), if it has one.
    fn node_command(
        &self,
        i: usize,
        program: &std::path::Path,
        args: Vec<OsString>,
    ) -> (std::path::PathBuf, Vec<OsString>) {
        match self.config.node_hosts.get(&i).map(|h| h.wrapper.as_slice()) {
            Some([wrapper, wrapper_args @ ..]) => {
                let mut line = wrapper_args.to_vec();
                line.push(program.into());
                line.extend(args);
                (wrapper.into(), line)
            }
            _ => (program.to_path_buf(), args),
        }
    }

    /// Fails if node `i`'s processes exited or the localnet was shut down.
    fn check_alive(&self, i: usize) -> Result<()> {
        self.shared.check_not_shut_down()?;
        let mut table = self.shared.lock();
        for p in table[i].all() {
            if let Some(status) = p.exited()? {
                bail!(
                    "node {i} {} exited during startup ({status}); see {}\n{}",
                    p.role,
                    p.log.display(),
                    log_tail(&p.log, TAIL_LINES)
                );
            }
        }
        Ok(())
    }

    /// Waits until node `i`'s app accepts a TCP connection on its ABCI address. The probe
    /// connection is closed without sending anything.
    fn wait_for_abci(&self, i: usize, deadline: Instant) -> Result<()> {
        let node = &self.nodes[i];
        loop {
            self.check_alive(i)?;
            if TcpStream::connect_timeout(&node.abci_addr, Duration::from_millis(500)).is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "node {i} app did not listen on {} within {:?}; see {}\n{}",
                    node.abci_addr,
                    self.config.start_timeout,
                    node.app_log.display(),
                    log_tail(&node.app_log, TAIL_LINES)
                );
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until node `i` answers RPC `/status` for this chain.
    fn wait_for_rpc(&self, i: usize, deadline: Instant) -> Result<()> {
        let node = &self.nodes[i];
        loop {
            self.check_alive(i)?;
            let last_err = match rpc::status(node.rpc_addr, RPC_TIMEOUT) {
                Ok(st) => {
                    let network = st["node_info"]["network"].as_str().unwrap_or_default();
                    if network != self.config.chain_id {
                        bail!(
                            "{} answers for chain {network:?}, not {:?}; is another network using \
                             port {}?",
                            node.rpc_url,
                            self.config.chain_id,
                            node.ports.rpc
                        );
                    }
                    tracing::info!(node = i, rpc = %node.rpc_url, "node answers RPC");
                    return Ok(());
                }
                Err(e) => format!("{e:#}"),
            };
            if Instant::now() >= deadline {
                bail!(
                    "node {i} RPC at {} did not answer /status within {:?} (last error: {last_err}); \
                     see {} and {}\n{}",
                    node.rpc_url,
                    self.config.start_timeout,
                    node.cometbft_log.display(),
                    node.app_log.display(),
                    log_tail(&node.cometbft_log, TAIL_LINES)
                );
            }
            thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Fails with a clear message if another process holds one of `node`'s ports (for example a
/// localnet left running by a crashed launcher).
fn check_ports_free(node: &NodeInfo, with_sidecars: bool) -> Result<()> {
    let mut named = vec![
        ("P2P", node.ports.p2p),
        ("RPC", node.ports.rpc),
        ("ABCI", node.ports.abci),
        ("Prometheus", node.ports.prometheus),
        ("app metrics", node.ports.app_metrics()),
        ("API (gRPC and REST)", node.ports.api()),
    ];
    if with_sidecars {
        named.push(("ML node", sidecar::ml_node_addr(node).port()));
        named.push(("transfer agent", sidecar::transfer_agent_addr(node).port()));
        named.push((
            "validator metrics",
            sidecar::validator_metrics_addr(node).port(),
        ));
    }
    for (what, port) in named {
        let addr = SocketAddr::new(node.abci_addr.ip(), port);
        if let Err(e) = TcpListener::bind(addr) {
            bail!(
                "node {} {what} port {port} on 127.0.0.1 is not free ({e}); is another localnet \
                 or an old node still running? (`ss -ltnp 'sport = :{port}'` shows who holds it)",
                node.index
            );
        }
    }
    Ok(())
}

impl Drop for Localnet {
    fn drop(&mut self) {
        if let Err(e) = self.shared.stop_all() {
            tracing::warn!(error = %e, "stopping the localnet on drop");
        }
    }
}
