//! Budgets that bite on Slurm: each budget's guaranteed GPUs are a *floor* partition over the
//! nodes of the partition its cluster is bound to (`PriorityTier=2`, nothing in it is ever
//! preempted), capped by a partition QOS of the same name (`GrpTRES=gres/gpu=N`); the bound
//! partition itself takes every other job (`PriorityTier=1`, requeued when preempted), and
//! `PreemptType=preempt/partition_prio` lets a job in a floor with room preempt jobs there
//! once their contract's `PreemptExemptTime` has passed. `job_submit.lua` gives each job of
//! a bound partition the floors of its account and of the accounts above it, then the
//! bound partition. A contract's reserve is a partition of the highest tier
//! (`PriorityTier=3`, `PreemptMode=OFF`) over the same nodes, capped by its partition QOS and
//! open to the contract's QOS alone; `job_submit.lua` puts it first for the contract's jobs.
//! docs/slurm.md says how the pieces are loaded and in what order.

use allot_compiler::ir::{Location, Model, Project};
use allot_compiler::names::{self, PREEMPTIBLE_QOS};

use crate::Violation;
use crate::text::{Named, Rule, refused};

/// What [`floors`] finds for one Slurm cluster: its floors and reserves, and for each bound
/// partition the partitions each account's jobs are given.
#[derive(Debug, Default)]
pub struct Floors {
    pub floors: Vec<Floor>,
    pub reserves: Vec<Reserve>,
    pub routes: Vec<Route>,
}

impl Floors {
    /// The partitions' QOS, floors then reserves ([`super::qos::partition_cap`]).
    pub fn caps(&self) -> Vec<super::qos::Qos> {
        let floors = self.floors.iter().map(|f| super::qos::partition_cap(&f.name, f.gpus, &f.source));
        floors
            .chain(self.reserves.iter().map(|r| super::qos::partition_cap(&r.name, r.gpus, &r.source)))
            .collect()
    }
}

/// A budget's floor on one bound partition.
#[derive(Debug)]
pub struct Floor {
    /// The partition's name, and its QOS's: `<bound partition>-floor-<account>`.
    pub name: String,
    /// The bound partition it lies over, and its nodes (`Nodes=`).
    pub over: String,
    pub nodes: String,
    /// GPUs guaranteed to the project that none of its sub-projects is guaranteed.
    pub gpus: u64,
    /// The project's account and the accounts below it: `AllowAccounts=`.
    pub accounts: Vec<String>,
    pub source: Location,
}

/// A contract's reserve on one bound partition.
#[derive(Debug)]
pub struct Reserve {
    /// The partition's name, and its QOS's: `<bound partition>-reserve-<contract>`.
    pub name: String,
    /// The bound partition it lies over, and its nodes (`Nodes=`).
    pub over: String,
    pub nodes: String,
    /// The GPUs it holds: its QOS's `GrpTRES=gres/gpu=N`.
    pub gpus: u64,
    /// The contract, whose QOS alone it takes (`AllowQos=`).
    pub contract: String,
    pub source: Location,
}

/// The partitions a job of `account` submitted to the bound partition `over` is given:
/// its floors nearest first, then `over`.
#[derive(Debug)]
pub struct Route {
    pub over: String,
    pub account: String,
    pub partitions: Vec<String>,
}

