//! `allot owners`: a CODEOWNERS file in which each included budget file is owned by the
//! owners of its subtree, with paths from the root of the git repository. Paths are
//! escaped as CODEOWNERS reads them, and a path or an owner that cannot be written safely
//! stops the command (see [`allot_compiler::owners::codeowners_line`]).

use crate::args;
use crate::diagnostics::Format;
use crate::exit::{Error, Exit, Outcome};
use crate::input::fs_loader::FsLoader;
use crate::input::git_loader::GitRepo;
use crate::output::print;

/// The repository to read (`PATH`).
pub type Args = args::Repository;

pub fn run(args: Args, format: Format) -> Outcome {
    let Some(model) = args.model(format)? else { return Ok(Exit::Problems) };
    let (_, entry) = FsLoader::open(&args.path);
    let git = GitRepo::discover(&args.path).ok();
    let mut text =
        String::from("# Budget files and the owners who approve changes to them (allot owners).\n");
    for (file, owners) in allot_compiler::owners::codeowners(&model, &entry) {
        let file = match &git {
            Some(git) => git.repo_path(&file),
            None => file,
        };
        let line = allot_compiler::owners::codeowners_line(&file, &owners)
            .map_err(|e| Error::failed(format!("cannot write CODEOWNERS: {e}")))?;
        text.push_str(&line);
        text.push('\n');
    }
    print(&text)?;
    Ok(Exit::Success)
}
