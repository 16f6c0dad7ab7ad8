//! A real Slurm for the tests that need one (`scripts/slurm.sh`), and running programs
//! beside it: one Slurm at a time, stopped when its guard is dropped.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::{Allot, root};

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
    let planned = Allot::new(["plan", "slurm", budgets, "--live", "--out", saved]).output();
    assert!(planned.status.success(), "{}", String::from_utf8_lossy(&planned.stderr));
    let applied = Allot::new(["apply", "slurm", saved, "--auto-approve"]).output();
    assert!(applied.status.success(), "{}", String::from_utf8_lossy(&applied.stderr));
}

/// Stops the Slurm it started when the test ends, passed or not. One test at a time holds
/// it: the suites share one binary, whose tests `cargo test` runs side by side (under
/// cargo-nextest each test is a process of its own, and `.config/nextest.toml` runs them one
/// at a time).
pub struct Slurm {
    _held: MutexGuard<'static, ()>,
}

/// The one real Slurm of this machine, held by the test that started it.
static HELD: Mutex<()> = Mutex::new(());

impl Slurm {
    /// A fresh Slurm whose cluster is `cluster`; `None` when this machine cannot run one.
    pub fn start(cluster: &str) -> Option<Slurm> {
        Slurm::start_with(cluster, &[])
    }

    /// [`start`](Slurm::start) with more of `scripts/slurm.sh`'s settings.
    pub fn start_with(cluster: &str, settings: &[(&str, &str)]) -> Option<Slurm> {
        // A test that failed while holding it poisons nothing: its Slurm was stopped.
        let held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
        let mut env = vec![("ALLOT_SLURM_CLUSTER", cluster)];
        env.extend_from_slice(settings);
        let output = run("scripts/slurm.sh", &["start"], &env);
        match output.status.code() {
            Some(0) => Some(Slurm { _held: held }),
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

/// allot's floors configuration of one Slurm cluster, from the files `allot build --target
/// slurm` wrote, split as `scripts/slurm.sh` takes it, on the script's one node: each floor's
/// `Nodes=` becomes `ALL`, and a bound partition other than the script's own `gpu` is added
/// as a partition over that node with the options allot gives it.
pub struct Floors {
    /// The `slurm.conf` settings (`ALLOT_SLURM_CONF_EXTRA`): every `KEY=VALUE` line of
    /// `CLUSTER-slurm.conf` but `PriorityType` (the script's) and the keys `scheduling` sets
    /// (but `SchedulerParameters`, whose options the script merges), then `scheduling`.
    pub conf: String,
    /// The floor partitions' `PartitionName=` lines (`ALLOT_SLURM_PARTITIONS`).
    pub partitions: String,
    /// The options allot adds to the bound partition's line, from its comment
    /// (`ALLOT_SLURM_PARTITION_OPTIONS`).
    pub options: String,
    files: tempfile::TempDir,
    /// `CLUSTER-job_submit.lua` and `CLUSTER-qos.sh`.
    lua: std::path::PathBuf,
    qos: std::path::PathBuf,
}

impl Floors {
    /// The configuration in `out` (`allot build`'s `--out`) of Slurm cluster `cluster`, with
    /// the time-scaled `scheduling` lines of a test.
    pub fn from_build(out: &Path, cluster: &str, scheduling: &str) -> Floors {
        let slurm = out.join("slurm");
        let read = |name: String| {
            std::fs::read_to_string(slurm.join(&name)).unwrap_or_else(|e| panic!("{name}: {e}"))
        };
        let emitted = read(format!("{cluster}-slurm.conf"));
        let key = |line: &str| line.split_once('=').map(|(k, _)| k.trim().to_string());
        let overridden: Vec<String> =
            scheduling.lines().filter_map(key).filter(|k| k != "SchedulerParameters").collect();
        let (mut conf, mut partitions, mut options) = (String::new(), String::new(), String::new());
        // The bound partition the next options comment is for.
        let mut bound = None;
        for line in emitted.lines().map(str::trim) {
            if let Some(comment) = line.strip_prefix('#') {
                let comment = comment.trim();
                if let Some((_, rest)) = comment.split_once("add to the PartitionName=") {
                    bound = rest.strip_suffix(" line").map(str::to_string);
                } else if comment.starts_with("PriorityTier=") {
                    // The options to add to the bound partition's own line.
                    match bound.take().as_deref() {
                        Some("gpu") => {
                            assert!(options.is_empty(), "gpu bound twice in {cluster}-slurm.conf");
                            options = comment.to_string();
                        }
                        Some(name) => partitions += &format!("PartitionName={name} Nodes=ALL {comment}\n"),
                        None => panic!("options for no partition in {cluster}-slurm.conf:\n{emitted}"),
                    }
                }
            } else if line.starts_with("PartitionName=") {
                let words: Vec<&str> = line.split(' ').collect();
                let on_node: Vec<&str> =
                    words.iter().map(|w| if w.starts_with("Nodes=") { "Nodes=ALL" } else { w }).collect();
                partitions += &format!("{}\n", on_node.join(" "));
            } else if let Some(k) = key(line)
                && k != "PriorityType"
                && !overridden.contains(&k)
            {
                conf += &format!("{line}\n");
            }
        }
        conf += scheduling;
        let files = tempfile::tempdir().unwrap();
        Floors {
            conf,
            partitions,
            options,
            lua: slurm.join(format!("{cluster}-job_submit.lua")),
            qos: slurm.join(format!("{cluster}-qos.sh")),
            files,
        }
    }

    /// The settings of `scripts/slurm.sh` that run this configuration (the files they name
    /// live as long as `self`).
    pub fn settings(&self) -> Vec<(&'static str, String)> {
        let write = |name: &str, text: &str| {
            let path = self.files.path().join(name);
            std::fs::write(&path, text).unwrap();
            path.to_str().unwrap().to_string()
        };
        vec![
            ("ALLOT_SLURM_CONF_EXTRA", write("slurm.conf", &self.conf)),
            ("ALLOT_SLURM_PARTITIONS", write("partitions.conf", &self.partitions)),
            ("ALLOT_SLURM_PARTITION_OPTIONS", self.options.clone()),
            ("ALLOT_SLURM_JOB_SUBMIT", self.lua.to_str().unwrap().to_string()),
            ("ALLOT_SLURM_QOS_HOOK", self.qos.to_str().unwrap().to_string()),
        ]
    }
}

/// `pairs` as [`Slurm::start_with`] takes them.
pub fn borrowed<'a>(pairs: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    pairs.iter().map(|(k, v)| (*k, v.as_str())).collect()
}
