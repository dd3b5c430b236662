//! A private MariaDB server for one benchmark: its own data directory, a
//! Unix socket, no TCP port (`--skip-networking`), no option file read
//! (`--no-defaults`), and no system service touched. Dropping the
//! [`Server`] stops it (SIGTERM: InnoDB's clean shutdown; SIGKILL if it
//! has not stopped after [`STOP_TIMEOUT`]) and removes its files unless
//! asked to keep them, so that an error, or Ctrl-C through
//! [`super::interrupt`], leaves nothing running. (`mariadbd` ignores
//! SIGINT: a `keel` killed outright, with SIGKILL, leaves its server
//! running, to be stopped by hand, and its files in the data directory.)

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::interrupt::Interrupt;
use crate::oltp::OltpError;

/// How long the server may take to start (InnoDB creates its log and
/// allocates the pool).
const START_TIMEOUT: Duration = Duration::from_secs(300);
/// How long a clean shutdown may take (it writes every dirty page).
pub const STOP_TIMEOUT: Duration = Duration::from_secs(600);

/// The programs the InnoDB side needs, found on `PATH` or in `/usr/sbin`.
#[derive(Clone, Debug)]
pub struct Tools {
    /// `mariadbd` (or `mysqld`).
    pub server: PathBuf,
    /// `mariadb-install-db` (or `mysql_install_db`).
    pub install_db: PathBuf,
    /// `mariadb` (or `mysql`), the command-line client.
    pub client: PathBuf,
    /// `sysbench`.
    pub sysbench: PathBuf,
}

fn find(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    dirs.extend(["/usr/sbin", "/usr/local/sbin", "/sbin"].map(PathBuf::from));
    names
        .iter()
        .flat_map(|n| dirs.iter().map(move |d| d.join(n)))
        .find(|p| p.is_file())
}

impl Tools {
    /// Find every program; the error names the Debian packages to install.
    pub fn find() -> Result<Tools, OltpError> {
        let server = find(&["mariadbd", "mysqld"]);
        let install_db = find(&["mariadb-install-db", "mysql_install_db"]);
        let client = find(&["mariadb", "mysql"]);
        let sysbench = find(&["sysbench"]);
        let mut missing = Vec::new();
        if server.is_none() || install_db.is_none() {
            missing.push("mariadb-server");
        }
        if client.is_none() {
            missing.push("mariadb-client");
        }
        if sysbench.is_none() {
            missing.push("sysbench");
        }
        match (server, install_db, client, sysbench) {
            (Some(server), Some(install_db), Some(client), Some(sysbench)) => Ok(Tools {
                server,
                install_db,
                client,
                sysbench,
            }),
            _ => Err(OltpError::Data(format!(
                "the InnoDB side needs MariaDB and sysbench; missing Debian packages: {} \
                 (apt-get install {}); nothing was installed",
                missing.join(", "),
                missing.join(" ")
            ))),
        }
    }
}

/// A running private server.
pub struct Server {
    tools: Tools,
    /// The directory holding everything of this server.
    root: PathBuf,
    socket: PathBuf,
    child: Option<Child>,
    keep: bool,
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// For an error message: a log's lines that say `ERROR` (the first 10),
/// then its last `n` lines.
fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let last = lines.len().saturating_sub(n);
    let errors: Vec<&str> = lines[..last]
        .iter()
        .filter(|l| l.contains("ERROR"))
        .take(10)
        .copied()
        .collect();
    let mut out = String::new();
    if !errors.is_empty() {
        out = format!("{}\n...\n", errors.join("\n"));
    }
    out + &lines[last..].join("\n")
}

/// Run `cmd` to its end with its output in the file `log`; an error quotes
/// the log's last lines. A signal kills it ([`Interrupt::wait`]).
pub fn run_logged(cmd: &mut Command, log: &Path, interrupt: &Interrupt) -> Result<(), OltpError> {
    let out = std::fs::File::create(log)
        .map_err(OltpError::io(format!("cannot create {}", log.display())))?;
    let err = out
        .try_clone()
        .map_err(OltpError::io(format!("cannot write {}", log.display())))?;
    let program = Path::new(cmd.get_program()).display().to_string();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(OltpError::io(format!("cannot run {program}")))?;
    let status = interrupt.wait(&mut child, &program)?;
    if !status.success() {
        return Err(OltpError::Data(format!(
            "{program} failed ({status}):\n{}",
            tail(log, 15)
        )));
    }
    Ok(())
}

