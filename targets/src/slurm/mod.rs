//! The Slurm target: for each Slurm cluster the model binds, `slurm/<cluster>.cfg` (the
//! association tree as a `sacctmgr load` flat file), `slurm/<cluster>-qos.sh` (the QOS of
//! the contracts and of the budgets' floors, idempotent, to run first),
//! `slurm/<cluster>-slurm.conf` (the priority, preemption and accounting lines, and the
//! floor partitions), `slurm/<cluster>-job_submit.lua` (which gives each job its budget's
//! floors: [`floors`]), and `slurm/FIDELITY.md`. Beside the emitter, Slurm's own
//! arithmetic: [`fair_tree`] computes what `sshare` shows for a tree and the raw usage that
//! [`usage`] reads.

pub mod fair_tree;
pub mod floors;
pub mod import;
pub mod plan;
pub mod qos;
pub mod tree;
pub mod usage;

use std::collections::BTreeMap;

use allot_compiler::ir::Model;
use allot_compiler::units::{DECAY_PERIOD, decay_half_life, format_duration};

use allot_compiler::names::{self, PREEMPTIBLE_QOS};

use self::tree::{Tree, desired, desired_with_loss, flat_file, flat_file_problem, slurm_clusters};
use crate::fidelity::{Note, RATIO_TOLERANCE, Report, Row, percent_error};
use crate::text::{Named, Rule, comment, refused, shell_word};
use crate::{Emitted, Target, Violation};

pub struct Slurm;

impl Target for Slurm {
    fn name(&self) -> &'static str {
        "slurm"
    }

    fn emit(&self, model: &Model) -> Emitted {
        let mut violations = binding_names(model);
        violations.extend(crate::text::model_names("", model));
        let mut emitted = Emitted { files: Vec::new(), violations };
        for cluster in slurm_clusters(model) {
            let tree = desired(model, &cluster);
            let path = format!("{cluster}.cfg");
            emitted.violations.extend(check_tree(&path, &tree));
            let comment = format!(
                "allot: associations of Slurm cluster {cluster}; load with `sacctmgr -i load file={cluster}.cfg` after {cluster}-qos.sh"
            );
            emitted.add(path, flat_file(&tree, &comment), Vec::new());
            let conf = format!("{cluster}-slurm.conf");
            let (floors, problems) = floors::floors(model, &cluster, &conf);
            emitted.violations.extend(problems);
            emitted.add(format!("{cluster}-qos.sh"), qos_script(model, &cluster, &floors), Vec::new());
            emitted.add(conf, slurm_conf(model, &cluster, &tree, &floors), Vec::new());
            emitted.add(
                format!("{cluster}-job_submit.lua"),
                floors::job_submit_lua(&cluster, &floors),
                Vec::new(),
            );
        }
        if model.contracts.iter().any(|c| c.name == PREEMPTIBLE_QOS) {
            emitted.violations.push(Violation::at(
                "",
                format!("contract `{PREEMPTIBLE_QOS}` takes the name of the QOS allot gives preemptible work; rename it"),
                model.contracts.iter().filter(|c| c.name == PREEMPTIBLE_QOS).map(|c| c.source.clone()).collect(),
            ));
        }
        emitted
    }

    fn fidelity(&self, model: &Model) -> Report {
        fidelity(model)
    }
}

/// The names of the Slurm bindings, by the rules of [`allot_compiler::names`]: the Slurm
/// cluster (which also names the files), the partition, the GPU type.
fn binding_names(model: &Model) -> Vec<Violation> {
    let mut out = Vec::new();
    for cluster in &model.clusters {
        let Some(slurm) = &cluster.bindings.slurm else { continue };
        let at = Some(&cluster.source);
        let names: [(Named, Rule); 3] = [
            (Named { what: "a Slurm cluster", value: &slurm.cluster, source: at }, names::bad_slurm_cluster),
            (
                Named { what: "a Slurm partition", value: &slurm.partition, source: at },
                names::bad_slurm_partition,
            ),
            (Named { what: "a GPU type", value: &cluster.gpu_type, source: at }, names::bad_gpu_type),
        ];
        out.extend(refused("", names));
    }
    out
}

