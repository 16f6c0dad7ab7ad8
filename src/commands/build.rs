//! `allot build`: every target's native files and fidelity report, written under the output
//! folder only when every target's files pass its own validation. Each target's folder is
//! replaced whole (written beside it, then renamed), so a failed run leaves the previous
//! outputs intact.

use std::io::Write;
use std::path::{Component, Path, PathBuf};

use allot_compiler::ir::Model;
use allot_targets::{OutputFile, registry};

use crate::budgets;
use crate::diagnostics::Format;
use crate::exit::{Exit, Outcome};
use crate::output::print;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    repository: budgets::Repository,
    /// The output folder; each target writes OUT/<target>/.
    #[arg(long)]
    out: PathBuf,
    /// Only these targets (repeatable) [default: every target a cluster is bound to].
    #[arg(long = "target", value_name = "TARGET")]
    targets: Vec<String>,
}

pub fn run(args: Args, format: Format) -> Outcome {
    let Some(model) = args.repository.model(format)? else { return Ok(Exit::Problems) };
    let built = match emit(&model, &args.targets) {
        Ok(built) => built,
        Err(problems) => {
            for problem in problems {
                eprintln!("error: {problem}");
            }
            eprintln!("nothing was written");
            return Ok(Exit::Problems);
        }
    };
    if built.is_empty() {
        eprintln!("no cluster is bound to a target: nothing to build");
    }
    for target in &built {
        write(&args.out, target)?;
        let folder = args.out.join(target.target);
        print(&format!(
            "wrote {} files to {}\n\n{}\n",
            target.files.len() + 1,
            folder.display(),
            target.fidelity
        ))?;
    }
    Ok(Exit::Success)
}

/// What a run writes, per target.
struct Built {
    target: &'static str,
    files: Vec<OutputFile>,
    fidelity: String,
}

/// Emits and validates the chosen targets (all when `only` is empty). Targets bound to no
/// cluster are left out; an unknown target name or a failed validation is an error.
fn emit(model: &Model, only: &[String]) -> Result<Vec<Built>, Vec<String>> {
    let targets = registry();
    let known: Vec<&str> = targets.iter().map(|t| t.name()).collect();
    let unknown: Vec<String> = only
        .iter()
        .filter(|name| !known.contains(&name.as_str()))
        .map(|name| format!("unknown target `{name}`; allot knows: {}", known.join(", ")))
        .collect();
    if !unknown.is_empty() {
        return Err(unknown);
    }
    let chosen = targets.iter().filter(|t| only.is_empty() || only.iter().any(|n| n == t.name()));
    let mut built = Vec::new();
    let mut problems = Vec::new();
    for target in chosen {
        let files = target.emit(model);
        if files.is_empty() {
            continue;
        }
        for violation in target.validate(model, &files) {
            let places: Vec<String> = violation.locations.iter().map(ToString::to_string).collect();
            let at = if places.is_empty() { String::new() } else { format!(" (at {})", places.join(", ")) };
            problems.push(format!("{}/{}: {}{at}", target.name(), violation.path, violation.message));
        }
        for file in &files {
            if !is_relative_inside(&file.path) {
                problems.push(format!(
                    "{}: refusing to write outside the output folder: {}",
                    target.name(),
                    file.path
                ));
            }
        }
        built.push(Built { target: target.name(), fidelity: target.fidelity(model).to_markdown(), files });
    }
    if problems.is_empty() { Ok(built) } else { Err(problems) }
}

fn is_relative_inside(path: &str) -> bool {
    let path = Path::new(path);
    !path.as_os_str().is_empty() && path.components().all(|c| matches!(c, Component::Normal(_)))
}

/// Writes one target's files and `FIDELITY.md` as `out/<target>/`, replacing the old folder.
fn write(out: &Path, built: &Built) -> std::io::Result<()> {
    std::fs::create_dir_all(out)?;
    let staging = tempfile::Builder::new().prefix(&format!(".{}-new-", built.target)).tempdir_in(out)?;
    for file in &built.files {
        let path = staging.path().join(&file.path);
        if let Some(folder) = path.parent() {
            std::fs::create_dir_all(folder)?;
        }
        std::fs::File::create(&path)?.write_all(file.contents.as_bytes())?;
    }
    std::fs::write(staging.path().join("FIDELITY.md"), &built.fidelity)?;
    let destination = out.join(built.target);
    let old = tempfile::Builder::new().prefix(&format!(".{}-old-", built.target)).tempdir_in(out)?;
    if destination.exists() {
        std::fs::rename(&destination, old.path().join(built.target))?;
    }
    std::fs::rename(staging.keep(), &destination)?;
    // `old` (the previous outputs) is removed when dropped.
    Ok(())
}
