//! The Slurm target: for each Slurm cluster the model binds, `slurm/<cluster>.cfg` (the
//! association tree as a `sacctmgr load` flat file), `slurm/<cluster>-qos.sh` (the QOS of
//! the contracts, idempotent, to run first), `slurm/<cluster>-slurm.conf` (the priority,
//! preemption and accounting lines), and `slurm/FIDELITY.md`. Beside the emitter, Slurm's
//! own arithmetic: [`fair_tree`] computes what `sshare` shows for a tree and the raw usage
//! that [`usage`] reads.

pub mod fair_tree;
pub mod import;
pub mod plan;
pub mod tree;
pub mod usage;

use std::collections::BTreeMap;

use allot_compiler::ir::{Contract, Model};
use allot_compiler::units::format_duration;

use self::tree::{PREEMPTIBLE_QOS, Tree, desired, flat_file, slurm_clusters};
use crate::fidelity::{Note, Report, Row};
use crate::{OutputFile, Target, Violation};

pub struct Slurm;

impl Target for Slurm {
    fn name(&self) -> &'static str {
        "slurm"
    }

    fn emit(&self, model: &Model) -> Vec<OutputFile> {
        let mut files = Vec::new();
        for cluster in slurm_clusters(model) {
            let tree = desired(model, &cluster);
            let comment = format!(
                "allot: associations of Slurm cluster {cluster}; load with `sacctmgr -i load file={cluster}.cfg` after {cluster}-qos.sh"
            );
            files.push(OutputFile { path: format!("{cluster}.cfg"), contents: flat_file(&tree, &comment) });
            files.push(OutputFile {
                path: format!("{cluster}-qos.sh"),
                contents: qos_script(model, &cluster),
            });
            files.push(OutputFile {
                path: format!("{cluster}-slurm.conf"),
                contents: slurm_conf(model, &cluster, &tree),
            });
        }
        files
    }

    fn validate(&self, model: &Model, files: &[OutputFile]) -> Vec<Violation> {
        let mut violations = Vec::new();
        for cluster in slurm_clusters(model) {
            let path = format!("{cluster}.cfg");
            violations.extend(check_tree(&path, &desired(model, &cluster)));
        }
        if model.contracts.iter().any(|c| c.name == PREEMPTIBLE_QOS) {
            violations.push(Violation::at(
                "",
                format!("contract `{PREEMPTIBLE_QOS}` takes the name of the QOS allot gives preemptible work; rename it"),
                model.contracts.iter().filter(|c| c.name == PREEMPTIBLE_QOS).map(|c| c.source.clone()).collect(),
            ));
        }
        // The flat files must read back; a tree already refused above (two accounts of one
        // name) would only be refused again, by the dump's parser.
        let refused = !violations.is_empty();
        for file in files.iter().filter(|f| !refused && f.path.ends_with(".cfg")) {
            if let Err(error) = tree::parse(&file.contents) {
                violations
                    .push(Violation::new(&file.path, format!("the flat file does not read back: {error}")));
            }
        }
        violations
    }

    fn fidelity(&self, model: &Model) -> Report {
        fidelity(model)
    }
}

/// Slurm keeps one association per account name and cluster, and lower-cases names.
pub fn check_tree(path: &str, tree: &Tree) -> Vec<Violation> {
    let mut violations = Vec::new();
    let mut seen: BTreeMap<&str, &tree::Account> = BTreeMap::new();
    for account in &tree.accounts {
        if let Some(first) = seen.get(account.name.as_str()) {
            violations.push(Violation::at(
                path,
                format!(
                    "Slurm account names are unique in a cluster: `{}` and `{}` both become account `{}`; rename one",
                    first.path, account.path, account.name
                ),
                first.source.iter().chain(&account.source).cloned().collect(),
            ));
        } else {
            seen.insert(&account.name, account);
        }
    }
    for user in &tree.users {
        if user.name.chars().any(|c| c.is_uppercase()) {
            violations.push(Violation::at(
                path,
                format!(
                    "Slurm lower-cases user names: `{}` would become `{}`",
                    user.name,
                    user.name.to_lowercase()
                ),
                user.source.iter().cloned().collect(),
            ));
        }
    }
    violations
}

