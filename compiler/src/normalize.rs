//! Normalisation: a checked [`Budget`] tree to the [`Model`] ([`crate::ir`]) every target,
//! the diff and the verifier read, at one moment: each project's normalised share among its
//! siblings (with the grants in force then), its effective share of each cluster and its
//! guaranteed GPUs there, whole numbers that add up exactly.

use std::cell::RefCell;
use std::collections::BTreeMap;

use crate::ast::{self, Budget, DEFAULT_WINDOW, GrantAmount, Share};
use crate::ir::{
    self, Allocation, Bindings, CapacityMode, Cluster, Contract, Expectations, KubernetesBinding, Location,
    Model, Policy, Project, ShareSpec, SlurmBinding, User, WaitExpectation, WorkRule, YarnBinding,
};
use crate::source::{Sources, Span, Spanned};
use crate::units::{Instant, weight_thousandths};

fn location(sources: &Sources, span: Span) -> Location {
    match sources.location(span) {
        Some((file, at)) => Location { file: file.path.clone(), line: at.line, column: at.column },
        None => Location { file: String::new(), line: 0, column: 0 },
    }
}

/// A rule as written; work is preemptible unless the policy says otherwise.
fn rule(rule: Option<&Spanned<WorkRule>>) -> WorkRule {
    rule.map_or(WorkRule::Preemptible, |r| r.value)
}

/// A sibling set that grants take beyond its parent at the moment normalised: the model
/// scales it down to fit, and [`crate::calendar`] reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct Excess {
    /// The parent's path; empty for the top-level projects.
    pub parent: String,
    pub cluster: String,
    /// The siblings' fractions with the grants, summed (above 1).
    pub sum: f64,
    /// The grants in force that count.
    pub grants: Vec<Span>,
}

/// The sibling sets that the grants in force at `at` take beyond their parent, in a budget
/// that passed the checks: the division alone, none of the rest of the model.
pub fn excess(budget: &Budget, sources: &Sources, at: Instant) -> Vec<Excess> {
    divide(budget, sources, at, true).2
}

/// The projects of a budget that passed the checks, at `at`, with only their paths and
/// allocations: the division alone, none of the rest of the model.
pub fn allocations(budget: &Budget, sources: &Sources, at: Instant) -> Vec<Project> {
    divide(budget, sources, at, true).0
}

/// Divides each cluster down the tree at `at`: the projects (with only their allocations
/// and paths when `allocations_only`), each cluster's unallocated GPUs, the excess.
fn divide(
    budget: &Budget,
    sources: &Sources,
    at: Instant,
    allocations_only: bool,
) -> (Vec<Project>, BTreeMap<String, u64>, Vec<Excess>) {
    let cluster_names: Vec<&str> = budget.clusters.iter().map(|c| c.name.value.as_str()).collect();
    let all_contracts: Vec<String> = budget.contracts.iter().map(|c| c.name.value.clone()).collect();
    let overcommit = budget.policy.overcommit.as_ref().is_some_and(|f| f.value);
    // Each cluster's GPUs that no reserve holds, divided among the top-level projects
    // present on it (the checks keep the reserves below every cluster's GPUs).
    let reserved = reserved_gpus(budget);
    let roots: BTreeMap<&str, Parent> = budget
        .clusters
        .iter()
        .map(|c| {
            let gpus = c.gpus().saturating_sub(reserved);
            (c.name.value.as_str(), Parent { gpus, effective: 1.0, max_gpus: None })
        })
        .collect();
    let context =
        Context { sources, cluster_names: &cluster_names, at, allocations_only, excess: RefCell::default() };
    let (projects, unallocated) = context.siblings(&budget.projects, "", &roots, &all_contracts, overcommit);
    (projects, unallocated, context.excess.into_inner())
}

/// The GPUs the contracts' reserves hold on every cluster.
fn reserved_gpus(budget: &Budget) -> u64 {
    budget.contracts.iter().filter_map(|c| c.reserve.as_ref()).map(|r| r.value).sum()
}

