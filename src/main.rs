//! The `allot` command line: reads budget repositories from disk, runs the compiler, and
//! does all the I/O, rendering and exit codes (documented in docs/cli.md).

mod build;
mod fs_loader;
mod git_loader;
mod replay;
mod report;
mod review;
mod simulate;
mod slurm;
mod tree;

use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use allot_compiler::{Compilation, Loader, compile};
use clap::{Parser, Subcommand};

use crate::fs_loader::FsLoader;
use crate::report::Format;

/// A compiler for GPU budgets.
#[derive(Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    /// How diagnostics are shown [default: fancy on a terminal, plain otherwise or when CI is set].
    #[arg(long, global = true, value_enum)]
    diagnostics: Option<Format>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Validate a budget repository and report every problem.
    Check {
        /// A folder holding allot.kdl, or a budget file.
        #[arg(default_value = ".")]
        path: PathBuf,
        /// Fail on warnings too.
        #[arg(long)]
        deny_warnings: bool,
    },
    /// Show the project tree: shares, effective shares and guaranteed GPUs per cluster.
    Tree {
        #[arg(default_value = ".")]
        path: PathBuf,
    },
    /// Write every target's native configuration and its fidelity report.
    Build {
        #[arg(default_value = ".")]
        path: PathBuf,
        /// The output folder; each target writes OUT/<target>/.
        #[arg(long)]
        out: PathBuf,
        /// Only these targets (repeatable) [default: every target a cluster is bound to].
        #[arg(long = "target", value_name = "TARGET")]
        targets: Vec<String>,
    },
    /// What changed between two revisions: the semantic diff, for review.
    Diff {
        #[arg(default_value = ".")]
        path: PathBuf,
        /// The base revision (branch, tag, commit, HEAD~1).
        #[arg(long)]
        against: String,
        /// The revision to compare [default: the working tree].
        #[arg(long)]
        head: Option<String>,
        /// Also diff every target's native files.
        #[arg(long)]
        native: bool,
        #[arg(long, value_enum, default_value = "human")]
        format: review::DiffFormat,
        /// Exit 2 when there are changes (0 none, 1 error).
        #[arg(long)]
        detailed_exitcode: bool,
        /// Also simulate this trace under both revisions' budgets, side by side.
        #[arg(long, value_name = "TRACE")]
        replay: Option<PathBuf>,
    },
    /// Write a CODEOWNERS file: each included budget file, owned by its subtree's owners.
    Owners {
        #[arg(default_value = ".")]
        path: PathBuf,
    },
    /// The changes that bring a live scheduler to the budgets.
    Plan {
        #[command(subcommand)]
        target: PlanTarget,
    },
    /// Turn a live scheduler's tree into a budget repository.
    Import {
        #[command(subcommand)]
        target: ImportTarget,
    },
    /// The verifier: replay a job trace against the budgets.
    Replay {
        #[command(subcommand)]
        command: ReplayCommand,
    },
    /// What Slurm's `sshare -l` shows for an association tree and its usage (Fair Tree).
    Fairshare {
        /// A budgets folder or file, or a `sacctmgr dump` file.
        tree: PathBuf,
        /// CSV `account,user,raw_usage` (user empty for an account's own usage).
        #[arg(long)]
        usage: PathBuf,
    },
    /// Write the normalised model as JSON (its schema: `allot schema`).
    Export {
        #[arg(default_value = ".")]
        path: PathBuf,
    },
    /// Print the JSON Schema of the exported model.
    Schema,
    /// Format the budget files canonically, keeping comments.
    Fmt {
        #[arg(default_value = ".")]
        path: PathBuf,
        /// Change nothing; list the files that are not formatted and fail if any.
        #[arg(long)]
        check: bool,
    },
}

