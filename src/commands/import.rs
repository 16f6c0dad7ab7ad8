//! `allot import slurm`: a live Slurm association tree (a `sacctmgr dump`) as a new budget
//! repository, so that a site can adopt allot without retyping its tree.

use std::path::PathBuf;

use allot_targets::slurm::{import, tree};

use crate::commands::plan::read_dump;
use crate::exit::{Error, Exit, Outcome};
use crate::fs_loader::ENTRY_FILE;
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
    /// Write DIR/allot.kdl instead of printing it.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

pub fn run(target: Target) -> Outcome {
    let Target::Slurm(args) = target;
    let text = read_dump(&args.dump)?;
    let live = tree::parse(&text)
        .map_err(|e| Error::failed(format!("{}: not a sacctmgr dump: {e}", args.dump.display())))?;
    let options =
        import::Options { gpus: args.gpus, gpu_type: args.gpu_type, gpus_per_node: args.gpus_per_node };
    let kdl = match import::to_kdl(&live, &options) {
        Ok(kdl) => kdl,
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
    match args.out {
        None => print(&kdl)?,
        Some(folder) => {
            let file = folder.join(ENTRY_FILE);
            if file.exists() {
                return Err(Error::failed(format!(
                    "{} exists; import writes a new repository",
                    file.display()
                )));
            }
            std::fs::create_dir_all(&folder)?;
            write_atomically(&file, &kdl)?;
            eprintln!("wrote {}", file.display());
        }
    }
    Ok(Exit::Success)
}
