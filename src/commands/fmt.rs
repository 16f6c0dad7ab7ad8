//! `allot fmt`: canonical formatting of every budget file of a repository, comments kept;
//! `--check` lists the files that are not formatted instead of writing them.

use std::path::PathBuf;

use allot_compiler::{Code, compile};

use crate::diagnostics::{self, Format};
use crate::exit::{Exit, Outcome};
use crate::fs_loader::FsLoader;
use crate::output::{print, write_atomically};

#[derive(clap::Args)]
pub struct Args {
    /// A folder holding allot.kdl, or a budget file.
    #[arg(default_value = ".")]
    path: PathBuf,
    /// Change nothing; list the files that are not formatted and fail if any.
    #[arg(long)]
    check: bool,
}

pub fn run(args: Args, format: Format) -> Outcome {
    let (loader, entry) = FsLoader::open(&args.path);
    let compilation = compile(&loader, &entry);
    // Files that did not parse are not formatted; say why.
    let unreadable: Vec<_> = compilation
        .diagnostics
        .iter()
        .filter(|d| {
            use Code::*;
            matches!(d.code, SyntaxKdl | SyntaxKdlV1 | SizeTooDeep | SizeFileTooLarge | SourceUnreadable)
        })
        .cloned()
        .collect();
    if !unreadable.is_empty() {
        diagnostics::render(format, &unreadable, &compilation.sources)?;
        return Ok(Exit::Problems);
    }
    let mut problems = false;
    for (_, file) in compilation.sources.files() {
        let formatted = match allot_compiler::format::format(&file.text) {
            Ok(formatted) => formatted,
            Err(error) => {
                eprintln!("{}: {error}", file.name);
                problems = true;
                continue;
            }
        };
        if formatted == *file.text {
            continue;
        }
        if args.check {
            print(&format!("{}\n", file.name))?;
            problems = true;
        } else {
            write_atomically(&loader.disk_path(&file.path), &formatted)?;
            print(&format!("formatted {}\n", file.name))?;
        }
    }
    Ok(Exit::from_ok(!problems))
}
