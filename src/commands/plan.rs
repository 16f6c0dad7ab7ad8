//! `allot plan slurm`: the changes that take a live Slurm association tree (a `sacctmgr
//! dump`, or `sacctmgr` itself) to the budgets, Terraform-style, with drift shown apart, a
//! guard on deletions, the ordered `sacctmgr` script on request, and the plan saved for
//! `allot apply slurm` ([`saved_plan`]).

use std::path::{Path, PathBuf};

use allot_targets::slurm::{check_tree, plan, tree};

use crate::args;
use crate::diagnostics::Format;
use crate::exit::{Error, Exit, Outcome};
use crate::input::dump;
use crate::output::{self, json, print, write_atomically};
use crate::systems::saved_plan::{self, Live};
use crate::systems::slurm;

#[derive(clap::Subcommand)]
pub enum Target {
    /// Compare with a live Slurm association tree (a `sacctmgr dump`).
    Slurm(SlurmArgs),
}

#[derive(clap::Args)]
pub struct SlurmArgs {
    #[command(flatten)]
    budgets: args::RepositoryAt,
    /// The live tree: a `sacctmgr dump CLUSTER file=...` output (`-`: standard input), or,
    /// given alone, read with `sacctmgr dump`, and the QOS with `sacctmgr show qos` (put
    /// PATH before it).
    #[arg(long, value_name = "DUMP", num_args = 0..=1, required = true)]
    live: Option<Option<PathBuf>>,
    /// The Slurm cluster to plan for, when the budgets bind several.
    #[arg(long)]
    cluster: Option<String>,
    /// Save the plan here, for `allot apply slurm`.
    #[arg(long, value_name = "PLAN")]
    out: Option<PathBuf>,
    /// Write the ordered `sacctmgr -i` commands to this file.
    #[arg(long)]
    script: Option<PathBuf>,
    /// Refuse plans that delete more associations than this.
    #[arg(long, default_value_t = 10)]
    max_deletes: usize,
    /// Allow more deletions than --max-deletes.
    #[arg(long)]
    allow_deletes: bool,
    /// Exit 2 when there are changes (0 none, 1 error).
    #[arg(long)]
    detailed_exitcode: bool,
    #[arg(long, value_enum, default_value = "human")]
    format: output::Format,
}

pub fn run(target: Target, format: Format) -> Outcome {
    let Target::Slurm(args) = target;
    let Some(model) = args.budgets.model(format)? else {
        return Ok(Exit::Problems);
    };
    let clusters = tree::slurm_clusters(&model);
    let (state, read_from) = match args.live.flatten() {
        Some(path) => (Live { dump: dump::read(&path)?, qos: None }, path.display().to_string()),
        None => {
            let cluster = slurm::live_cluster(&clusters, args.cluster.as_deref())?;
            (Live::read(&cluster, true)?, format!("sacctmgr, cluster {cluster}"))
        }
    };
    let live = state.tree().map_err(|e| Error::failed(format!("{read_from}: {e}; nothing was planned")))?;
    if args.cluster.as_ref().is_some_and(|c| *c != live.cluster) {
        return Err(Error::failed(format!(
            "the dump is of Slurm cluster `{}`, not of --cluster",
            live.cluster
        )));
    }
    if !clusters.contains(&live.cluster) {
        return Err(Error::failed(format!(
            "the dump is of Slurm cluster `{}`, which the budgets do not bind (they bind: {})",
            live.cluster,
            if clusters.is_empty() { "none".to_string() } else { clusters.join(", ") }
        )));
    }
    let desired = tree::desired(&model, &live.cluster);
    let problems = check_tree(&format!("{}.cfg", live.cluster), &desired);
    if !problems.is_empty() {
        for p in problems {
            let at: Vec<String> = p.locations.iter().map(ToString::to_string).collect();
            eprintln!("error: {} (at {})", p.message, at.join(", "));
        }
        return Ok(Exit::Problems);
    }
    let plan = plan::plan(&desired, &live);
    if !plan.refused.is_empty() {
        for r in &plan.refused {
            eprintln!("error: {}: {}", r.association, r.reason);
        }
        eprintln!("nothing was planned");
        return Ok(Exit::Problems);
    }
    print(&match args.format {
        output::Format::Human => plan::human(&plan),
        output::Format::Markdown => plan::markdown(&plan),
        output::Format::Json => json(&plan::json(&plan))?,
    })?;
    let deletes = plan.count(plan::Action::Destroy);
    if deletes > args.max_deletes && !args.allow_deletes {
        return Err(Error::failed(format!(
            "the plan deletes {deletes} associations, more than --max-deletes {}; review it and pass --allow-deletes to go ahead",
            args.max_deletes
        )));
    }
    if let Some(path) = &args.script {
        write_atomically(path, &plan::script(&plan, &desired, &live))?;
        set_executable(path)?;
        eprintln!("wrote {}", path.display());
    }
    if let Some(path) = &args.out {
        let application = plan::application(&plan, &desired, &live);
        let revision = saved_plan::revision(&args.budgets.repository.path);
        let max_deletes = (!args.allow_deletes).then_some(args.max_deletes);
        let saved =
            saved_plan::to_json(&state, &desired, &plan, &application, revision.as_deref(), max_deletes);
        // What `allot apply` will read back must give the same load and commands.
        saved_plan::from_json(&saved)
            .map_err(|e| Error::failed(format!("the plan cannot be saved as one that applies: {e}")))?;
        let text = json(&saved)?;
        if text.len() > saved_plan::MAX_PLAN_BYTES {
            return Err(Error::failed(format!(
                "the plan takes {} bytes, more than the {} allot applies; nothing was saved",
                text.len(),
                saved_plan::MAX_PLAN_BYTES
            )));
        }
        write_atomically(path, &text)?;
        eprintln!("wrote {}: apply it with `allot apply slurm {}`", path.display(), path.display());
    }
    Ok(Exit::changes(args.detailed_exitcode, !plan.is_empty()))
}

#[cfg(unix)]
fn set_executable(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
}

#[cfg(not(unix))]
fn set_executable(_: &Path) -> std::io::Result<()> {
    Ok(())
}