/// Normalises a budget that passed the checks, with the grants in force at `at`.
pub fn normalize(budget: &Budget, sources: &Sources, at: Instant) -> Model {
    let overcommit = budget.policy.overcommit.as_ref().is_some_and(|f| f.value);
    let (projects, unallocated, _) = divide(budget, sources, at, false);
    let reserved = reserved_gpus(budget);

    Model {
        clusters: budget
            .clusters
            .iter()
            .map(|c| Cluster {
                name: c.name.value.clone(),
                gpus: c.gpus(),
                gpu_type: c.gpu_type.as_ref().map(|t| t.value.clone()).unwrap_or_default(),
                gpus_per_node: c.gpus_per_node(),
                unallocated_gpus: unallocated
                    .get(c.name.value.as_str())
                    .copied()
                    .unwrap_or(c.gpus().saturating_sub(reserved)),
                bindings: bindings(c),
                source: location(sources, c.name.span),
            })
            .collect(),
        policy: Policy {
            window_seconds: budget.policy.window.as_ref().map_or(DEFAULT_WINDOW, |w| w.value),
            max_grant_seconds: budget.policy.max_grant.as_ref().map(|m| m.value),
            unbudgeted: rule(budget.policy.unbudgeted.as_ref()),
            overflow: rule(budget.policy.overflow.as_ref()),
            overcommit,
        },
        contracts: budget
            .contracts
            .iter()
            .map(|c| Contract {
                name: c.name.value.clone(),
                min_runtime_seconds: c.min_runtime.as_ref().map_or(0, |m| m.value),
                max_runtime_seconds: c.max_runtime.as_ref().map(|m| m.value),
                resumable: c.resumable.as_ref().is_some_and(|r| r.value),
                max_gpus: c.max_gpus.as_ref().map(|m| m.value),
                reserve_gpus: c.reserve.as_ref().map(|r| r.value),
                default: c.is_default(),
                source: location(sources, c.name.span),
            })
            .collect(),
        projects,
        expectations: Expectations {
            delivered_per_budget: budget
                .expectations
                .delivered_per_budget
                .as_ref()
                .map(|p| p.value.fraction()),
            delivered_overall: budget.expectations.delivered_overall.as_ref().map(|p| p.value.fraction()),
            waits: budget
                .expectations
                .waits
                .iter()
                .map(|w| WaitExpectation {
                    contract: w.contract.as_ref().map(|c| c.value.clone()).unwrap_or_default(),
                    p50_seconds: w.p50.as_ref().map(|d| d.value),
                    p90_seconds: w.p90.as_ref().map(|d| d.value),
                    p99_seconds: w.p99.as_ref().map(|d| d.value),
                })
                .collect(),
        },
        timeline: Vec::new(),
    }
}

fn bindings(cluster: &ast::Cluster) -> Bindings {
    let text = |s: &Option<Spanned<String>>, default: &str| {
        s.as_ref().map_or_else(|| default.to_string(), |s| s.value.clone())
    };
    Bindings {
        slurm: cluster.slurm.as_ref().map(|b| SlurmBinding {
            cluster: text(&b.cluster, &cluster.name.value),
            partition: text(&b.partition, "gpu"),
            nodes: b.nodes.as_ref().map(|n| n.value.clone()),
        }),
        kubernetes: cluster.kubernetes.as_ref().map(|b| KubernetesBinding {
            schedulers: sorted(b.schedulers.iter().map(|s| s.value)),
            flavor: text(&b.flavor, &cluster.gpu_type.as_ref().map_or(String::new(), |t| t.value.clone())),
            resource: text(&b.resource, "nvidia.com/gpu"),
            node_label: b.node_label.as_ref().map(|l| l.value.clone()),
        }),
        yarn: cluster.yarn.as_ref().map(|b| YarnBinding {
            schedulers: sorted(b.schedulers.iter().map(|s| s.value)),
            resource: text(&b.resource, "yarn.io/gpu"),
            capacity_mode: b.capacity_mode.as_ref().map_or(CapacityMode::Percent, |m| m.value),
            node_memory_mb: b.node_memory_mb.as_ref().map(|m| m.value),
            node_vcores: b.node_vcores.as_ref().map(|v| v.value),
        }),
    }
}

/// `values` sorted, without duplicates.
fn sorted<T: Ord>(values: impl Iterator<Item = T>) -> Vec<T> {
    let mut values: Vec<T> = values.collect();
    values.sort();
    values.dedup();
    values
}

/// What a sibling set divides on one cluster.
#[derive(Clone, Copy)]
struct Parent {
    gpus: u64,
    effective: f64,
    max_gpus: Option<u64>,
}

struct Context<'a> {
    sources: &'a Sources,
    cluster_names: &'a [&'a str],
    at: Instant,
    /// Only the allocations and paths are wanted (the grants' check): the rest of each
    /// project is left empty.
    allocations_only: bool,
    excess: RefCell<Vec<Excess>>,
}

