//! `allot build`: every target's native files and fidelity report, written under the output
//! folder only when what every target emits breaks none of its scheduler's rules.
//!
//! allot writes only what it owns. The output folder holds a manifest (`.allot-manifest`)
//! of every file allot wrote, with its git blob id; a file in a target's folder that is not
//! in it, or that changed since, is refused (listed, nothing written) unless `--force`. A
//! build holds an exclusive lock (`.allot-lock`) for its whole run, so a second build into
//! the same folder fails at once. Each target's folder is made in a temporary folder
//! (`.allot-tmp-*`) inside the output folder and renamed over the old one, so a failed run
//! leaves the previous outputs intact; links inside the output folder are never followed.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, TryLockError};
use std::io::Write;
use std::path::{Component, Path, PathBuf};

use allot_compiler::ir::Model;
use allot_targets::{Emitted, OutputFile, registry};
use git2::{ObjectType, Oid};

use crate::args;
use crate::diagnostics::Format;
use crate::exit::{Error, Exit, Outcome};
use crate::output::print;

/// The manifest of what allot wrote, in the output folder.
const MANIFEST: &str = ".allot-manifest";
/// The lock file a build holds, in the output folder.
const LOCK: &str = ".allot-lock";
/// How the temporary folders of a build start, in the output folder.
const TEMPORARY: &str = ".allot-tmp-";

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    budgets: args::RepositoryAt,
    /// The output folder; each target writes `OUT/<target>/`.
    #[arg(long)]
    out: PathBuf,
    /// Only these targets (repeatable) [default: every target a cluster is bound to].
    #[arg(long = "target", value_name = "TARGET")]
    targets: Vec<String>,
    /// Replace or remove files in the target folders that allot did not write, or that
    /// changed since it wrote them.
    #[arg(long)]
    force: bool,
}