#[derive(Subcommand)]
enum ReplayCommand {
    /// What happened: entitled, delivered and used GPU-hours per budget, waits per contract.
    Audit {
        #[arg(default_value = ".")]
        path: PathBuf,
        #[command(flatten)]
        input: replay::TraceInput,
        /// The window of the per-window figures [default: the policy window].
        #[arg(long)]
        window: Option<String>,
        #[arg(long, value_enum, default_value = "human")]
        format: replay::ReportFormat,
    },
    /// What would happen: the trace's submissions replayed on the clusters' nodes under the
    /// budgets (or the priority baseline), with the audit's figures, preemptions, GPU-hours
    /// lost to restarts and the largest jobs' waits; several runs side by side.
    Simulate {
        #[arg(default_value = ".")]
        path: PathBuf,
        #[command(flatten)]
        input: replay::TraceInput,
        /// The policies to run, side by side (e.g. `budget,priority`).
        #[arg(long, value_enum, value_delimiter = ',', default_value = "budget")]
        policy: Vec<simulate::PolicyName>,
        /// Also run the budgets as of this git revision, beside the working tree's.
        #[arg(long)]
        against: Option<String>,
        /// Write an HTML report (index.html, self-contained) to this folder.
        #[arg(long)]
        report: Option<PathBuf>,
        #[arg(long, value_enum, default_value = "human")]
        format: replay::ReportFormat,
    },
}

#[derive(Subcommand)]
enum PlanTarget {
    /// Compare with a live Slurm association tree (a `sacctmgr dump`).
    Slurm {
        #[arg(default_value = ".")]
        path: PathBuf,
        /// The `sacctmgr dump CLUSTER file=...` output, or `-` for standard input.
        #[arg(long)]
        live: PathBuf,
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
        format: slurm::PlanFormat,
    },
}

#[derive(Subcommand)]
enum ImportTarget {
    /// Import a Slurm association tree from a `sacctmgr dump`.
    Slurm {
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
    },
}

/// Exit codes: 0 success, 1 problems found (errors, unformatted files), 2 bad usage.
const PROBLEMS: u8 = 1;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let format = cli.diagnostics.unwrap_or_else(Format::detect);
    match run(cli.command, format) {
        Ok(code) => code,
        Err(e) if e.kind() == ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(PROBLEMS)
        }
    }
}