/// The floors of the Slurm cluster `cluster`, and what is wrong with them: a floor name
/// Slurm cannot take, several allot clusters sharing the Slurm cluster without `nodes=`.
pub fn floors(model: &Model, cluster: &str, path: &str) -> (Floors, Vec<Violation>) {
    let bound: Vec<_> = model
        .clusters
        .iter()
        .filter_map(|c| c.bindings.slurm.as_ref().filter(|s| s.cluster == cluster).map(|s| (c, s)))
        .collect();
    let mut out = Floors::default();
    let mut violations = Vec::new();
    for &(c, binding) in &bound {
        // A partition Slurm cannot take is the bindings' violation (`binding_names`).
        if names::bad_slurm_partition(&binding.partition).is_some() {
            continue;
        }
        let nodes = match &binding.nodes {
            Some(nodes) => {
                let names: [(Named, Rule); 1] = [(
                    Named { what: "a Slurm node list", value: nodes, source: Some(&c.source) },
                    names::bad_slurm_nodes,
                )];
                let refusals = refused(path, names);
                if !refusals.is_empty() {
                    violations.extend(refusals);
                    continue;
                }
                nodes.clone()
            }
            None if bound.len() == 1 => "ALL".to_string(),
            None => {
                violations.push(Violation::at(
                    path,
                    format!(
                        "allot clusters {} share Slurm cluster {cluster}: each binding needs `nodes=` (the nodes of its partition) for the budgets' floor partitions",
                        bound.iter().map(|(c, _)| c.name.as_str()).collect::<Vec<_>>().join(", ")
                    ),
                    vec![c.source.clone()],
                ));
                continue;
            }
        };
        if bound.iter().filter(|(_, s)| s.partition == binding.partition).count() > 1 {
            violations.push(Violation::at(
                path,
                format!(
                    "several allot clusters are bound to partition {} of Slurm cluster {cluster}: each needs a partition of its own",
                    binding.partition
                ),
                vec![c.source.clone()],
            ));
            continue;
        }
        let mut walk = Walk { cluster: &c.name, over: &binding.partition, nodes: &nodes, out: &mut out };
        walk.projects(&model.projects, &[]);
        for contract in &model.contracts {
            let Some(gpus) = contract.reserve_gpus else { continue };
            out.reserves.push(Reserve {
                name: format!("{}-reserve-{}", binding.partition, contract.name),
                over: binding.partition.clone(),
                nodes: nodes.clone(),
                gpus,
                contract: contract.name.clone(),
                source: contract.source.clone(),
            });
        }
    }
    violations.extend(partition_names(model, &bound, &out, path));
    // A floor or reserve whose name, accounts or contract Slurm cannot take is not written:
    // its violation (or its account's, from the association tree's checks) stops the build,
    // and the files keep every line whole meanwhile.
    let writable = |floor: &Floor| {
        names::bad_slurm_partition(&floor.name).is_none()
            && floor.accounts.iter().all(|a| super::slurm_name_problem(a).is_none())
    };
    let dropped: Vec<String> = out.floors.iter().filter(|f| !writable(f)).map(|f| f.name.clone()).collect();
    out.floors.retain(writable);
    out.reserves.retain(|r| {
        names::bad_slurm_partition(&r.name).is_none() && super::slurm_name_problem(&r.contract).is_none()
    });
    out.routes.retain(|r| super::slurm_name_problem(&r.account).is_none());
    for route in &mut out.routes {
        route.partitions.retain(|p| !dropped.contains(p));
    }
    (out, violations)
}

/// What is wrong with the names of the partitions allot adds, floors and reserves: one
/// Slurm cannot take, or one that another partition or QOS allot writes already has (each
/// is also its own partition QOS's name). Two floors of one name are two accounts of one
/// name, which the association tree's checks report.
fn partition_names(
    model: &Model,
    bound: &[(&allot_compiler::ir::Cluster, &allot_compiler::ir::SlurmBinding)],
    found: &Floors,
    path: &str,
) -> Vec<Violation> {
    let added = found
        .floors
        .iter()
        .map(|f| ("floor", &f.name, &f.source))
        .chain(found.reserves.iter().map(|r| ("reserve", &r.name, &r.source)));
    let mut violations = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for (what, name, source) in added {
        let names: [(Named, Rule); 1] = [(
            Named {
                what: if what == "floor" { "a floor partition's name" } else { "a reserve partition's name" },
                value: name,
                source: Some(source),
            },
            names::bad_slurm_partition,
        )];
        violations.extend(refused(path, names));
        let taken = name == PREEMPTIBLE_QOS
            || model.contracts.iter().any(|c| c.name == *name)
            || bound.iter().any(|(_, b)| b.partition == *name)
            || (what == "reserve" && seen.contains(&name.as_str()));
        if taken {
            violations.push(Violation::at(
                path,
                format!(
                    "{what} {name} takes the name of a partition or QOS allot writes; rename the project, the contract or the partition"
                ),
                vec![source.clone()],
            ));
        }
        seen.push(name);
    }
    violations
}

/// The projects of one allot cluster, walked down the tree.
struct Walk<'a> {
    cluster: &'a str,
    over: &'a str,
    nodes: &'a str,
    out: &'a mut Floors,
}

impl Walk<'_> {
    /// Adds the floors and routes of `projects`, under the floors `above` (nearest first).
    fn projects(&mut self, projects: &[Project], above: &[String]) {
        for project in projects {
            let Some(allocation) = project.clusters.get(self.cluster) else { continue };
            let has_children = project.children.iter().any(|c| c.clusters.contains_key(self.cluster));
            let gpus = if has_children { allocation.unallocated_gpus } else { allocation.guaranteed_gpus };
            let mut mine = Vec::with_capacity(above.len() + 1);
            if gpus > 0 {
                let name = format!("{}-floor-{}", self.over, project.name);
                let mut accounts = vec![project.name.clone()];
                accounts.extend(accounts_below(&project.children, self.cluster));
                self.out.floors.push(Floor {
                    name: name.clone(),
                    over: self.over.to_string(),
                    nodes: self.nodes.to_string(),
                    gpus,
                    accounts,
                    source: project.source.clone(),
                });
                mine.push(name);
            }
            mine.extend(above.iter().cloned());
            let mut partitions = mine.clone();
            partitions.push(self.over.to_string());
            self.out.routes.push(Route {
                over: self.over.to_string(),
                account: project.name.clone(),
                partitions,
            });
            self.projects(&project.children, &mine);
        }
    }
}