impl Context<'_> {
    /// Normalises one sibling set; also returns, per cluster, the GPUs left unallocated.
    fn siblings(
        &self,
        projects: &[ast::Project],
        parent_path: &str,
        parents: &BTreeMap<&str, Parent>,
        parent_contracts: &[String],
        overcommit: bool,
    ) -> (Vec<Project>, BTreeMap<String, u64>) {
        // Per cluster: the normalised share and the guaranteed GPUs of each sibling present.
        let mut allocations: Vec<BTreeMap<String, Allocation>> = vec![BTreeMap::new(); projects.len()];
        let mut unallocated = BTreeMap::new();
        for (&cluster, parent) in parents {
            let present: Vec<(usize, ShareSpec)> = projects
                .iter()
                .enumerate()
                .filter(|(_, p)| p.may_use(cluster))
                .map(|(i, p)| (i, spec(p.share_on(cluster).map(|s| s.value))))
                .collect();
            let shares: Vec<ShareSpec> = present.iter().map(|(_, s)| *s).collect();
            let granted: Vec<(f64, Vec<Span>)> =
                present.iter().map(|&(i, _)| self.granted(&projects[i], cluster, parent.gpus)).collect();
            let extra: Vec<f64> = granted.iter().map(|(g, _)| *g).collect();
            let (normalized, sum) = with_grants(&shares, &extra, overcommit);
            if let Some(sum) = sum {
                self.excess.borrow_mut().push(Excess {
                    parent: parent_path.to_string(),
                    cluster: cluster.to_string(),
                    sum,
                    grants: granted.iter().flat_map(|(_, spans)| spans.iter().copied()).collect(),
                });
            }
            let (gpus, rest) = apportion(parent.gpus, &normalized);
            unallocated.insert(cluster.to_string(), rest);
            for ((((i, share), fraction), gpus), granted_share) in
                present.into_iter().zip(normalized).zip(gpus).zip(extra)
            {
                let own_max = projects[i].max_gpus_on(cluster).map(|m| m.value);
                let max_gpus = match (own_max, parent.max_gpus) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                allocations[i].insert(
                    cluster.to_string(),
                    Allocation {
                        share,
                        normalized_share: fraction,
                        effective_share: parent.effective * fraction,
                        guaranteed_gpus: gpus,
                        unallocated_gpus: 0,
                        granted_share,
                        max_gpus,
                    },
                );
            }
        }
        let out = projects
            .iter()
            .zip(allocations)
            .map(|(project, mut clusters)| {
                let path = if parent_path.is_empty() {
                    project.name.value.clone()
                } else {
                    format!("{parent_path}/{}", project.name.value)
                };
                let parents: BTreeMap<&str, Parent> = self
                    .cluster_names
                    .iter()
                    .filter_map(|&c| {
                        let a = clusters.get(c)?;
                        Some((
                            c,
                            Parent {
                                gpus: a.guaranteed_gpus,
                                effective: a.effective_share,
                                max_gpus: a.max_gpus,
                            },
                        ))
                    })
                    .collect();
                let child_overcommit = project.overcommit.as_ref().is_some_and(|f| f.value);
                let contracts: Vec<String> = match &project.contracts {
                    Some(list) => list.iter().map(|c| c.value.clone()).collect(),
                    None => parent_contracts.to_vec(),
                };
                let (children, rest) =
                    self.siblings(&project.children, &path, &parents, &contracts, child_overcommit);
                if !project.children.is_empty() {
                    for (cluster, allocation) in &mut clusters {
                        allocation.unallocated_gpus = rest.get(cluster).copied().unwrap_or(0);
                    }
                }
                if self.allocations_only {
                    return Project {
                        name: String::new(),
                        path,
                        share: spec(None),
                        max_gpus: None,
                        users: Vec::new(),
                        groups: Vec::new(),
                        namespaces: Vec::new(),
                        owners: Vec::new(),
                        contracts: Vec::new(),
                        clusters,
                        grants: Vec::new(),
                        source: Location { file: String::new(), line: 0, column: 0 },
                        children,
                    };
                }
                Project {
                    name: project.name.value.clone(),
                    path,
                    share: spec(project.share.as_ref().map(|s| s.value)),
                    max_gpus: project.max_gpus.as_ref().map(|m| m.value),
                    users: project
                        .users
                        .iter()
                        .map(|m| User { name: m.name.value.clone(), default: m.default })
                        .collect(),
                    groups: project.groups.iter().map(|g| g.value.clone()).collect(),
                    namespaces: project.namespaces.iter().map(|n| n.value.clone()).collect(),
                    owners: project.owners.iter().map(|o| o.value.clone()).collect(),
                    contracts,
                    clusters,
                    grants: project.grants.iter().filter_map(|g| self.grant(g)).collect(),
                    source: location(self.sources, project.name.span),
                    children,
                }
            })
            .collect();
        (out, unallocated)
    }

    /// What the grants of `project` in force add to its fraction of the parent on
    /// `cluster`, whose GPUs are `parent_gpus`, and where they are written. GPUs are a
    /// fraction of the parent's; of a parent without GPUs, more than all of it.
    fn granted(&self, project: &ast::Project, cluster: &str, parent_gpus: u64) -> (f64, Vec<Span>) {
        let mut extra = 0.0;
        let mut spans = Vec::new();
        for grant in project.grants.iter().filter(|g| g.in_force(self.at) && g.on(cluster)) {
            let Some(amount) = &grant.amount else { continue };
            extra += match amount.value {
                GrantAmount::Share(p) => p.fraction(),
                GrantAmount::Gpus(n) if parent_gpus > 0 => n as f64 / parent_gpus as f64,
                GrantAmount::Gpus(_) => 2.0,
            };
            spans.push(grant.span);
        }
        (extra, spans)
    }

    fn grant(&self, grant: &ast::Grant) -> Option<ir::Grant> {
        Some(ir::Grant {
            amount: match grant.amount.as_ref()?.value {
                GrantAmount::Share(p) => ir::GrantAmount::SharePercent(p.0),
                GrantAmount::Gpus(n) => ir::GrantAmount::GuaranteedGpus(n),
            },
            from: grant.from.as_ref().map(|f| f.value),
            until: grant.until.as_ref()?.value,
            reason: grant.reason.as_ref().map(|r| r.value.clone()).unwrap_or_default(),
            cluster: grant.cluster.as_ref().map(|c| c.value.clone()),
            source: location(self.sources, grant.span),
        })
    }
}