impl Server {
    /// Create the data directory under `root` (which must not exist or be
    /// empty), initialize it and start the server with `flags`; returns
    /// once it answers queries, or `Err(Interrupted)` (the server stopped,
    /// its files removed) when `interrupt` is raised first.
    pub fn start(
        tools: &Tools,
        root: &Path,
        flags: &[String],
        keep: bool,
        interrupt: &Interrupt,
    ) -> Result<Server, OltpError> {
        if root.exists()
            && std::fs::read_dir(root)
                .map_err(OltpError::io(format!("cannot read {}", root.display())))?
                .next()
                .is_some()
        {
            return Err(OltpError::Data(format!(
                "{} is not empty: give an empty or new --datadir for the MariaDB server",
                root.display()
            )));
        }
        let data = root.join("data");
        std::fs::create_dir_all(&data)
            .map_err(OltpError::io(format!("cannot create {}", data.display())))?;
        let root = std::fs::canonicalize(root)
            .map_err(OltpError::io(format!("cannot resolve {}", root.display())))?;
        let data = root.join("data");
        // A Unix socket path must fit in 108 bytes: keep it short.
        let socket = std::env::temp_dir().join(format!("keel-innodb-{}.sock", std::process::id()));
        let mut server = Server {
            tools: tools.clone(),
            root: root.clone(),
            socket,
            child: None,
            keep,
        };
        let user: Vec<String> = if is_root() {
            vec!["--user=root".into()]
        } else {
            vec![]
        };
        let mut install = Command::new(&tools.install_db);
        install
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .args(["--auth-root-authentication-method=normal", "--skip-test-db"])
            .args(&user)
            .args(flags);
        run_logged(&mut install, &root.join("install.log"), interrupt)?;
        let error_log = root.join("error.log");
        let child = Command::new(&tools.server)
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--socket={}", server.socket.display()))
            .arg(format!(
                "--pid-file={}",
                root.join("mariadbd.pid").display()
            ))
            .arg(format!("--log-error={}", error_log.display()))
            .args(["--skip-networking", "--skip-name-resolve"])
            .args(["--innodb-monitor-enable=all", "--max-connections=1000"])
            .args(&user)
            .args(flags)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(OltpError::io(format!(
                "cannot start {}",
                tools.server.display()
            )))?;
        server.child = Some(child);
        let t0 = Instant::now();
        loop {
            if let Some(c) = server.child.as_mut() {
                if let Ok(Some(status)) = c.try_wait() {
                    server.child = None;
                    return Err(OltpError::Data(format!(
                        "the MariaDB server exited at start ({status}); its error log ends:\n{}",
                        tail(&error_log, 15)
                    )));
                }
            }
            if server.socket.exists() && server.query("SELECT 1").is_ok() {
                return Ok(server);
            }
            if t0.elapsed() > START_TIMEOUT {
                return Err(OltpError::Data(format!(
                    "the MariaDB server did not answer within {} s; its error log ends:\n{}",
                    START_TIMEOUT.as_secs(),
                    tail(&error_log, 15)
                )));
            }
            interrupt.sleep(Duration::from_millis(200))?;
        }
    }

    /// The server's Unix socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The server's process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The directory holding the server's files.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Run `sql` with the command-line client; its output in batch mode
    /// (tab-separated, no column names).
    pub fn query(&self, sql: &str) -> Result<String, OltpError> {
        let out = Command::new(&self.tools.client)
            .arg("--no-defaults")
            .arg(format!("--socket={}", self.socket.display()))
            .args([
                "--user=root",
                "--batch",
                "--skip-column-names",
                "--raw",
                "-e",
                sql,
            ])
            .stdin(Stdio::null())
            .output()
            .map_err(OltpError::io(format!(
                "cannot run {}",
                self.tools.client.display()
            )))?;
        if !out.status.success() {
            return Err(OltpError::Data(format!(
                "query `{sql}` failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Stop the server cleanly (SIGTERM, then wait); SIGKILL after
    /// [`STOP_TIMEOUT`]. The error says if it had to be killed.
    pub fn stop(&mut self) -> Result<(), OltpError> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let t0 = Instant::now();
        loop {
            match child.try_wait() {
                Ok(Some(_)) => return Ok(()),
                Ok(None) if t0.elapsed() < STOP_TIMEOUT => {
                    std::thread::sleep(Duration::from_millis(100))
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(OltpError::Data(format!(
                        "the MariaDB server did not stop within {} s and was killed",
                        STOP_TIMEOUT.as_secs()
                    )));
                }
            }
        }
    }

    /// Read what sysbench or another child printed, for an error.
    pub fn output_of(child: &mut Child) -> String {
        let mut s = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = e.read_to_string(&mut s);
        }
        s
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            log::warn!("{e}");
        }
        let _ = std::fs::remove_file(&self.socket);
        if !self.keep {
            if let Err(e) = std::fs::remove_dir_all(&self.root) {
                log::warn!("cannot remove {}: {e}", self.root.display());
            }
        }
    }
}