/// Slurm keeps one association per account name and cluster, and lower-cases names; the
/// flat file and `sacctmgr` carry names without quotes, `#`, `\\` or line breaks.
pub fn check_tree(path: &str, tree: &Tree) -> Vec<Violation> {
    let mut violations = Vec::new();
    let mut values: Vec<(&str, &str, Option<&allot_compiler::ir::Location>)> =
        vec![("the Slurm cluster", tree.cluster.as_str(), None)];
    for a in &tree.accounts {
        values.push(("an account", &a.name, a.source.as_ref()));
        values.push(("a description", &a.description, a.source.as_ref()));
        values.extend(a.qos.iter().map(|q| ("a QOS", q.as_str(), a.source.as_ref())));
    }
    for u in &tree.users {
        values.push(("a user", &u.name, u.source.as_ref()));
    }
    for (what, value, source) in values {
        if let Some(why) = flat_file_problem(value) {
            violations.push(Violation::at(
                path,
                format!("`{}` cannot be {what} in Slurm's files: {why}", value.escape_debug()),
                source.into_iter().cloned().collect(),
            ));
        }
    }
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

/// The QOS of [`qos::wanted`] and the floors', created if missing and then set whole, so
/// the script can run any number of times. Each `sacctmgr` call costs slurmdbd a request
/// or three (a fraction of a second), so the script makes every missing QOS in one call
/// and sets the floors in one call per distinct cap: a few calls whatever the number of
/// budgets.
fn qos_script(model: &Model, cluster: &str, floors: &floors::Floors) -> String {
    let cluster = comment(cluster);
    let reserves = if floors.reserves.is_empty() { "" } else { " and per contract's reserve" };
    let mut out = format!(
        "#!/bin/sh\n# allot: QOS of Slurm cluster {cluster}, one per contract plus `{PREEMPTIBLE_QOS}`, and one per budget's floor{reserves}.\n# Run before loading {cluster}.cfg and before slurmctld reads {cluster}-slurm.conf's partitions; running it again changes nothing.\n# It makes every QOS first, then sets them: on a Slurm whose accounting does not know the gres/gpu TRES yet\n# (slurmctld registers it when it runs with AccountingStorageTRES=gres/gpu), the settings stop at the\n# first GPU limit; run it again once slurmctld has started.\nset -eu\n\n"
    );
    out.push_str("# Sets QOS $1 (a name, or names separated by commas) as the rest of the arguments say.\n");
    out.push_str("qos() {\n    name=\"$1\"\n    shift\n    sacctmgr -i modify qos where name=\"$name\" set \"$@\"\n}\n\n");
    // Slurm 22.05 reports a preemption loop when a QOS's Preempt list is set to what it is.
    out.push_str("preempt() {\n    [ \"$(sacctmgr -n -P show qos \"$1\" format=preempt)\" = \"$2\" ] || sacctmgr -i modify qos where name=\"$1\" set Preempt=\"$2\"\n}\n\n");
    let contracts = qos::wanted(model);
    let caps = floors.caps();
    out.push_str("# Every QOS that Slurm does not hold yet, made in one call.\nhave=\"$(sacctmgr -n -P show qos format=name)\"\nmissing=\nfor name in");
    for q in contracts.iter().chain(&caps) {
        out.push_str(&format!(" \\\n    {}", shell_word(&q.name)));
    }
    out.push_str("; do\n    printf '%s\\n' \"$have\" | grep -qxF -- \"$name\" || missing=\"$missing${missing:+,}$name\"\ndone\n");
    out.push_str("[ -z \"$missing\" ] || sacctmgr -i add qos \"$missing\"\n");
    for q in &contracts {
        let heading = if q.name == PREEMPTIBLE_QOS {
            "\n# Work beyond a budget and unbudgeted work: first to go.".to_string()
        } else {
            format!("\n# contract {}", comment(&q.name))
        };
        let name = shell_word(&q.name);
        out.push_str(&format!(
            "{heading}\nqos {name} {}\npreempt {name} {}\n",
            qos_settings(q),
            shell_word(&q.setting("preempt"))
        ));
    }
    if floors.reserves.is_empty() && !caps.is_empty() {
        out.push_str("\n# The budgets' floors, those of the same cap in one call: each caps its partition at the\n# budget's guaranteed GPUs. No PreemptExemptTime of their own: a partition QOS's would\n# override every contract's.\n");
    } else if !caps.is_empty() {
        out.push_str("\n# The budgets' floors and the contracts' reserves, those of the same cap in one call: each\n# caps its partition at the budget's guaranteed GPUs or the GPUs of the reserve. No\n# PreemptExemptTime of their own: a partition QOS's would override every contract's.\n");
    }
    let mut by_settings: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for q in &caps {
        by_settings.entry(qos_settings(q)).or_default().push(&q.name);
    }
    for (settings, names) in by_settings {
        out.push_str(&format!("qos {} {settings}\n", shell_word(&names.join(","))));
    }
    out
}

/// A QOS's settings but its preemption list, as `sacctmgr modify qos ... set` takes them.
fn qos_settings(q: &qos::Qos) -> String {
    ["Priority", "PreemptMode", "PreemptExemptTime", "MaxWall", "MaxTRESPerJob", "GrpTRES"]
        .iter()
        .map(|key| format!("{key}={}", q.setting(&key.to_lowercase())))
        .collect::<Vec<_>>()
        .join(" ")
}

fn slurm_conf(model: &Model, cluster: &str, tree: &Tree, floors: &floors::Floors) -> String {
    let half_life = decay_half_life(model.policy.window_seconds);
    let projects = model.projects_by_path();
    let mut out = format!(
        "# allot: slurm.conf lines for cluster {}; after {0}-qos.sh has created the floors' QOS, merge them into\n# slurm.conf, install {0}-job_submit.lua as job_submit.lua beside it, and restart slurmctld.\n",
        comment(cluster)
    );
    out.push_str("\n# Fair Tree (the default multifactor algorithm: PriorityFlags without NO_FAIR_TREE)\nPriorityType=priority/multifactor\n");
    out.push_str(&format!(
        "# A {} sliding window, as exponential decay of the same total weight\nPriorityDecayHalfLife={}\nPriorityCalcPeriod={}\n",
        format_duration(model.policy.window_seconds),
        slurm_duration(half_life),
        DECAY_PERIOD / 60
    ));
    out.push_str("PriorityWeightFairshare=100000\n# FIFO inside a budget\nPriorityWeightAge=1000\nPriorityMaxAge=7-0\n");
    out.push_str(concat!(
        "\n# Budgets that bite: each budget's guaranteed GPUs are a floor partition of a higher tier, whose\n",
        "# jobs are never preempted; every other job runs in the bound partition, where a job in a floor\n",
        "# with room preempts it (requeued) once its contract's PreemptExemptTime has passed, the most\n",
        "# recently started first\n",
        "PreemptType=preempt/partition_prio\nPreemptMode=REQUEUE\n",
        "# The main scheduler notices a protection ending at its periodic pass: every 10 s (merge into\n",
        "# your SchedulerParameters)\n",
        "SchedulerParameters=sched_interval=10,preempt_youngest_first\n",
        "# job_submit.lua gives a job its budget's partitions; each must accept it, and users may not\n",
        "# change them\n",
        "EnforcePartLimits=ALL\nJobSubmitPlugins=lua\n",
    ));
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
            "\n# {}\n",
            comment(&format!(
                "allot cluster {} ({} {} GPUs): add to the PartitionName={partition} line",
                c.name, c.gpus, c.gpu_type
            ))
        ));
        let mut line = "PriorityTier=1 PreemptMode=REQUEUE TRESBillingWeights=\"GRES/gpu=1.0\"".to_string();
        if restricted {
            line.push_str(&format!(" AllowAccounts={}", allowed.join(",")));
        }
        out.push_str(&format!("# {}\n", comment(&line)));
        let mine: Vec<&floors::Floor> = floors.floors.iter().filter(|f| f.over == partition).collect();
        if !mine.is_empty() {
            out.push_str(&format!("# The budgets' floors over partition {partition}\n"));
        }
        for floor in mine {
            out.push_str(&format!(
                "PartitionName={name} Nodes={} PriorityTier=2 PreemptMode=OFF QOS={name} AllowAccounts={} TRESBillingWeights=\"GRES/gpu=1.0\"\n",
                floor.nodes,
                floor.accounts.join(","),
                name = floor.name,
            ));
        }
        let reserves: Vec<&floors::Reserve> =
            floors.reserves.iter().filter(|r| r.over == partition).collect();
        if !reserves.is_empty() {
            out.push_str(&format!(
                "# The contracts' reserves over partition {partition}: the highest tier, the contract's QOS only\n"
            ));
        }
        for reserve in reserves {
            let accounts =
                if restricted { format!(" AllowAccounts={}", allowed.join(",")) } else { String::new() };
            out.push_str(&format!(
                "PartitionName={name} Nodes={} PriorityTier=3 PreemptMode=OFF QOS={name} AllowQos={}{accounts} TRESBillingWeights=\"GRES/gpu=1.0\"\n",
                reserve.nodes,
                reserve.contract,
                name = reserve.name,
            ));
        }
    }
    out
}

