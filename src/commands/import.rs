//! `allot import slurm`: a live Slurm association tree (a `sacctmgr dump`) as a new budget
//! repository, so that a site can adopt allot without retyping its tree. A repository of
//! one file is printed or written to the output folder; one split into files (a tree too
//! large for one) needs the folder.

use std::path::PathBuf;

use allot_targets::slurm::{import, tree};

use crate::exit::{Error, Exit, Outcome};
use crate::input::dump;
use crate::output::{print, write_atomically};

/// The problems said one by one; the rest are counted.
const MAX_SHOWN: usize = 20;

#[derive(clap::Subcommand)]
pub enum Target {
    /// Import a Slurm association tree from a `sacctmgr dump`.
    Slurm(SlurmArgs),
}

#[derive(clap::Args)]
pub struct SlurmArgs {
    /// The dump file, or `-` for standard input.
    dump: PathBuf,
    /// The GPUs of the cluster (a dump does not say).
    #[arg(long)]
    gpus: u64,
    #[arg(long, default_value = "gpu")]
    gpu_type: String,
    #[arg(long, default_value_t = 8)]
    gpus_per_node: u64,
    /// Write the repository to DIR (DIR/allot.kdl, and DIR/projects/NAME.kdl per top-level
    /// account when it is too large for one file) instead of printing it.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

pub fn run(target: Target) -> Outcome {
    let Target::Slurm(args) = target;
    let text = dump::read(&args.dump)?;
    let live = tree::parse(&text)
        .map_err(|e| Error::failed(format!("{}: not a sacctmgr dump: {e}", args.dump.display())))?;
    let options =
        import::Options { gpus: args.gpus, gpu_type: args.gpu_type, gpus_per_node: args.gpus_per_node };
    let files = match import::to_repository(&live, &options) {
        Ok(files) => files,
        Err(problems) => {
            for p in problems.iter().take(MAX_SHOWN) {
                eprintln!("error: {}: {p}", args.dump.display());
            }
            if problems.len() > MAX_SHOWN {
                eprintln!("error: and {} more", problems.len() - MAX_SHOWN);
            }
            eprintln!("nothing was written");
            return Ok(Exit::Problems);
        }
    };
    let Some(folder) = args.out else {
        return match files.as_slice() {
            [(_, kdl)] => {
                print(kdl)?;
                Ok(Exit::Success)
            }
            _ => Err(Error::failed(format!(
                "{}: the budgets are too large for one file: pass --out DIR to write them as {} files",
                args.dump.display(),
                files.len()
            ))),
        };
    };
    let paths: Vec<PathBuf> = files.iter().map(|(path, _)| folder.join(path)).collect();
    if let Some(existing) = paths.iter().find(|path| path.exists()) {
        return Err(Error::failed(format!("{} exists; import writes a new repository", existing.display())));
    }
    for (path, (_, text)) in paths.iter().zip(&files) {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        write_atomically(path, text)?;
    }
    match paths.as_slice() {
        [file] => eprintln!("wrote {}", file.display()),
        _ => eprintln!(
            "wrote {} and {} files under {}",
            paths[0].display(),
            paths.len() - 1,
            folder.join("projects").display()
        ),
    }
    Ok(Exit::Success)
}
