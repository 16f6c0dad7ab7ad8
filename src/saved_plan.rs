//! A saved Slurm plan (`allot plan slurm --out PLAN`, applied by `allot apply slurm PLAN`),
//! as JSON: the live associations it was made against (the dump, and its fingerprint), the
//! association tree the budgets want (as the flat file `sacctmgr load` reads), the budgets'
//! git commit (HEAD when planned), the allot version, the deletion guard it passed, its
//! summary, and how it is applied (the flat file of one `sacctmgr load`, and `sacctmgr`
//! commands). The summary, the load and the commands are made again from the two trees
//! when the plan is read, and a plan whose summary, load or commands differ, or that
//! another allot version made, is refused: what is applied is exactly what allot plans from
//! what was reviewed.

use std::path::Path;

use allot_targets::slurm::{check_tree, plan, tree};
use git2::{ObjectType, Oid};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::exit::Error;

/// The format of a saved plan, in its `format` field.
const FORMAT: &str = "allot-slurm-plan/1";
/// The largest saved plan written or read: its dump, its wanted tree and its load, each of
/// a dump's size at most.
pub const MAX_PLAN_BYTES: usize = 3 * tree::MAX_DUMP_BYTES;

/// A plan as saved, read back and checked.
pub struct SavedPlan {
    pub cluster: String,
    pub revision: Option<String>,
    /// The live dump the plan was made against, and its fingerprint.
    pub live_text: String,
    pub fingerprint: String,
    /// The tree the budgets want.
    pub desired: tree::Tree,
    pub plan: plan::Plan,
    pub application: plan::Application,
}

/// The fingerprint of a live association tree: the git blob id of its dump without the
/// comment lines (`sacctmgr dump` normalises the rest: one record per line, sorted).
pub fn fingerprint(dump: &str) -> String {
    Oid::hash_object(ObjectType::Blob, records(dump).as_bytes())
        .expect("hashing bytes in memory fails only without memory")
        .to_string()
}

/// A dump's records: its lines but the comments.
pub fn records(dump: &str) -> String {
    dump.lines().filter(|l| !l.trim_start().starts_with('#')).flat_map(|l| [l, "\n"]).collect()
}

/// The commit HEAD names in the git repository holding `path`, if it is in one (edits not
/// committed are not in it).
pub fn revision(path: &Path) -> Option<String> {
    let repository = git2::Repository::discover(path).ok()?;
    let commit = repository.head().ok()?.peel_to_commit().ok()?;
    Some(commit.id().to_string())
}

/// The saved plan's JSON.
pub fn to_json(
    live_text: &str,
    desired: &tree::Tree,
    result: &plan::Plan,
    application: &plan::Application,
    revision: Option<&str>,
    max_deletes: Option<usize>,
) -> Value {
    json!({
        "format": FORMAT,
        "allot_version": env!("CARGO_PKG_VERSION"),
        "cluster": result.cluster,
        "revision": revision,
        "summary": result.summary(),
        "max_deletes": max_deletes,
        "live": { "fingerprint": fingerprint(live_text), "dump": live_text },
        "desired": tree::flat_file(desired, "the associations the budgets want"),
        "load": application.load,
        "commands": application.commands.iter().map(plan::Command::arguments).collect::<Vec<_>>(),
    })
}

/// Reads and checks a saved plan.
pub fn read(path: &Path) -> Result<SavedPlan, Error> {
    let fail = |why: String| Error::failed(format!("{}: {why}", path.display()));
    let text = crate::read::read_text(path, MAX_PLAN_BYTES as u64).map_err(|e| fail(e.to_string()))?;
    let value: Value = serde_json::from_str(&text).map_err(|e| fail(format!("not a saved plan: {e}")))?;
    from_json(&value).map_err(fail)
}

/// Checks a saved plan's JSON (see the module's documentation), and what it holds.
pub fn from_json(value: &Value) -> Result<SavedPlan, String> {
    let field = |name: &str| value.get(name).and_then(Value::as_str);
    if field("format") != Some(FORMAT) {
        return Err(format!("not a saved plan of allot (its format is not {FORMAT})"));
    }
    let version = field("allot_version").unwrap_or("unknown");
    if version != env!("CARGO_PKG_VERSION") {
        return Err(format!(
            "made by allot {version}, and this is allot {}: plan again with this version",
            env!("CARGO_PKG_VERSION")
        ));
    }
    let edited = |what: &str| format!("{what}: the plan was edited, or is damaged; plan again");
    let live_text =
        value.pointer("/live/dump").and_then(Value::as_str).ok_or_else(|| edited("no live dump"))?;
    let fingerprint = fingerprint(live_text);
    if value.pointer("/live/fingerprint").and_then(Value::as_str) != Some(fingerprint.as_str()) {
        return Err(edited("its live dump does not match its fingerprint"));
    }
    let live = tree::parse(live_text).map_err(|e| edited(&format!("its live dump: {e}")))?;
    let desired_text = field("desired").ok_or_else(|| edited("no desired tree"))?;
    let desired = tree::parse(desired_text).map_err(|e| edited(&format!("its desired tree: {e}")))?;
    // What the budgets' checks refuse before a flat file is written (quotes, `#`, `\`).
    if let Some(problem) = check_tree("the plan's desired tree", &desired).first() {
        return Err(edited(&format!("its desired tree: {}", problem.message)));
    }
    if desired.cluster != live.cluster || field("cluster") != Some(live.cluster.as_str()) {
        return Err(edited("its trees and its cluster do not agree"));
    }
    let result = plan::plan(&desired, &live);
    let application = plan::application(&result, &desired, &live);
    if !result.refused.is_empty() {
        return Err(edited("its trees ask for changes allot refuses"));
    }
    let saved = value.get("commands").and_then(|c| Vec::<Vec<String>>::deserialize(c).ok());
    let made: Vec<Vec<String>> = application.commands.iter().map(plan::Command::arguments).collect();
    let load = value.get("load").map(Value::as_str);
    if saved.as_ref() != Some(&made) || load != Some(application.load.as_deref()) {
        return Err(edited("its load and commands are not the ones its trees give"));
    }
    if field("summary") != Some(result.summary().as_str()) {
        return Err(edited("its summary is not its trees'"));
    }
    // A git commit id (SHA-1 or SHA-256), or none: it is shown as it is.
    let revision = match value.get("revision") {
        None | Some(Value::Null) => None,
        Some(Value::String(id))
            if matches!(id.len(), 40 | 64) && id.bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            Some(id.clone())
        }
        Some(_) => return Err(edited("its revision is not a git commit id")),
    };
    // The deletion guard it was made under (null: deletions allowed).
    let deletes = result.count(plan::Action::Destroy);
    match value.get("max_deletes") {
        Some(Value::Null) => {}
        Some(max) if max.as_u64().is_some_and(|max| deletes as u64 <= max) => {}
        Some(_) => {
            return Err(edited(&format!("it deletes {deletes} associations, more than its guard allows")));
        }
        None => return Err(edited("it holds no deletion guard")),
    }
    Ok(SavedPlan {
        cluster: live.cluster.clone(),
        revision,
        live_text: live_text.to_string(),
        fingerprint,
        desired,
        plan: result,
        application,
    })
}