pub fn run(args: Args, format: Format) -> Outcome {
    let Some(model) = args.budgets.model(format)? else {
        return Ok(Exit::Problems);
    };
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
    let considered: Vec<&'static str> = registry()
        .iter()
        .map(|t| t.name())
        .filter(|name| args.targets.is_empty() || args.targets.iter().any(|n| n == name))
        .collect();
    write(&args.out, &built, &considered, args.force)?;
    for target in &built {
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

/// Emits the chosen targets (all when `only` is empty). Targets bound to no cluster are
/// left out; an unknown target name or a rule of a scheduler broken is an error.
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
        let Emitted { files, violations } = target.emit(model);
        if files.is_empty() {
            continue;
        }
        for violation in violations {
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

/// A relative path of plain names, without control characters (a manifest line holds it).
fn is_relative_inside(path: &str) -> bool {
    let as_path = Path::new(path);
    !path.is_empty()
        && !path.chars().any(char::is_control)
        && as_path.components().all(|c| matches!(c, Component::Normal(_)))
}

/// Writes the built targets' folders under `out`, and removes the folders of the
/// `considered` targets that are built no more, under the lock and within the manifest's
/// rules (see the module's documentation).
fn write(out: &Path, built: &[Built], considered: &[&str], force: bool) -> Result<(), Error> {
    if built.is_empty() && std::fs::symlink_metadata(out.join(MANIFEST)).is_err() {
        return Ok(());
    }
    std::fs::create_dir_all(out)?;
    let _lock = lock(out)?;
    remove_leftovers(out)?;
    let manifest = Manifest::read(out)?;

    // The folders this run replaces or removes: built targets, and targets allot wrote before.
    let replaced: Vec<&str> = considered
        .iter()
        .copied()
        .filter(|t| built.iter().any(|b| b.target == *t) || manifest.holds_under(t))
        .collect();
    let mut refused = Vec::new();
    for target in &replaced {
        refused.extend(not_ours(out, target, &manifest)?);
    }
    if !refused.is_empty() && !force {
        return Err(Error::failed(format!(
            "{} holds files that allot did not write, or that changed since it wrote them:\n{}\n\
             allot build replaces whole target folders: move these away, or pass --force to replace them; nothing was written",
            out.display(),
            refused.iter().map(|r| format!("  {r}")).collect::<Vec<_>>().join("\n")
        )));
    }

    let staging = tempfile::Builder::new().prefix(TEMPORARY).tempdir_in(out)?;
    let mut written = manifest.without(&replaced);
    for target in built {
        let folder = staging.path().join("new").join(target.target);
        for (path, contents) in target.files.iter().map(|f| (f.path.as_str(), f.contents.as_str())) {
            write_new(&folder.join(path), contents)?;
            written.insert(format!("{}/{path}", target.target), blob_id(contents.as_bytes())?);
        }
        write_new(&folder.join("FIDELITY.md"), &target.fidelity)?;
        written.insert(format!("{}/FIDELITY.md", target.target), blob_id(target.fidelity.as_bytes())?);
    }
    // Until the folders are swapped, both the old and the new files are allot's.
    manifest.union(&written).write(out, staging.path())?;
    std::fs::create_dir(staging.path().join("old"))?;
    for target in &replaced {
        let destination = out.join(target);
        let old = staging.path().join("old").join(target);
        let existed = std::fs::symlink_metadata(&destination).is_ok();
        if existed {
            std::fs::rename(&destination, &old)?;
        }
        if built.iter().any(|b| b.target == *target)
            && let Err(error) = std::fs::rename(staging.path().join("new").join(target), &destination)
        {
            if existed {
                let _ = std::fs::rename(&old, &destination);
            }
            return Err(error.into());
        }
    }
    Manifest::from(written).write(out, staging.path())?;
    staging.close()?;
    Ok(())
}

/// Takes the build lock of `out`, held until the file is dropped; a build already holding
/// it is an error naming the folder.
fn lock(out: &Path) -> Result<File, Error> {
    let path = out.join(LOCK);
    if std::fs::symlink_metadata(&path).is_ok_and(|m| !m.is_file()) {
        return Err(Error::failed(format!(
            "{}: not a regular file; allot build takes its lock there and never follows links",
            path.display()
        )));
    }
    let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path)?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(TryLockError::WouldBlock) => Err(Error::failed(format!(
            "another allot build is writing to {} (it holds {LOCK}); nothing was written",
            out.display()
        ))),
        Err(TryLockError::Error(error)) => Err(error.into()),
    }
}

/// Removes the temporary folders of builds that were killed before they could.
fn remove_leftovers(out: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(out)? {
        let entry = entry?;
        if entry.file_name().to_string_lossy().starts_with(TEMPORARY) && entry.file_type()?.is_dir() {
            std::fs::remove_dir_all(entry.path())?;
        }
    }
    Ok(())
}

/// The files under `out/target` that are not allot's: not in the manifest, or changed
/// since allot wrote them, or not a regular file. The folder itself must not be a link.
fn not_ours(out: &Path, target: &str, manifest: &Manifest) -> Result<Vec<String>, Error> {
    let top = out.join(target);
    let Ok(metadata) = std::fs::symlink_metadata(&top) else { return Ok(Vec::new()) };
    if metadata.file_type().is_symlink() {
        return Err(Error::failed(format!(
            "{}: is a symbolic link; allot build never writes through links, even with --force: \
             remove the link, or give --out the folder it points to",
            top.display()
        )));
    }
    let mut found = Vec::new();
    let mut folders = vec![(top, target.to_string())];
    while let Some((folder, relative)) = folders.pop() {
        if !std::fs::symlink_metadata(&folder)?.is_dir() {
            found.push(format!("{relative} (not a folder, where allot writes one)"));
            continue;
        }
        for entry in std::fs::read_dir(&folder)? {
            let entry = entry?;
            let path = entry.path();
            let name = format!("{relative}/{}", entry.file_name().to_string_lossy());
            let kind = entry.file_type()?;
            if kind.is_dir() {
                folders.push((path, name));
            } else if !kind.is_file() {
                found.push(format!("{name} (not a regular file)"));
            } else if !manifest.holds(&name) {
                found.push(format!("{name} (not written by allot)"));
            } else if !manifest.matches(&name, &file_id(&path)?) {
                found.push(format!("{name} (changed since allot wrote it)"));
            }
        }
    }
    found.sort();
    Ok(found)
}

/// Writes a new file (and its folders) inside the staging folder.
fn write_new(path: &Path, contents: &str) -> std::io::Result<()> {
    if let Some(folder) = path.parent() {
        std::fs::create_dir_all(folder)?;
    }
    std::fs::File::create_new(path)?.write_all(contents.as_bytes())
}

/// The git blob id of `bytes` (what `git hash-object` prints for a file holding them).
fn blob_id(bytes: &[u8]) -> Result<String, Error> {
    Oid::hash_object(ObjectType::Blob, bytes)
        .map(|id| id.to_string())
        .map_err(|e| Error::failed(format!("cannot hash a file: {e}")))
}

/// The git blob id of the regular file at `path`.
fn file_id(path: &Path) -> Result<String, Error> {
    Oid::hash_file(ObjectType::Blob, path)
        .map(|id| id.to_string())
        .map_err(|e| Error::failed(format!("{}: cannot read it: {e}", path.display())))
}

/// What allot wrote in an output folder: each file's path (relative, `/`-separated) and
/// git blob id. A path may carry two ids while a build swaps folders.
#[derive(Default)]
struct Manifest {
    files: BTreeSet<(String, String)>,
}

impl From<BTreeMap<String, String>> for Manifest {
    fn from(files: BTreeMap<String, String>) -> Manifest {
        Manifest { files: files.into_iter().collect() }
    }
}

impl Manifest {
    const HEADER: &str = "# allot build: the files allot wrote in this folder, by git blob id (`git hash-object FILE`).\n\
        # allot replaces or removes only these files, and only while they are unchanged. Do not edit.\n";

    /// The manifest of `out`, empty when there is none; one that cannot be read is an error.
    fn read(out: &Path) -> Result<Manifest, Error> {
        let path = out.join(MANIFEST);
        let metadata = match std::fs::symlink_metadata(&path) {
            Ok(metadata) => metadata,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Manifest::default()),
            Err(e) => return Err(e.into()),
        };
        let bad = |why: &str| Error::failed(format!("{}: {why}; remove it to start afresh", path.display()));
        if !metadata.is_file() {
            return Err(bad("not a regular file (allot never follows links in the output folder)"));
        }
        let text = std::fs::read_to_string(&path).map_err(|e| bad(&e.to_string()))?;
        let mut files = BTreeSet::new();
        for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.starts_with('#') && !l.is_empty()) {
            let Some((id, file)) = line.split_once("  ") else {
                return Err(bad(&format!("line {} is not `BLOB-ID  PATH`", n + 1)));
            };
            if id.len() != 40 || !id.bytes().all(|b| b.is_ascii_hexdigit()) || !is_relative_inside(file) {
                return Err(bad(&format!("line {} is not `BLOB-ID  PATH`", n + 1)));
            }
            files.insert((file.to_string(), id.to_string()));
        }
        Ok(Manifest { files })
    }

    fn holds(&self, path: &str) -> bool {
        self.files.iter().any(|(p, _)| p == path)
    }

    fn matches(&self, path: &str, id: &str) -> bool {
        self.files.contains(&(path.to_string(), id.to_string()))
    }

    fn holds_under(&self, target: &str) -> bool {
        self.files.iter().any(|(p, _)| p.strip_prefix(target).is_some_and(|rest| rest.starts_with('/')))
    }

    /// The files outside the folders of `targets`.
    fn without(&self, targets: &[&str]) -> BTreeMap<String, String> {
        self.files
            .iter()
            .filter(|(p, _)| {
                !targets.iter().any(|t| p.strip_prefix(t).is_some_and(|rest| rest.starts_with('/')))
            })
            .cloned()
            .collect()
    }

    fn union(&self, more: &BTreeMap<String, String>) -> Manifest {
        let mut files = self.files.clone();
        files.extend(more.iter().map(|(p, id)| (p.clone(), id.clone())));
        Manifest { files }
    }

    /// Writes the manifest into `out`, atomically: first into `staging`, then renamed.
    fn write(&self, out: &Path, staging: &Path) -> std::io::Result<()> {
        let mut text = String::from(Self::HEADER);
        for (path, id) in &self.files {
            text.push_str(&format!("{id}  {path}\n"));
        }
        let new = staging.join(MANIFEST);
        std::fs::write(&new, text)?;
        std::fs::rename(&new, out.join(MANIFEST))
    }
}
