//! A real Slurm for the tests that need one (`scripts/slurm.sh`), and running programs
//! beside it: one Slurm at a time, stopped when its guard is dropped.

use std::path::Path;
use std::process::{Command, Output};

use super::root;

pub fn run(program: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(root())
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"))
}

pub fn ok(program: &str, args: &[&str]) -> String {
    let output = run(program, args, &[]);
    assert!(
        output.status.success(),
        "{program} {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn allot(args: &[&str]) -> Output {
    run(env!("CARGO_BIN_EXE_allot"), args, &[("NO_COLOR", "1")])
}

/// Writes `text` as the budget repository `budgets/` in `work`: its path.
pub fn budgets_in(work: &Path, text: &str) -> String {
    let budgets = work.join("budgets");
    std::fs::create_dir_all(&budgets).unwrap();
    std::fs::write(budgets.join("allot.kdl"), text).unwrap();
    budgets.to_str().unwrap().to_string()
}

/// Brings the live Slurm to `budgets` as a user would: `allot plan slurm --live --out`
/// (the plan saved in `work`), then `allot apply slurm --auto-approve`.
pub fn apply_budgets(work: &Path, budgets: &str) {
    let saved = work.join("budgets.plan");
    let saved = saved.to_str().unwrap();
    let planned = allot(&["plan", "slurm", budgets, "--live", "--out", saved]);
    assert!(planned.status.success(), "{}", String::from_utf8_lossy(&planned.stderr));
    let applied = allot(&["apply", "slurm", saved, "--auto-approve"]);
    assert!(applied.status.success(), "{}", String::from_utf8_lossy(&applied.stderr));
}

/// Stops the Slurm it started when the test ends, passed or not.
pub struct Slurm;

impl Slurm {
    /// A fresh Slurm whose cluster is `cluster`; `None` when this machine cannot run one.
    pub fn start(cluster: &str) -> Option<Slurm> {
        Slurm::start_with(cluster, &[])
    }

    /// [`start`](Slurm::start) with more of `scripts/slurm.sh`'s settings.
    pub fn start_with(cluster: &str, settings: &[(&str, &str)]) -> Option<Slurm> {
        let mut env = vec![("ALLOT_SLURM_CLUSTER", cluster)];
        env.extend_from_slice(settings);
        let output = run("scripts/slurm.sh", &["start"], &env);
        match output.status.code() {
            Some(0) => Some(Slurm),
            Some(3) if std::env::var_os("ALLOT_REQUIRE_SLURM").is_none() => {
                eprintln!("skipped: no real Slurm here:\n{}", String::from_utf8_lossy(&output.stderr));
                None
            }
            _ => panic!("scripts/slurm.sh start failed:\n{}", String::from_utf8_lossy(&output.stderr)),
        }
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        let _ = run("scripts/slurm.sh", &["stop"], &[]);
    }
}

/// Submits `command` as a batch job of Unix user `user` with sbatch `options` (from /tmp,
/// its output dropped): its id.
pub fn sbatch(user: &str, options: &[&str], command: &str) -> String {
    let mut args = vec!["-u", user, "--", "sbatch", "--parsable", "--chdir=/tmp", "-o", "/dev/null"];
    args.extend_from_slice(options);
    args.extend(["--wrap", command]);
    ok("runuser", &args).trim().split(';').next().unwrap_or_default().to_string()
}
