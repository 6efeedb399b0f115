//! A throwaway PostgreSQL for Engram's tests and bench (dev-only): Debian's
//! binaries (found under `/usr/lib/postgresql/*/bin`, else `initdb` on the
//! `PATH`) make a cluster with `initdb` in a temporary directory and run it
//! on a free loopback port, as `nobody` when run as root (`initdb` refuses
//! root). A cluster is stopped, and its directory removed, when it is
//! dropped or when the process that made it exits, however it exits (its
//! tests panicked, or it was killed): a shell waiting on a pipe does it.
//!
//! For tests: one shared cluster serves the whole test binary, each test a
//! database of its own ([`database`], or a [`copy_of`] one prepared once);
//! a test that restarts the server has a cluster of its own
//! ([`private_cluster`]). Where the binaries are
//! absent a test says so and returns: skipped, never passed silently. In
//! CI (`CI=true`) their absence is a failure (`.ci/run` installs Debian's
//! `postgresql`). The bench uses [`Cluster::create`] and
//! [`find_binaries`] and reports their absence itself.

use std::io;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// What to say where the binaries are absent.
pub const NOT_INSTALLED: &str = "PostgreSQL's initdb and postgres are not installed (Debian's `postgresql`; .ci/run installs it)";

/// How long a started server may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running cluster, stopped when dropped or at exit.
pub struct Cluster {
    port: u16,
    dir: PathBuf,
    bin: PathBuf,
    /// Who runs the server: `nobody` when running as root.
    owner: Option<(u32, u32)>,
    /// The running server, reaped when it is stopped.
    server: Mutex<Child>,
    /// Its standard input is closed when the cluster is dropped or the
    /// process exits, which stops the server ([`stop_at_exit`]).
    stopper: Child,
}

impl Drop for Cluster {
    /// Closes the stopper's input, reaps the server it stops, then the
    /// stopper once it has removed the directory.
    fn drop(&mut self) {
        drop(self.stopper.stdin.take());
        let _ = self
            .server
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .wait();
        let _ = self.stopper.wait();
    }
}

impl Cluster {
    /// `initdb` in a temporary directory with the binaries in `bin`, then
    /// the server started on a free loopback port (it may not accept
    /// connections yet: see [`connect_within`]).
    pub fn create(bin: &Path) -> io::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("engram-pg-")
            .tempdir()?
            .keep();
        let owner = unprivileged_owner()?;
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(&dir, Some(uid), Some(gid))?;
        }
        let initdb = as_owner(Command::new(bin.join("initdb")), owner)
            .args([
                "--auth=trust",
                "--username=postgres",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
                "-D",
            ])
            .arg(dir.join("data"))
            .output()?;
        if !initdb.status.success() {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(io::Error::other(format!(
                "initdb failed: {}",
                String::from_utf8_lossy(&initdb.stderr)
            )));
        }
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let stopper = stop_at_exit(&dir)?;
        let server = spawn_server(bin, &dir, port, owner)?;
        Ok(Self {
            port,
            dir,
            bin: bin.to_owned(),
            owner,
            server: Mutex::new(server),
            stopper,
        })
    }

    /// The URL of `database` on this cluster, as its superuser.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// Stops the server (fast shutdown: clients are disconnected) and
    /// starts it again on the same port, once it accepts connections.
    pub async fn restart(&self) {
        self.stop();
        self.start().await;
    }

    /// Stops the server (fast shutdown: clients are disconnected) and waits
    /// for it to exit; [`Self::start`] brings it back.
    pub fn stop(&self) {
        let mut server = self.server.lock().unwrap();
        let pid = server.id().to_string();
        let stopped = Command::new("kill").args(["-INT", &pid]).status().unwrap();
        assert!(stopped.success());
        let exited = server.wait().unwrap();
        assert!(exited.success(), "the server's fast shutdown: {exited}");
    }

    /// Starts the stopped server again on the same port, once it accepts
    /// connections.
    pub async fn start(&self) {
        *self.server.lock().unwrap() =
            spawn_server(&self.bin, &self.dir, self.port, self.owner).unwrap();
        self.connect("postgres").await;
    }

    /// The URL of a new database on this cluster.
    pub async fn database(&self) -> TestDatabase {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let name = format!("engram_private_{}", NEXT.fetch_add(1, Ordering::Relaxed));
        self.connect("postgres")
            .await
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .unwrap();
        TestDatabase {
            url: self.url(&name),
            name,
        }
    }

    /// A client of `database`, once the server accepts connections; a
    /// panic quoting the server's log if it never does.
    async fn connect(&self, database: &str) -> tokio_postgres::Client {
        connect_within(&self.url(database), START_TIMEOUT)
            .await
            .unwrap_or_else(|err| {
                panic!(
                    "PostgreSQL did not accept connections: {err}; its log: {}",
                    self.log()
                )
            })
    }
}

