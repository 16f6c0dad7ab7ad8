//! `allot fmt`: canonical formatting of every budget file of a repository, comments kept;
//! `--check` lists the files that are not formatted instead of writing them. A file is
//! rewritten only when allot can replace it whole, inside the folder it formats: never
//! through a symbolic link, never a read-only file; `--check` reports the same refusals.

use std::path::{Path, PathBuf};

use allot_compiler::{Code, compile};

use crate::diagnostics::{self, Format};
use crate::exit::{Exit, Outcome};
use crate::input::fs_loader::FsLoader;
use crate::output::{print, unreplaceable, write_atomically};

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
    let compilation = compile(&loader, &entry, crate::budgets::now());
    // Files that could not be read or did not parse are not formatted; say why.
    let unreadable: Vec<_> = compilation
        .diagnostics
        .iter()
        .filter(|d| {
            use Code::*;
            matches!(
                d.code,
                SyntaxKdl
                    | SyntaxKdlV1
                    | SizeTooDeep
                    | SizeFileTooLarge
                    | SourceUnreadable
                    | IncludeMissing
                    | IncludeOutside
            )
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
        let refusal = refusal(&loader, &file.path)?;
        if args.check {
            print(&format!("{}\n", file.name))?;
            if let Some(reason) = refusal {
                eprintln!("{}: {reason}; `allot fmt` would leave it as it is", file.name);
            }
            problems = true;
        } else if let Some(reason) = refusal {
            eprintln!("{}: {reason}; not formatted", file.name);
            problems = true;
        } else {
            write_atomically(&loader.disk_path(&file.path), &formatted)?;
            print(&format!("formatted {}\n", file.name))?;
        }
    }
    Ok(Exit::from_ok(!problems))
}

/// Why fmt will not rewrite the repository file `path`: it, or a folder on the way to it
/// inside the repository, is a symbolic link (which may lead outside), or it cannot be
/// replaced whole.
fn refusal(loader: &FsLoader, path: &str) -> std::io::Result<Option<String>> {
    let mut on_the_way = PathBuf::new();
    let folders: Vec<_> = Path::new(path).components().collect();
    for folder in folders.iter().take(folders.len().saturating_sub(1)) {
        on_the_way.push(folder);
        let disk = loader.disk_path(&on_the_way.to_string_lossy());
        if std::fs::symlink_metadata(&disk).is_ok_and(|m| m.file_type().is_symlink()) {
            return Ok(Some(format!(
                "is reached through the symbolic link `{}`; allot fmt does not write through links",
                on_the_way.display()
            )));
        }
    }
    unreplaceable(&loader.disk_path(path))
}