/// The accounts of `projects` present on `cluster` and of every project below them.
fn accounts_below(projects: &[Project], cluster: &str) -> Vec<String> {
    let mut out = Vec::new();
    for project in projects.iter().filter(|p| p.clusters.contains_key(cluster)) {
        out.push(project.name.clone());
        out.extend(accounts_below(&project.children, cluster));
    }
    out
}

/// `text` as a Lua string literal: quoted, with `\`, `"` and every byte that is not
/// printable ASCII written as an escape, so that no name can end the literal or the line.
pub fn lua_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for byte in text.bytes() {
        match byte {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            0x20..=0x7e => out.push(byte as char),
            _ => out.push_str(&format!("\\{byte:03}")),
        }
    }
    out.push('"');
    out
}

/// `local NAME = { [over] = { [key] = "value", ... }, ... }`: Lua tables of strings by bound
/// partition, from (over, key, value) entries in the order of their bound partitions.
fn lua_tables(name: &str, entries: &[(&str, &str, String)]) -> String {
    let mut out = format!("local {name} = {{\n");
    let mut overs: Vec<&str> = entries.iter().map(|&(over, _, _)| over).collect();
    overs.dedup();
    for over in overs {
        out.push_str(&format!("    [{}] = {{\n", lua_string(over)));
        for (_, key, value) in entries.iter().filter(|(o, _, _)| *o == over) {
            out.push_str(&format!("        [{}] = {},\n", lua_string(key), lua_string(value)));
        }
        out.push_str("    },\n");
    }
    out.push_str("}\n\n");
    out
}

/// `job_submit.lua` for a Slurm cluster: on submission, a job sent to a bound partition
/// (`-p <partition>`, or none when the bound partition is the cluster's default) is given
/// its account's floors then that partition, after its contract's reserve when the contract
/// holds one (its QOS, or its association's default QOS); a job of QOS `preemptible` keeps
/// the bound partition, where it may be preempted, and one that may not be requeued
/// (`--no-requeue`) its reserve and nearest floor only, where it never is. On modification, only root may
/// change a job's partitions or QOS (Slurm 22.05 shows no message of the script's there:
/// the user reads "Access/permission denied").
pub fn job_submit_lua(cluster: &str, floors: &Floors) -> String {
    let mut out = format!(
        "-- allot: job_submit.lua of Slurm cluster {}; install it as job_submit.lua beside slurm.conf\n\
         -- (JobSubmitPlugins=lua). Written by allot: edit the budgets, not this file.\n\n",
        crate::text::comment(cluster)
    );
    out.push_str(
        "-- For each bound partition, the partitions of each account's jobs: floors, then the partition.\n",
    );
    let routes: Vec<_> =
        floors.routes.iter().map(|r| (r.over.as_str(), r.account.as_str(), r.partitions.join(","))).collect();
    out.push_str(&lua_tables("routes", &routes));
    out.push_str("-- For each bound partition, the reserve of each contract (QOS) that holds one.\n");
    let reserves: Vec<_> =
        floors.reserves.iter().map(|r| (r.over.as_str(), r.contract.as_str(), r.name.clone())).collect();
    out.push_str(&lua_tables("reserves", &reserves));
    out.push_str(&format!(
        r#"-- The partition a job asks for: its own, else the cluster's default.
local function requested(job_desc, part_list)
    if job_desc.partition ~= nil then
        return job_desc.partition
    end
    for name, part in pairs(part_list) do
        if part.flag_default == 1 then
            return name
        end
    end
    return nil
end

function slurm_job_submit(job_desc, part_list, submit_uid)
    local partition = requested(job_desc, part_list)
    local bound = partition and routes[partition]
    if bound == nil then
        return slurm.SUCCESS
    end
    local account = job_desc.account or job_desc.default_account
    local partitions = account and bound[string.lower(account)]
    if partitions == nil then
        return slurm.SUCCESS
    end
    if job_desc.qos == {preemptible} then
        return slurm.SUCCESS
    end
    local qos = job_desc.qos or job_desc.default_qos
    local reserve = qos and reserves[partition] and reserves[partition][qos]
    if job_desc.requeue == 0 then
        -- A job that may not be requeued would be killed if preempted: its reserve and
        -- nearest floor only.
        local floor = string.match(partitions, "^([^,]+),")
        if reserve ~= nil and floor ~= nil then
            job_desc.partition = reserve .. "," .. floor
        elseif reserve ~= nil or floor ~= nil then
            job_desc.partition = reserve or floor
        end
        return slurm.SUCCESS
    end
    if reserve ~= nil then
        partitions = reserve .. "," .. partitions
    end
    job_desc.partition = partitions
    return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
    -- A job's partitions and QOS follow its budget: only root may change them.
    if modify_uid ~= 0 and (job_desc.partition ~= nil or job_desc.qos ~= nil) then
        return slurm.ESLURM_ACCESS_DENIED
    end
    return slurm.SUCCESS
end

return slurm.SUCCESS
"#,
        preemptible = lua_string(PREEMPTIBLE_QOS)
    ));
    out
}