/// A client of `url`, once the server accepts connections, or the last
/// error once `timeout` has passed. The connection is driven by a task of
/// the current runtime.
pub async fn connect_within(
    url: &str,
    timeout: Duration,
) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let deadline = Instant::now() + timeout;
    loop {
        match tokio_postgres::connect(url, tokio_postgres::NoTls).await {
            Ok((client, connection)) => {
                tokio::spawn(connection);
                return Ok(client);
            }
            Err(err) if Instant::now() >= deadline => return Err(err),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// One test's database on the shared cluster.
pub struct TestDatabase {
    pub url: String,
    /// Its name on the cluster.
    pub name: String,
}

static CLUSTER: OnceLock<Option<Cluster>> = OnceLock::new();

/// A fresh, empty database on the shared cluster, or `None` (having said
/// why) where PostgreSQL is not installed outside CI.
pub async fn database() -> Option<TestDatabase> {
    create_database(None).await
}

/// A fresh database on the shared cluster holding what `template` holds
/// (one made by [`database`] and prepared once, to which no one is
/// connected any more): copying a prepared database is cheaper than
/// preparing each. `None` as [`database`].
pub async fn copy_of(template: &TestDatabase) -> Option<TestDatabase> {
    create_database(Some(&template.name)).await
}

/// Waits until no session is connected to `database`, so that it can be
/// copied: a client's session ends a moment after the client is dropped.
pub async fn disconnected(database: &TestDatabase) {
    let admin = shared_cluster()
        .expect("the database is on the shared cluster")
        .connect("postgres")
        .await;
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        let sessions: i64 = admin
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = $1",
                &[&database.name],
            )
            .await
            .unwrap()
            .get(0);
        if sessions == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{sessions} sessions stayed connected to {}",
            database.name
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn shared_cluster() -> Option<&'static Cluster> {
    CLUSTER
        .get_or_init(|| binaries_or_skip().map(|bin| Cluster::create(&bin).unwrap()))
        .as_ref()
}

async fn create_database(template: Option<&str>) -> Option<TestDatabase> {
    let cluster = shared_cluster()?;
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = format!("engram_test_{}", NEXT.fetch_add(1, Ordering::Relaxed));
    let copied = template.map_or_else(String::new, |template| format!(" TEMPLATE {template}"));
    let admin = cluster.connect("postgres").await;
    admin
        .batch_execute(&format!("CREATE DATABASE {name}{copied}"))
        .await
        .unwrap();
    Some(TestDatabase {
        url: cluster.url(&name),
        name,
    })
}

/// A client of `url`, once the server accepts connections; a panic
/// quoting the shared cluster's log if it never does.
pub async fn connect(url: &str) -> tokio_postgres::Client {
    connect_within(url, START_TIMEOUT)
        .await
        .unwrap_or_else(|err| {
            panic!(
                "PostgreSQL did not accept connections: {err}; its log: {}",
                CLUSTER
                    .get()
                    .and_then(Option::as_ref)
                    .map(Cluster::log)
                    .unwrap_or_default()
            )
        })
}

/// A cluster of the calling test's own, which it may restart; stopped when
/// dropped. `None` (having said why) as [`database`].
pub async fn private_cluster() -> Option<Cluster> {
    let bin = binaries_or_skip()?;
    let cluster = tokio::task::spawn_blocking(move || Cluster::create(&bin))
        .await
        .unwrap()
        .unwrap();
    cluster.connect("postgres").await;
    Some(cluster)
}

/// The tests' rule: where the binaries are absent, a failure in CI and a
/// test that says it is skipped elsewhere.
pub fn binaries_or_skip() -> Option<PathBuf> {
    let bin = find_binaries();
    if bin.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{NOT_INSTALLED}"
        );
        eprintln!("skipped: {NOT_INSTALLED}");
    }
    bin
}