/// The siblings' fractions of the parent with `extra` (each one's grants, as fractions of
/// the parent) added, and their sum when it is above the parent and overcommit is not
/// declared. Percentages gain their grants' points and keep the rest as written; among
/// weights, a granted sibling gains its points over its weighted fraction and the others
/// share what is left by their weights. What goes beyond the parent is scaled down to fit.
/// Without grants, the fractions of [`normalize_shares`].
pub fn with_grants(shares: &[ShareSpec], extra: &[f64], overcommit: bool) -> (Vec<f64>, Option<f64>) {
    let base = normalize_shares(shares, overcommit);
    if extra.iter().all(|&g| g == 0.0) {
        return (base, None);
    }
    let percentages = shares.iter().all(|s| matches!(s, ShareSpec::Percent(_)));
    let mut fractions: Vec<f64> = if percentages {
        shares
            .iter()
            .zip(extra)
            .map(|(s, g)| if let ShareSpec::Percent(p) = s { p / 100.0 + g } else { 0.0 })
            .collect()
    } else {
        let granted: f64 = base.iter().zip(extra).filter(|(_, g)| **g > 0.0).map(|(b, g)| b + g).sum();
        let rest: u128 = shares
            .iter()
            .zip(extra)
            .filter(|(_, g)| **g == 0.0)
            .map(|(s, _)| if let ShareSpec::Weight(w) = s { u128::from(weight_thousandths(*w)) } else { 0 })
            .sum();
        let room = (1.0 - granted).max(0.0);
        shares
            .iter()
            .zip(&base)
            .zip(extra)
            .map(|((s, b), g)| match s {
                _ if *g > 0.0 => b + g,
                ShareSpec::Weight(w) if rest > 0 => room * weight_thousandths(*w) as f64 / rest as f64,
                _ => 0.0,
            })
            .collect()
    };
    let sum: f64 = fractions.iter().sum();
    if sum > 1.0 + 1e-9 {
        fractions.iter_mut().for_each(|f| *f /= sum);
        return (fractions, (!overcommit).then_some(sum));
    }
    (fractions, None)
}

fn spec(share: Option<Share>) -> ShareSpec {
    match share {
        Some(Share::Percent(p)) => ShareSpec::Percent(p.0),
        Some(Share::Weight(w)) => ShareSpec::Weight(w),
        None => ShareSpec::Weight(1.0),
    }
}

