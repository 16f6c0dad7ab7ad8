//! Slurm's floors as the live views count them: the floor partitions allot writes for a
//! Slurm cluster, those Slurm has, each with its allot cluster and budget; and the
//! contracts' reserve partitions, each with its contract.

use allot_compiler::ir::{Model, Project};
use allot_live::standing::{FloorPartition, Holder};

use crate::exit::Error;
use crate::systems::slurm;

/// The floors allot writes for Slurm cluster `cluster` (`allot build --target slurm`) that
/// Slurm has (`scontrol show partition`, read only when the budgets have floors), as the live
/// views count them: each with the allot cluster bound to the partition it lies over, and the
/// path of its budget. Without the floor partitions, Slurm runs no floors, whatever the
/// budgets say.
pub fn floors(model: &Model, cluster: &str) -> Result<Vec<FloorPartition>, Error> {
    let (found, _) = allot_targets::slurm::floors::floors(model, cluster, "");
    if found.floors.is_empty() && found.reserves.is_empty() {
        return Ok(Vec::new());
    }
    let live = slurm::partitions(cluster)?;
    let bound = |over: &str| {
        let on = |s: &allot_compiler::ir::SlurmBinding| s.cluster == cluster && s.partition == over;
        model.clusters.iter().find(|c| c.bindings.slurm.as_ref().is_some_and(on))
    };
    let floors = found.floors.into_iter().filter(|f| live.contains(&f.name)).filter_map(|f| {
        let bound = bound(&f.over)?;
        let budget = path_of(&model.projects, &bound.name, f.accounts.first()?)?;
        Some(FloorPartition {
            cluster: bound.name.clone(),
            holder: Holder::Budget(budget),
            partition: f.name,
            over: f.over,
            gpus: f.gpus,
        })
    });
    let reserves = found.reserves.into_iter().filter(|r| live.contains(&r.name)).filter_map(|r| {
        Some(FloorPartition {
            cluster: bound(&r.over)?.name.clone(),
            holder: Holder::Contract(r.contract),
            partition: r.name,
            over: r.over,
            gpus: r.gpus,
        })
    });
    Ok(floors.chain(reserves).collect())
}

/// The path of the project named `name` on allot cluster `cluster` (an account's project).
fn path_of(projects: &[Project], cluster: &str, name: &str) -> Option<String> {
    projects
        .iter()
        .filter(|p| p.clusters.contains_key(cluster))
        .find_map(|p| if p.name == name { Some(p.path.clone()) } else { path_of(&p.children, cluster, name) })
}
