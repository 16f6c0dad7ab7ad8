//! What the command-line tests share: the repository's root, running `allot` and `git`,
//! snapshot settings and the shared reference material. Budgets compiled in the test itself
//! come from allot-compiler's `test-support`.
#![allow(dead_code)] // each test file uses its own part

pub mod kube;
pub mod scripts;
pub mod slurm;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

/// The repository's root (the `allot` package).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Writes each (name, script) as an executable program in `dir/bin`, the stand-ins for a
/// scheduler's commands that a test puts first on PATH; returns that folder.
pub fn stand_ins(dir: &Path, programs: &[(&str, &str)]) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for (name, script) in programs {
        let program = bin.join(name);
        std::fs::write(&program, script).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
    bin
}

/// How every test runs allot: the binary this build made, in the repository's root, without
/// colours, outside CI, with nothing on standard input, stopped (and failed) after ten
/// minutes; each of those can be changed before it runs. [`allot`] and [`allot_in`] are
/// its shorthands for the plain cases.
pub struct Allot {
    command: std::process::Command,
    stdin: Vec<u8>,
    limit: Duration,
}

impl Allot {
    pub fn new<S: AsRef<OsStr>>(args: impl IntoIterator<Item = S>) -> Allot {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_allot"));
        command.current_dir(root()).args(args).env("NO_COLOR", "1").env_remove("CI");
        Allot { command, stdin: Vec::new(), limit: Duration::from_secs(600) }
    }

    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Allot {
        self.command.arg(arg);
        self
    }

    pub fn args<S: AsRef<OsStr>>(mut self, args: impl IntoIterator<Item = S>) -> Allot {
        self.command.args(args);
        self
    }

    /// Runs it in `dir` instead of the repository's root.
    pub fn dir(mut self, dir: impl AsRef<Path>) -> Allot {
        self.command.current_dir(dir);
        self
    }

    pub fn env(mut self, name: &str, value: impl AsRef<OsStr>) -> Allot {
        self.command.env(name, value);
        self
    }

    /// Puts `bin` (stand-ins for a scheduler's commands) first on PATH.
    pub fn path_first(self, bin: &Path) -> Allot {
        let path = std::env::join_paths(
            std::iter::once(bin.to_path_buf())
                .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
        )
        .unwrap();
        self.env("PATH", path)
    }

    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Allot {
        self.stdin = bytes.into();
        self
    }

    /// Stops it (and fails) after `limit`: for inputs that must not hang.
    pub fn within(mut self, limit: Duration) -> Allot {
        self.limit = limit;
        self
    }

    /// Its output, once it ended within its limit.
    pub fn output(self) -> Output {
        assert_cmd::Command::from_std(self.command)
            .write_stdin(self.stdin)
            .timeout(self.limit)
            .output()
            .unwrap()
    }

    /// (status, stdout, stderr); a run killed (a hang or a crash) fails the test.
    pub fn run(self) -> (i32, String, String) {
        let args: Vec<_> = self.command.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        let output = self.output();
        let status = output.status.code().unwrap_or(-1);
        assert_ne!(status, -1, "allot {args:?} was killed (a hang or a crash):\n{}", text(&output.stderr));
        (status, text(&output.stdout), text(&output.stderr))
    }

    /// Its standard output as JSON, when it succeeds (the test fails otherwise).
    pub fn json(self) -> serde_json::Value {
        let (status, stdout, stderr) = self.run();
        assert_eq!(status, 0, "allot failed:\n{stdout}\n{stderr}");
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}:\n{stdout}"))
    }

    /// The command itself, for a test that runs it as a process of its own (standard input
    /// closed, the other streams as the test sets them).
    pub fn command(mut self) -> std::process::Command {
        self.command.stdin(Stdio::null());
        self.command
    }
}

/// The folder of the allot binary this build made, to put on PATH where a script runs
/// `allot` (the Action's).
pub fn allot_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_allot")).parent().unwrap().to_path_buf()
}

/// Output bytes as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `allot` in the repository's root: (status, stdout, stderr).
pub fn allot(args: &[&str]) -> (i32, String, String) {
    Allot::new(args).run()
}

/// Runs `allot` in `dir`: (status, stdout, stderr).
pub fn allot_in(dir: &Path, args: &[&str]) -> (i32, String, String) {
    Allot::new(args).dir(dir).run()
}

/// Stand-ins for Slurm's client commands (scripts first on PATH, made by [`stand_ins`]) in a
/// folder of their own, the state files they read there (`$FAKE_SLURM_STATE`), and a budget
/// repository `budgets/`.
pub struct SlurmStandIns {
    pub dir: tempfile::TempDir,
}

impl SlurmStandIns {
    pub fn new(programs: &[(&str, &str)], state: &[(&str, &str)], budgets: &str) -> SlurmStandIns {
        let dir = tempfile::tempdir().unwrap();
        stand_ins(dir.path(), programs);
        for (name, text) in state {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        std::fs::create_dir(dir.path().join("budgets")).unwrap();
        std::fs::write(dir.path().join("budgets").join("allot.kdl"), budgets).unwrap();
        SlurmStandIns { dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// allot with the stand-ins first on PATH and their state, in their folder, the budgets
    /// after `args`.
    pub fn runner(&self, args: &[&str]) -> Allot {
        Allot::new(args)
            .dir(self.dir.path())
            .arg(self.path("budgets"))
            .path_first(&self.path("bin"))
            .env("FAKE_SLURM_STATE", self.dir.path())
    }

    /// [`runner`](SlurmStandIns::runner), run: (status, stdout, stderr).
    pub fn run(&self, args: &[&str]) -> (i32, String, String) {
        self.runner(args).run()
    }

    /// [`runner`](SlurmStandIns::runner) with `--format json`, which must succeed: its output.
    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        self.runner(args).arg("--format").arg("json").json()
    }
}

/// Runs `git` in `dir` as a made-up author, and asserts it succeeded.
pub fn git(dir: &Path, args: &[&str]) {
    let output = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=allot",
            "-c",
            "user.email=allot@example.invalid",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(output.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&output.stderr));
}

/// Snapshots named as the test names them, without the module's name in front (they live
/// in `tests/snapshots/`).
pub fn snapshots() -> insta::internals::SettingsBindDropGuard {
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(false);
    settings.bind_to_scope()
}

/// The ITP trace's folder in the shared reference material; `None`, said on stderr, when
/// it is absent and not required (see [`allot_compiler::test_support::shared`]).
pub fn itp_trace() -> Option<PathBuf> {
    allot_compiler::test_support::shared(&root(), "traces/itp-2021", "ITP trace")
}