/// Each sibling's fraction of the parent. Percentages are taken as written (scaled down
/// to fit when they overcommit and that is declared); weights are divided by their sum,
/// added up exactly in thousandths (the checks bound weights, so the sum of any number of
/// them fits; a sum that would not is treated as no weight at all rather than wrapped).
pub fn normalize_shares(shares: &[ShareSpec], overcommit: bool) -> Vec<f64> {
    let percent_sum: f64 = shares.iter().map(|s| if let ShareSpec::Percent(p) = s { *p } else { 0.0 }).sum();
    let weight_sum: Option<u128> = shares
        .iter()
        .filter_map(|s| {
            if let ShareSpec::Weight(w) = s { Some(u128::from(weight_thousandths(*w))) } else { None }
        })
        .try_fold(0u128, u128::checked_add);
    let scale = if overcommit && percent_sum > 100.0 { 100.0 / percent_sum } else { 1.0 };
    shares
        .iter()
        .map(|s| match (s, weight_sum) {
            (ShareSpec::Percent(p), _) => (p / 100.0 * scale).clamp(0.0, 1.0),
            (ShareSpec::Weight(w), Some(sum)) if sum > 0 => {
                (weight_thousandths(*w) as f64 / sum as f64).clamp(0.0, 1.0)
            }
            (ShareSpec::Weight(_), _) => 0.0,
        })
        .collect()
}

/// Splits `total` GPUs by `fractions` (summing to at most 1) and the unallocated rest, by
/// largest remainder: every part is its quota rounded down, and the GPUs left over go
/// one each to the largest remainders (ties to the earlier part, the rest last).
/// The parts and the rest sum to `total` exactly.
pub fn apportion(total: u64, fractions: &[f64]) -> (Vec<u64>, u64) {
    // Quotas rounded to a millionth of a GPU, so that float noise does not break ties.
    let exact = |q: f64| (q * 1e6).round() / 1e6;
    let mut quotas: Vec<f64> = fractions.iter().map(|f| exact(total as f64 * f.clamp(0.0, 1.0))).collect();
    let allocated: f64 = quotas.iter().sum();
    quotas.push(exact((total as f64 - allocated).max(0.0)));
    let mut parts: Vec<u64> = quotas.iter().map(|q| q.floor() as u64).collect();
    let mut given: u64 = parts.iter().sum();
    // Floating-point error could push the floors over the total; take back from the rest.
    while given > total {
        let Some(i) = (0..parts.len()).rev().find(|&i| parts[i] > 0) else { break };
        parts[i] -= 1;
        given -= 1;
    }
    let mut order: Vec<usize> = (0..quotas.len()).collect();
    order.sort_by(|&a, &b| {
        let ra = quotas[a] - quotas[a].floor();
        let rb = quotas[b] - quotas[b].floor();
        rb.total_cmp(&ra).then(a.cmp(&b))
    });
    for &i in order.iter().cycle().take((total - given) as usize) {
        parts[i] += 1;
    }
    let rest = parts.pop().unwrap_or(0);
    (parts, rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn largest_remainder_sums_exactly() {
        assert_eq!(apportion(10, &[1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0]), (vec![4, 3, 3], 0));
        assert_eq!(apportion(1024, &[0.35, 0.2]), (vec![358, 205], 461));
        assert_eq!(apportion(88, &[0.5, 0.5]), (vec![44, 44], 0));
        assert_eq!(apportion(0, &[0.5]), (vec![0], 0));
        assert_eq!(apportion(7, &[]), (vec![], 7));
    }

    #[test]
    fn shares_normalise() {
        let w = normalize_shares(&[ShareSpec::Weight(3.0), ShareSpec::Weight(1.0)], false);
        assert_eq!(w, vec![0.75, 0.25]);
        let p = normalize_shares(&[ShareSpec::Percent(60.0), ShareSpec::Percent(60.0)], true);
        assert_eq!(p, vec![0.5, 0.5]);
        let p = normalize_shares(&[ShareSpec::Percent(40.0)], false);
        assert_eq!(p, vec![0.4]);
        // The largest weights the checks allow, side by side, still divide the parent.
        let w = normalize_shares(&[ShareSpec::Weight(1e9), ShareSpec::Weight(1e9)], false);
        assert_eq!(w, vec![0.5, 0.5]);
        let w = normalize_shares(&[ShareSpec::Weight(1e9), ShareSpec::Weight(0.001)], false);
        assert!(w[1] > 0.0 && w[1] < 1e-11 && w[0] < 1.0, "{w:?}");
    }
}
