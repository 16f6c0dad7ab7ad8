//! What the command-line tests share: the repository's root, running `allot` and `git`,
//! snapshot settings and the shared reference material. Budgets compiled in the test itself
//! come from allot-compiler's `test-support`.
#![allow(dead_code)] // each test file uses its own part

pub mod kube;
pub mod slurm;

use std::path::{Path, PathBuf};
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

/// Runs `allot` in the repository's root: (status, stdout, stderr).
pub fn allot(args: &[&str]) -> (i32, String, String) {
    allot_in(&root(), args)
}

/// Runs `allot` in `dir`, without colours and outside CI: (status, stdout, stderr).
pub fn allot_in(dir: &Path, args: &[&str]) -> (i32, String, String) {
    allot_within(dir, args, Duration::from_secs(600))
}

/// [`allot_in`], stopped (and failed) after `limit`: for inputs that must not hang.
pub fn allot_within(dir: &Path, args: &[&str], limit: Duration) -> (i32, String, String) {
    let output = assert_cmd::Command::cargo_bin("allot")
        .unwrap()
        .current_dir(dir)
        .args(args)
        .env("NO_COLOR", "1")
        .env_remove("CI")
        .timeout(limit)
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let status = output.status.code().unwrap_or(-1);
    assert_ne!(status, -1, "allot {args:?} was killed (a hang or a crash):\n{}", text(&output.stderr));
    (status, text(&output.stdout), text(&output.stderr))
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

    /// allot with the stand-ins first on PATH, without colours, outside CI, the budgets
    /// last.
    pub fn command(&self, args: &[&str]) -> std::process::Command {
        let path = std::env::join_paths(
            std::iter::once(self.path("bin"))
                .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
        )
        .unwrap();
        let mut command = std::process::Command::new(assert_cmd::cargo::cargo_bin("allot"));
        command
            .current_dir(self.dir.path())
            .args(args)
            .arg(self.path("budgets"))
            .env("PATH", path)
            .env("NO_COLOR", "1")
            .env("FAKE_SLURM_STATE", self.dir.path())
            .env_remove("CI");
        command
    }

    /// Runs [`command`](SlurmStandIns::command), nothing on standard input: (status,
    /// stdout, stderr).
    pub fn allot(&self, args: &[&str]) -> (i32, String, String) {
        let output = assert_cmd::Command::from_std(self.command(args)).write_stdin("").output().unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (output.status.code().unwrap_or(-1), text(&output.stdout), text(&output.stderr))
    }

    /// [`allot`](SlurmStandIns::allot) with `--format json`, which must succeed: its output.
    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let mut all = args.to_vec();
        all.extend(["--format", "json"]);
        let (code, stdout, stderr) = self.allot(&all);
        assert_eq!(code, 0, "allot {args:?}: {stdout}\n{stderr}");
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
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