/// `[D-]HH:MM:SS`, as sacctmgr takes durations.
pub fn slurm_duration(seconds: u64) -> String {
    let (days, rest) = (seconds / 86_400, seconds % 86_400);
    let clock = format!("{:02}:{:02}:{:02}", rest / 3600, rest % 3600 / 60, rest % 60);
    if days > 0 { format!("{days}-{clock}") } else { clock }
}

/// The contracts' QOS and the preemptible QOS, created if missing and then set whole, so
/// the script can run any number of times.
fn qos_script(model: &Model, cluster: &str) -> String {
    let mut out = format!(
        "#!/bin/sh\n# allot: QOS of Slurm cluster {cluster}, one per contract plus `{PREEMPTIBLE_QOS}`.\n# Run before loading {cluster}.cfg; running it again changes nothing.\nset -eu\n\n"
    );
    out.push_str("qos() {\n    name=\"$1\"\n    shift\n    sacctmgr -n -P show qos \"$name\" format=name | grep -qx \"$name\" || sacctmgr -i add qos \"$name\"\n    sacctmgr -i modify qos where name=\"$name\" set \"$@\"\n}\n\n");
    // Slurm 22.05 reports a preemption loop when a QOS's Preempt list is set to what it is.
    out.push_str("preempt() {\n    [ \"$(sacctmgr -n -P show qos \"$1\" format=preempt)\" = \"$2\" ] || sacctmgr -i modify qos where name=\"$1\" set Preempt=\"$2\"\n}\n\n");
    out.push_str(&format!(
        "# Work beyond a budget and unbudgeted work: first to go.\nqos {PREEMPTIBLE_QOS} Priority=0 PreemptMode=requeue PreemptExemptTime=-1 MaxWall=-1 MaxTRESPerJob=gres/gpu=-1\npreempt {PREEMPTIBLE_QOS} ''\n"
    ));
    for contract in &model.contracts {
        out.push_str(&format!(
            "\n# contract {}\nqos {} {}\npreempt {} {PREEMPTIBLE_QOS}\n",
            contract.name,
            contract.name,
            qos_settings(contract),
            contract.name
        ));
    }
    out
}

fn qos_settings(c: &Contract) -> String {
    let max_wall = c.max_runtime_seconds.map_or("-1".to_string(), |s| s.div_ceil(60).to_string());
    let max_gpus = c.max_gpus.map_or("-1".to_string(), |g| g.to_string());
    let mode = if c.resumable { "requeue" } else { "cancel" };
    format!(
        "Priority=0 PreemptMode={mode} PreemptExemptTime={} MaxWall={max_wall} MaxTRESPerJob=gres/gpu={max_gpus}",
        slurm_duration(c.min_runtime_seconds)
    )
}

/// The decay half-life that gives past usage the weight a sliding window gives it in
/// total: `window × ln 2`.
pub fn half_life(window_seconds: u64) -> u64 {
    (window_seconds as f64 * std::f64::consts::LN_2).round() as u64
}

fn slurm_conf(model: &Model, cluster: &str, tree: &Tree) -> String {
    let half_life = half_life(model.policy.window_seconds);
    let projects = model.projects_by_path();
    let mut out = format!(
        "# allot: slurm.conf lines for cluster {cluster}; merge them into slurm.conf, then `scontrol reconfigure`.\n"
    );
    out.push_str("\n# Fair Tree (the default multifactor algorithm: PriorityFlags without NO_FAIR_TREE)\nPriorityType=priority/multifactor\n");
    out.push_str(&format!(
        "# A {} sliding window, as exponential decay of the same total weight\nPriorityDecayHalfLife={}\nPriorityCalcPeriod=5\n",
        format_duration(model.policy.window_seconds),
        slurm_duration(half_life)
    ));
    out.push_str("PriorityWeightFairshare=100000\n# FIFO inside a budget\nPriorityWeightAge=1000\nPriorityMaxAge=7-0\n");
    out.push_str("\n# Contracts are QOS; preemption follows their Preempt lists\nPreemptType=preempt/qos\nPreemptMode=REQUEUE\n");
    out.push_str("\n# Associations, limits and QOS enforced at submission\nAccountingStorageEnforce=associations,limits,qos,safe\nAccountingStorageTRES=gres/gpu\n");
    for c in model.clusters.iter().filter(|c| c.bindings.slurm.as_ref().is_some_and(|s| s.cluster == cluster))
    {
        let partition = c.bindings.slurm.as_ref().map_or("gpu", |s| s.partition.as_str());
        // An account that is no project's may use every cluster.
        let allowed: Vec<&str> = tree
            .accounts
            .iter()
            .filter(|a| projects.get(&a.path).is_none_or(|(p, _)| p.clusters.contains_key(&c.name)))
            .map(|a| a.name.as_str())
            .collect();
        let restricted = allowed.len() < tree.accounts.len();
        out.push_str(&format!(
            "\n# allot cluster {} ({} {} GPUs): add to the PartitionName={partition} line\n# TRESBillingWeights=\"GRES/gpu=1.0\"",
            c.name, c.gpus, c.gpu_type
        ));
        if restricted {
            out.push_str(&format!(" AllowAccounts={}", allowed.join(",")));
        }
        out.push('\n');
    }
    out
}

