//! `allot plan slurm` and `allot import slurm`: the command-line side of comparing the
//! budgets with a live Slurm association tree, and of adopting an existing tree.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use allot_compiler::ir::Model;
use allot_targets::slurm::{check_tree, import, plan, tree};
use clap::ValueEnum;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PlanFormat {
    Human,
    Markdown,
    Json,
}

pub struct PlanOptions {
    pub live: PathBuf,
    pub script: Option<PathBuf>,
    pub max_deletes: usize,
    pub allow_deletes: bool,
    pub detailed_exitcode: bool,
    pub format: PlanFormat,
}

/// Reads a dump from a file, or from standard input for `-`.
fn read_dump(path: &Path) -> std::io::Result<String> {
    if path == Path::new("-") {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text)?;
        Ok(text)
    } else {
        std::fs::read_to_string(path)
    }
}

fn fail(message: String) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(1)
}

pub fn plan(model: &Model, options: &PlanOptions) -> std::io::Result<ExitCode> {
    let text = match read_dump(&options.live) {
        Ok(text) => text,
        Err(e) => return Ok(fail(format!("{}: {e}", options.live.display()))),
    };
    let live = match tree::parse(&text) {
        Ok(live) => live,
        Err(e) => {
            return Ok(fail(format!(
                "{}: not a sacctmgr dump: {e}; nothing was planned",
                options.live.display()
            )));
        }
    };
    let clusters = tree::slurm_clusters(model);
    if !clusters.contains(&live.cluster) {
        return Ok(fail(format!(
            "the dump is of Slurm cluster `{}`, which the budgets do not bind (they bind: {})",
            live.cluster,
            if clusters.is_empty() { "none".to_string() } else { clusters.join(", ") }
        )));
    }
    let desired = tree::desired(model, &live.cluster);
    let problems = check_tree(&format!("{}.cfg", live.cluster), &desired);
    if !problems.is_empty() {
        for p in problems {
            let at: Vec<String> =
                p.locations.iter().map(|l| format!("{}:{}:{}", l.file, l.line, l.column)).collect();
            eprintln!("error: {} (at {})", p.message, at.join(", "));
        }
        return Ok(ExitCode::from(1));
    }
    let plan = plan::plan(&desired, &live);
    let rendered = match options.format {
        PlanFormat::Human => plan::human(&plan),
        PlanFormat::Markdown => plan::markdown(&plan),
        PlanFormat::Json => format!("{}\n", serde_json::to_string_pretty(&plan::json(&plan))?),
    };
    crate::print(&rendered)?;
    let deletes = plan.count(plan::Action::Destroy);
    if deletes > options.max_deletes && !options.allow_deletes {
        return Ok(fail(format!(
            "the plan deletes {deletes} associations, more than --max-deletes {}; review it and pass --allow-deletes to go ahead",
            options.max_deletes
        )));
    }
    if let Some(path) = &options.script {
        crate::write_atomically(path, &plan::script(&plan, &desired, &live))?;
        set_executable(path)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(match (options.detailed_exitcode, plan.is_empty()) {
        (true, false) => ExitCode::from(2),
        _ => ExitCode::SUCCESS,
    })
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

pub fn import(dump: &Path, options: &import::Options, out: Option<&Path>) -> std::io::Result<ExitCode> {
    let text = match read_dump(dump) {
        Ok(text) => text,
        Err(e) => return Ok(fail(format!("{}: {e}", dump.display()))),
    };
    let live = match tree::parse(&text) {
        Ok(live) => live,
        Err(e) => return Ok(fail(format!("{}: not a sacctmgr dump: {e}", dump.display()))),
    };
    let kdl = match import::to_kdl(&live, options) {
        Ok(kdl) => kdl,
        Err(problems) => {
            for p in problems {
                eprintln!("error: {p}");
            }
            eprintln!("nothing was written");
            return Ok(ExitCode::from(1));
        }
    };
    match out {
        None => crate::print(&kdl)?,
        Some(folder) => {
            let file = folder.join(crate::fs_loader::ENTRY_FILE);
            if file.exists() {
                return Ok(fail(format!("{} exists; import writes a new repository", file.display())));
            }
            std::fs::create_dir_all(folder)?;
            crate::write_atomically(&file, &kdl)?;
            eprintln!("wrote {}", file.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}