fn run(command: Command, format: Format) -> std::io::Result<ExitCode> {
    match command {
        Command::Check { path, deny_warnings } => {
            let (compilation, ok) = compiled(&path, format, deny_warnings)?;
            if let (true, Some(model)) = (ok, &compilation.model) {
                let mut projects = 0;
                let mut leaves = 0;
                allot_compiler::model::walk(&compilation.budget.projects, &mut |_, p| {
                    projects += 1;
                    leaves += usize::from(p.children.is_empty());
                });
                let summary = format!(
                    "ok: {}, {}, {} ({}), {}; {}\n",
                    report::plural(model.clusters.len(), "cluster"),
                    report::plural(model.contracts.len(), "contract"),
                    report::plural(projects, "project"),
                    report::plural(leaves, "budget"),
                    report::plural(compilation.sources.len(), "file"),
                    report::count(&compilation.diagnostics)
                );
                print(&summary)?;
            }
            Ok(exit(ok))
        }
        Command::Tree { path } => {
            let (compilation, ok) = compiled(&path, format, false)?;
            if let Some(model) = compilation.model.filter(|_| ok) {
                print(&tree::render(&model))?;
            }
            Ok(exit(ok))
        }
        Command::Build { path, out, targets } => {
            let (compilation, ok) = compiled(&path, format, false)?;
            let Some(model) = compilation.model.filter(|_| ok) else { return Ok(exit(false)) };
            let built = match build::emit(&model, &targets) {
                Ok(built) => built,
                Err(problems) => {
                    for problem in problems {
                        eprintln!("error: {problem}");
                    }
                    eprintln!("nothing was written");
                    return Ok(ExitCode::from(PROBLEMS));
                }
            };
            if built.is_empty() {
                eprintln!("no cluster is bound to a target: nothing to build");
            }
            for target in &built {
                build::write(&out, target)?;
                let folder = out.join(target.target);
                print(&format!(
                    "wrote {} files to {}\n\n{}\n",
                    target.files.len() + 1,
                    folder.display(),
                    target.fidelity
                ))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Plan {
            target:
                PlanTarget::Slurm {
                    path,
                    live,
                    script,
                    max_deletes,
                    allow_deletes,
                    detailed_exitcode,
                    format: plan_format,
                },
        } => {
            let (compilation, ok) = compiled(&path, format, false)?;
            let Some(model) = compilation.model.filter(|_| ok) else { return Ok(exit(false)) };
            let options = slurm::PlanOptions {
                live,
                script,
                max_deletes,
                allow_deletes,
                detailed_exitcode,
                format: plan_format,
            };
            slurm::plan(&model, &options)
        }
        Command::Import { target: ImportTarget::Slurm { dump, gpus, gpu_type, gpus_per_node, out } } => {
            let options = allot_targets::slurm::import::Options { gpus, gpu_type, gpus_per_node };
            slurm::import(&dump, &options, out.as_deref())
        }
        Command::Diff { path, against, head, native, format: diff_format, detailed_exitcode, replay } => {
            let revisions = Revisions { against: &against, head: head.as_deref() };
            diff(&path, revisions, native, replay.as_deref(), diff_format, detailed_exitcode, format)
        }
        Command::Owners { path } => owners(&path, format),
        Command::Replay { command: ReplayCommand::Audit { path, input, window, format: report_format } } => {
            let window = match window.as_deref().map(allot_compiler::lower::parse_duration) {
                Some(None) => {
                    eprintln!("error: --window: not a duration (e.g. 7d, 12h)");
                    return Ok(ExitCode::from(PROBLEMS));
                }
                other => other.flatten(),
            };
            let (compilation, ok) = compiled(&path, format, false)?;
            let Some(model) = compilation.model.filter(|_| ok) else { return Ok(exit(false)) };
            replay::run_audit(&model, &input, window, report_format)
        }
        Command::Replay {
            command: ReplayCommand::Simulate { path, input, policy, against, report, format: report_format },
        } => {
            let (compilation, ok) = compiled(&path, format, false)?;
            let Some(model) = compilation.model.filter(|_| ok) else { return Ok(exit(false)) };
            let base = match &against {
                None => None,
                Some(rev) => {
                    let git = match git_loader::GitRepo::discover(&path) {
                        Ok(git) => git,
                        Err(message) => return Ok(replay::fail(message)),
                    };
                    match compile_revision(&git, &path, Some(rev), format)? {
                        Some(base) => Some((rev.as_str(), base)),
                        None => return Ok(ExitCode::from(PROBLEMS)),
                    }
                }
            };
            let named = |name: &str, p: simulate::PolicyName| {
                if policy.len() > 1 { format!("{name} ({})", p.label()) } else { name.to_string() }
            };
            let mut scenarios = Vec::new();
            for &p in &policy {
                match &base {
                    Some((rev, base)) => {
                        scenarios.push(simulate::Scenario { label: named(rev, p), model: base, policy: p });
                        scenarios.push(simulate::Scenario {
                            label: named("working tree", p),
                            model: &model,
                            policy: p,
                        });
                    }
                    None => scenarios.push(simulate::Scenario {
                        label: p.label().into(),
                        model: &model,
                        policy: p,
                    }),
                }
            }
            simulate::run(&scenarios, &input, report_format, report.as_deref())
        }
        Command::Fairshare { tree, usage } => {
            let is_dump = tree.is_file()
                && std::fs::read_to_string(&tree)
                    .is_ok_and(|t| t.lines().any(|l| l.trim_start().starts_with("Cluster - ")));
            if is_dump {
                replay::run_fairshare(&tree, None, &usage)
            } else {
                let (compilation, ok) = compiled(&tree, format, false)?;
                let Some(model) = compilation.model.filter(|_| ok) else { return Ok(exit(false)) };
                replay::run_fairshare(&tree, Some(&model), &usage)
            }
        }
        Command::Export { path } => {
            let (compilation, ok) = compiled(&path, format, false)?;
            if let Some(model) = compilation.model.filter(|_| ok) {
                print(&pretty(&model)?)?;
            }
            Ok(exit(ok))
        }
        Command::Schema => {
            print(&pretty(&allot_compiler::normalize::json_schema())?)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Fmt { path, check } => fmt(&path, check, format),
    }
}

/// Compiles the repository at `path` and renders its diagnostics; `ok` when the command
/// may go on (no errors, and no warnings when they are denied).
fn compiled(path: &Path, format: Format, deny_warnings: bool) -> std::io::Result<(Compilation, bool)> {
    let (loader, entry) = FsLoader::open(path);
    let compilation = compile(&loader, &entry);
    report::render(format, &compilation.diagnostics, &compilation.sources)?;
    let denied = deny_warnings && !compilation.diagnostics.is_empty();
    let ok = compilation.model.is_some() && !denied;
    if !ok && matches!(format, Format::Fancy | Format::Plain) {
        eprintln!("{}: {}", loader.display_name(&entry), report::count(&compilation.diagnostics));
    }
    Ok((compilation, ok))
}

fn fmt(path: &Path, check: bool, format: Format) -> std::io::Result<ExitCode> {
    let (loader, entry) = FsLoader::open(path);
    let compilation = compile(&loader, &entry);
    // Files that did not parse are not formatted; say why.
    let unreadable: Vec<_> = compilation
        .diagnostics
        .iter()
        .filter(|d| {
            use allot_compiler::Code::*;
            matches!(d.code, SyntaxKdl | SyntaxKdlV1 | SizeTooDeep | SizeFileTooLarge | SourceUnreadable)
        })
        .cloned()
        .collect();
    if !unreadable.is_empty() {
        report::render(format, &unreadable, &compilation.sources)?;
        return Ok(ExitCode::from(PROBLEMS));
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
        if check {
            print(&format!("{}\n", file.name))?;
            problems = true;
        } else {
            write_atomically(&loader.disk_path(&file.path), &formatted)?;
            print(&format!("formatted {}\n", file.name))?;
        }
    }
    Ok(exit(!problems))
}

/// Compiles a revision: the working tree (`rev` None) or a commit; renders its
/// diagnostics, which name the revision.
fn compile_revision(
    git: &git_loader::GitRepo,
    path: &Path,
    rev: Option<&str>,
    format: Format,
) -> std::io::Result<Option<allot_compiler::normalize::Model>> {
    let compilation = match rev {
        None => {
            let (loader, entry) = FsLoader::open(path);
            compile(&loader, &entry)
        }
        Some(rev) => match git.at(rev) {
            Ok(loader) => compile(&loader, &git.entry),
            Err(message) => {
                eprintln!("error: {message}");
                return Ok(None);
            }
        },
    };
    report::render(format, &compilation.diagnostics, &compilation.sources)?;
    if compilation.model.is_none() {
        eprintln!("{}: {}", rev.unwrap_or("the working tree"), report::count(&compilation.diagnostics));
    }
    Ok(compilation.model)
}

/// The two revisions a diff compares; no head: the working tree.
struct Revisions<'a> {
    against: &'a str,
    head: Option<&'a str>,
}

fn diff(
    path: &Path,
    revisions: Revisions<'_>,
    native: bool,
    replay_trace: Option<&Path>,
    diff_format: review::DiffFormat,
    detailed_exitcode: bool,
    format: Format,
) -> std::io::Result<ExitCode> {
    let git = match git_loader::GitRepo::discover(path) {
        Ok(git) => git,
        Err(message) => {
            eprintln!("error: {message}");
            return Ok(ExitCode::from(PROBLEMS));
        }
    };
    let (Some(old), Some(new)) = (
        compile_revision(&git, path, Some(revisions.against), format)?,
        compile_revision(&git, path, revisions.head, format)?,
    ) else {
        return Ok(ExitCode::from(PROBLEMS));
    };
    let diff = allot_compiler::diff::diff(&old, &new);
    let natives = if native { review::native(&old, &new) } else { Vec::new() };
    let scenarios = [(revisions.against, &old), (revisions.head.unwrap_or("working tree"), &new)].map(
        |(label, model)| simulate::Scenario {
            label: label.into(),
            model,
            policy: simulate::PolicyName::Budget,
        },
    );
    let runs = match replay_trace {
        None => None,
        Some(trace) => match simulate::simulate_all(&scenarios, &replay::TraceInput::at(trace)) {
            Ok(runs) => Some(runs),
            Err(message) => return Ok(replay::fail(message)),
        },
    };
    let replayed = |trace: &Path| format!("Simulated on {} under each revision's budgets", trace.display());
    let text = match diff_format {
        review::DiffFormat::Human => {
            let mut text = review::human(&diff, &natives, &git.prefix);
            if let (Some(runs), Some(trace)) = (&runs, replay_trace) {
                text.push_str(&format!("\n{}:\n{}", replayed(trace), simulate::side_by_side(runs)));
            }
            text
        }
        review::DiffFormat::Markdown => {
            let mut text = review::markdown(&diff, &natives, &git.prefix);
            if let (Some(runs), Some(trace)) = (&runs, replay_trace) {
                text.push_str(&format!("\n### {}\n\n{}", replayed(trace), simulate::markdown(runs)));
            }
            text
        }
        review::DiffFormat::Json => {
            let mut value = review::json(&diff, &natives, &git.prefix);
            if let Some(runs) = &runs {
                value["replay"] = simulate::json(runs);
            }
            pretty(&value)?
        }
        review::DiffFormat::Github => {
            if runs.is_some() {
                eprintln!("note: --replay shows in the human, markdown and json formats, not in annotations");
            }
            review::github(&diff, &git.prefix)
        }
    };
    print(&text)?;
    Ok(if detailed_exitcode && !diff.is_empty() { ExitCode::from(2) } else { ExitCode::SUCCESS })
}

fn owners(path: &Path, format: Format) -> std::io::Result<ExitCode> {
    let (compilation, ok) = compiled(path, format, false)?;
    let Some(model) = compilation.model.filter(|_| ok) else { return Ok(exit(false)) };
    let (_, entry) = FsLoader::open(path);
    let prefix = git_loader::GitRepo::discover(path).map(|g| g.prefix).unwrap_or_default();
    let mut text =
        String::from("# Budget files and the owners who approve changes to them (allot owners).\n");
    for (file, owners) in allot_compiler::diff::codeowners(&model, &entry) {
        let file = if prefix.is_empty() { file } else { format!("{prefix}/{file}") };
        text.push_str(&format!("/{file} {}\n", owners.join(" ")));
    }
    print(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// Writes `contents` to a temporary file beside `path`, then renames it over `path`: a
/// failed run leaves the old file intact.
pub(crate) fn write_atomically(path: &Path, contents: &str) -> std::io::Result<()> {
    let folder = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut temporary = tempfile::NamedTempFile::new_in(folder)?;
    temporary.write_all(contents.as_bytes())?;
    if let Ok(metadata) = std::fs::metadata(path) {
        temporary.as_file().set_permissions(metadata.permissions())?;
    }
    temporary.persist(path).map_err(|e| e.error)?;
    Ok(())
}

fn pretty(value: &impl serde::Serialize) -> std::io::Result<String> {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    Ok(text)
}

/// Writes to standard output; a closed pipe ends the program quietly (see `main`).
pub(crate) fn print(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

fn exit(ok: bool) -> ExitCode {
    if ok { ExitCode::SUCCESS } else { ExitCode::from(PROBLEMS) }
}