fn fidelity(model: &Model) -> Report {
    let window = model.policy.window_seconds;
    let h = half_life(window) as f64;
    let weight_at = |age: f64| 0.5f64.powf(age / h);
    let rows = vec![
        Row::approximated(
            format!("fair share over a {} window", format_duration(window)),
            format!(
                "Fair Tree over usage decayed with `PriorityDecayHalfLife={}` (window × ln 2): the same total weight as the window; usage {} old still weighs {:.2}, {} old {:.2}, and {:.0}% of the weight lies beyond the window",
                slurm_duration(half_life(window)),
                format_duration(window),
                weight_at(window as f64),
                format_duration(2 * window),
                weight_at(2.0 * window as f64),
                // The share of all decayed weight older than the window is the weight at its edge.
                100.0 * weight_at(window as f64)
            ),
        ),
        Row::exact(
            "shares",
            "`Fairshare` integers in the siblings' ratios; Slurm normalises them among siblings, so percentages that leave part of a parent unallocated are scaled up (Fair Tree compares siblings only, so their order is the same)",
        )
        .qualified("ratios"),
        Row::approximated(
            "guaranteed GPUs",
            "no floor: Fair Tree orders jobs by usage against share; GPUs are not reserved",
        ),
        Row::exact(
            "max GPUs of a project",
            "`GrpTRES=gres/gpu=N` on its account (running jobs, overflow included)",
        ),
        Row::exact("minimum runtime per contract", "`PreemptExemptTime` of the contract's QOS"),
        Row::exact("resumable", "`PreemptMode=requeue` (not resumable: `cancel`)"),
        Row::exact("maximum runtime, max GPUs per job", "`MaxWall`, `MaxTRESPerJob=gres/gpu=N` of the QOS"),
        Row::approximated(
            "work beyond a budget, unbudgeted work",
            format!("QOS `{PREEMPTIBLE_QOS}`, which every contract's QOS may preempt; Slurm does not preempt by fair share, so only work submitted under `{PREEMPTIBLE_QOS}` is preemptible"),
        ),
        Row::approximated(
            "clusters of one Slurm cluster",
            "one association tree per Slurm cluster: shares come from the first allot cluster bound to it where a project appears; restrictions become `AllowAccounts` on partitions",
        )
        .qualified("when shares differ per partition"),
        Row::exact(
            "members",
            "users: user associations with a default account; groups and namespaces do not apply",
        )
        .qualified("for users"),
    ];
    let qos =
        model.contracts.iter().map(|c| vec![c.name.clone(), format!("`{}`", qos_settings(c))]).collect();
    Report {
        scheduler: "Slurm",
        short_name: "Slurm",
        rows,
        notes: vec![
            Note::Heading("Contracts as QOS".into()),
            Note::table(&["contract", "QOS settings"], qos),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_as_sacctmgr_takes_them() {
        assert_eq!(slurm_duration(0), "00:00:00");
        assert_eq!(slurm_duration(5_400), "01:30:00");
        assert_eq!(slurm_duration(8 * 86_400 + 60), "8-00:01:00");
        assert_eq!(half_life(604_800), 419_215); // 4 d 20 h 27 min
    }
}