/// The directory holding `initdb` and `postgres`: the newest of Debian's
/// versioned directories, else wherever `initdb` on the `PATH` really is.
pub fn find_binaries() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse().ok()?;
            Some((version, entry.path().join("bin")))
        })
        .filter(|(_, bin)| has_binaries(bin))
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Some(bin);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("initdb"))
        .filter_map(|initdb| std::fs::canonicalize(initdb).ok())
        .filter_map(|initdb| initdb.parent().map(Path::to_owned))
        .find(|bin| has_binaries(bin))
}

fn has_binaries(bin: &Path) -> bool {
    bin.join("initdb").is_file() && bin.join("postgres").is_file()
}

/// Starts the server of the cluster in `dir` on `port`, logging to its
/// `server.log`.
fn spawn_server(bin: &Path, dir: &Path, port: u16, owner: Option<(u32, u32)>) -> io::Result<Child> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("server.log"))?;
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::chown(dir.join("server.log"), Some(uid), Some(gid))?;
    }
    as_owner(Command::new(bin.join("postgres")), owner)
        .arg("-D")
        .arg(dir.join("data"))
        .args(["-p", &port.to_string()])
        .args(["-c", "listen_addresses=127.0.0.1"])
        .arg("-c")
        .arg(format!("unix_socket_directories={}", dir.display()))
        .args(["-c", "fsync=off", "-c", "max_connections=200"])
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
}

/// A shell that waits for its standard input to close, which happens when
/// the cluster is dropped or this process exits however it exits, then
/// stops the server (fast shutdown) and removes the cluster's directory.
/// It waits for the server to remove its `postmaster.pid`, the last step
/// of its shutdown, rather than for the process to be gone: an exited
/// server stays a zombie until its parent (this process, or whoever adopts
/// it) reaps it.
fn stop_at_exit(dir: &Path) -> io::Result<Child> {
    Command::new("sh")
        .args([
            "-c",
            r#"read _; pid=$(head -n 1 "$1/data/postmaster.pid" 2>/dev/null) && kill -INT "$pid" && while [ -e "$1/data/postmaster.pid" ]; do sleep 0.1; done; rm -rf "$1""#,
            "stop-postgres",
        ])
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
}

/// `nobody`'s user and group when running as root, read from
/// `/etc/passwd`; `None` for an unprivileged user, who runs PostgreSQL
/// as itself.
fn unprivileged_owner() -> io::Result<Option<(u32, u32)>> {
    if !rustix::process::geteuid().is_root() {
        return Ok(None);
    }
    let passwd = std::fs::read_to_string("/etc/passwd")?;
    passwd
        .lines()
        .map(|line| line.split(':').collect::<Vec<_>>())
        .find(|fields| fields.first() == Some(&"nobody"))
        .and_then(|fields| Some((fields.get(2)?.parse().ok()?, fields.get(3)?.parse().ok()?)))
        .map(Some)
        .ok_or_else(|| {
            io::Error::other(
                "running as root, PostgreSQL runs as `nobody`, who is not in /etc/passwd",
            )
        })
}

fn as_owner(mut command: Command, owner: Option<(u32, u32)>) -> Command {
    use std::os::unix::process::CommandExt;
    if let Some((uid, gid)) = owner {
        command.uid(uid).gid(gid);
    }
    command.env_clear().env("LC_ALL", "C");
    command
}