/// Fairshare integers keep the siblings' ratios unless they had to be scaled into
/// Slurm's range (1 to 2147483646); then the row says how far the worst ratio moved.
fn shares_row(model: &Model) -> Row {
    let native = "`Fairshare` integers in the siblings' ratios; Slurm normalises them among siblings, so percentages that leave part of a parent unallocated are scaled up (Fair Tree compares siblings only, so their order is the same)";
    let loss = slurm_clusters(model).iter().map(|c| desired_with_loss(model, c).1).fold(0.0, f64::max);
    if loss <= RATIO_TOLERANCE {
        Row::exact("shares", native).qualified("ratios")
    } else {
        Row::approximated("shares", format!("{native}; ratios too wide for Slurm's Fairshare range (1 to 2147483646) are scaled into it, the smallest kept at 1"))
            .qualified(format!("ratios, the worst off by {}", percent_error(loss)))
    }
}

fn fidelity(model: &Model) -> Report {
    let window = model.policy.window_seconds;
    let h = decay_half_life(window) as f64;
    let weight_at = |age: f64| 0.5f64.powf(age / h);
    let mut rows = vec![
        Row::approximated(
            format!("fair share over a {} window", format_duration(window)),
            format!(
                "Fair Tree over usage decayed with `PriorityDecayHalfLife={}` (window × ln 2): the same total weight as the window; usage {} old still weighs {:.2}, {} old {:.2}, and {:.0}% of the weight lies beyond the window",
                slurm_duration(decay_half_life(window)),
                format_duration(window),
                weight_at(window as f64),
                format_duration(2 * window),
                weight_at(2.0 * window as f64),
                // The share of all decayed weight older than the window is the weight at its edge.
                100.0 * weight_at(window as f64)
            ),
        ),
        shares_row(model),
        Row::exact(
            "guaranteed GPUs",
            "a floor partition per budget over the bound partition's nodes (`<partition>-floor-<account>`, `PriorityTier=2`, `PreemptMode=OFF`), capped at its guaranteed GPUs by its partition QOS (`GrpTRES=gres/gpu=N`); `job_submit.lua` gives each job its budget's floors, then the bound partition",
        ),
        Row::exact(
            "max GPUs of a project",
            "`GrpTRES=gres/gpu=N` on its account (running jobs, overflow included)",
        ),
        Row::exact("minimum runtime per contract", "`PreemptExemptTime` of the contract's QOS"),
        Row::exact(
            "resumable",
            "a preempted job is requeued (the bound partition's `PreemptMode=REQUEUE`): a resumable one resumes from its checkpoint, any other starts again; a job submitted with `--no-requeue` is given its nearest floor only, where nothing preempts it",
        ),
        Row::exact("maximum runtime, max GPUs per job", "`MaxWall`, `MaxTRESPerJob=gres/gpu=N` of the QOS"),
        Row::approximated(
            "work beyond a budget, unbudgeted work",
            format!("runs in the bound partition (`PriorityTier=1`), where a job in a floor with room preempts it once its contract's `PreemptExemptTime` has passed, the most recently started first (`preempt/partition_prio`, `preempt_youngest_first`); QOS `{PREEMPTIBLE_QOS}` runs there only. Slurm does not preempt by fair share: a budget's work beyond its guaranteed GPUs is preemptible even while it is within its share of idle budgets' GPUs, and a job that started beyond its floor stays preemptible after its budget falls back under it"),
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
    let qos = qos::wanted(model)
        .iter()
        .filter(|q| q.name != PREEMPTIBLE_QOS)
        .map(|q| vec![q.name.clone(), format!("`{}`", qos_settings(q))])
        .collect();
    rows.extend(crate::fidelity::reserves(model).map(|held| {
        // src/interfaces/preempt.c, _is_job_preempt_exempt_internal: every preemptor
        // waits for acct_policy_is_job_preempt_exempt (src/slurmctld/acct_policy.c).
        Row::approximated(
            "reserve per contract",
            format!("{held}: a partition per reserve over the bound partition's nodes (`<partition>-reserve-<contract>`, `PriorityTier=3`, `PreemptMode=OFF`, `AllowQos=<contract>`), capped at the reserve by its partition QOS (`GrpTRES=gres/gpu=N`); `job_submit.lua` gives the contract's jobs (its QOS, or their association's default QOS) the reserve first; the budgets' floors share the other GPUs. Other work runs on the reserved GPUs while they are idle, and a job of the contract preempts it, but only once that work's own contract's `PreemptExemptTime` has passed: Slurm applies a job's exempt time to every preemptor"),
        )
        .qualified("while the work on it is protected")
    }));
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

/// Why `name` (lower-cased as the dump is read) cannot name a cluster, account, user or QOS
/// in Slurm's files and commands: blanks, the separators of the flat file and of
/// `sacctmgr`'s lists (`:`, `,`, `=`, quotes), `#` and `\`.
pub fn slurm_name_problem(name: &str) -> Option<&'static str> {
    allot_compiler::names::unusable_account_member(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_as_sacctmgr_takes_them() {
        assert_eq!(slurm_duration(0), "00:00:00");
        assert_eq!(slurm_duration(5_400), "01:30:00");
        assert_eq!(slurm_duration(8 * 86_400 + 60), "8-00:01:00");
        assert_eq!(decay_half_life(604_800), 419_215); // 4 d 20 h 27 min
    }
}
