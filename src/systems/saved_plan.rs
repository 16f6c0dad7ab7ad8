//! A saved Slurm plan (`allot plan slurm --out PLAN`, applied by `allot apply slurm PLAN`),
//! as JSON: the live state it was made against (the association dump, the QOS when they
//! were read, and their fingerprint), what the budgets want (the association tree as the
//! flat file `sacctmgr load` reads, and the QOS), the budgets' git commit (HEAD when
//! planned), the allot version, the deletion guard it passed, its summary, and how it is
//! applied (its steps: commands, a load, commands side by side). The summary and the steps
//! are made again from the two states when the plan is read, and a plan whose summary or
//! steps differ, or that another allot version made, is refused: what is applied is exactly
//! what allot plans from what was reviewed.

use std::path::Path;

use allot_targets::slurm::{check_tree, plan, qos, tree};
use git2::{ObjectType, Oid};
use serde_json::{Value, json};

use crate::exit::Error;
use crate::systems::slurm;

/// The format of a saved plan, in its `format` field.
const FORMAT: &str = "allot-slurm-plan/2";
/// The largest saved plan written or read: its dump, its wanted tree and its load, each of
/// a dump's size at most.
pub const MAX_PLAN_BYTES: usize = 3 * tree::MAX_DUMP_BYTES;

/// A plan as saved, read back and checked.
pub struct SavedPlan {
    pub cluster: String,
    pub revision: Option<String>,
    /// The live state the plan was made against.
    pub live: Live,
    /// What the budgets want.
    pub desired: tree::Tree,
    pub plan: plan::Plan,
    pub application: plan::Application,
}

/// A live Slurm's state as allot reads it: the association tree of one cluster (`sacctmgr
/// dump`), and the QOS (`sacctmgr show qos`) unless the dump came from a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Live {
    pub dump: String,
    pub qos: Option<String>,
}

impl Live {
    /// Reads the live state of `cluster` with `sacctmgr`, QOS included when asked for.
    pub fn read(cluster: &str, with_qos: bool) -> Result<Live, Error> {
        let dump = slurm::dump(cluster)?;
        let qos = if with_qos { Some(slurm::show_qos()?) } else { None };
        Ok(Live { dump, qos })
    }

    /// The state as one tree: the dump's associations, and the QOS when read.
    pub fn tree(&self) -> Result<tree::Tree, String> {
        let mut tree = tree::parse(&self.dump).map_err(|e| format!("not a sacctmgr dump: {e}"))?;
        if let Some(text) = &self.qos {
            tree.qos = Some(qos::parse(text).map_err(|e| format!("sacctmgr show qos: {e}"))?);
        }
        Ok(tree)
    }

    /// The records of the state, compared line by line between two readings: the dump's
    /// lines but its comments (`sacctmgr dump` normalises them: one record per line,
    /// sorted), then each QOS as `QOS - ` and its `show qos` line.
    pub fn records(&self) -> String {
        let dump = self.dump.lines().filter(|l| !l.trim_start().starts_with('#'));
        let qos = self.qos.iter().flat_map(|q| q.lines()).map(|l| format!("QOS - {l}"));
        dump.map(str::to_string).chain(qos).flat_map(|l| [l, "\n".to_string()]).collect()
    }

    /// The fingerprint of the state: the git blob id of its [`records`](Self::records).
    pub fn fingerprint(&self) -> String {
        Oid::hash_object(ObjectType::Blob, self.records().as_bytes())
            .expect("hashing bytes in memory fails only without memory")
            .to_string()
    }
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
    live: &Live,
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
        "live": { "fingerprint": live.fingerprint(), "dump": live.dump, "qos": live.qos },
        "desired": {
            "associations": tree::flat_file(desired, "the associations the budgets want"),
            "qos": live.qos.as_ref().and(desired.qos.as_deref()).map(qos::show),
        },
        "steps": steps_json(application),
    })
}

/// The steps of an application as saved: `{"in_order": [ARGUMENTS...]}`, `{"load": TEXT}`,
/// `{"together": [ARGUMENTS...]}`.
fn steps_json(application: &plan::Application) -> Value {
    let arguments = |commands: &[plan::Command]| -> Vec<Vec<String>> {
        commands.iter().map(plan::Command::arguments).collect()
    };
    application
        .steps
        .iter()
        .map(|step| match step {
            plan::Step::InOrder(commands) => json!({ "in_order": arguments(commands) }),
            plan::Step::Load(text) => json!({ "load": text }),
            plan::Step::Together(commands) => json!({ "together": arguments(commands) }),
        })
        .collect()
}

/// Reads and checks a saved plan.
pub fn read(path: &Path) -> Result<SavedPlan, Error> {
    let fail = |why: String| Error::failed(format!("{}: {why}", path.display()));
    let text = crate::input::read::read_text(path, MAX_PLAN_BYTES as u64).map_err(|e| fail(e.to_string()))?;
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
    let text = |pointer: &str| -> Result<Option<String>, String> {
        match value.pointer(pointer) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.clone())),
            Some(_) => Err(edited(&format!("{pointer} is not text"))),
        }
    };
    let dump = text("/live/dump")?.ok_or_else(|| edited("no live dump"))?;
    let live = Live { dump, qos: text("/live/qos")? };
    if value.pointer("/live/fingerprint").and_then(Value::as_str) != Some(live.fingerprint().as_str()) {
        return Err(edited("its live state does not match its fingerprint"));
    }
    let live_tree = live.tree().map_err(|e| edited(&format!("its live state: {e}")))?;
    let associations = text("/desired/associations")?.ok_or_else(|| edited("no desired tree"))?;
    let mut desired = tree::parse(&associations).map_err(|e| edited(&format!("its desired tree: {e}")))?;
    // What the budgets' checks refuse before a flat file is written (quotes, `#`, `\`).
    if let Some(problem) = check_tree("the plan's desired tree", &desired).first() {
        return Err(edited(&format!("its desired tree: {}", problem.message)));
    }
    let desired_qos = text("/desired/qos")?;
    if desired_qos.is_some() != live.qos.is_some() {
        return Err(edited("it holds the QOS of one side only"));
    }
    if let Some(wanted) = desired_qos {
        let wanted = qos::parse(&wanted).map_err(|e| edited(&format!("its desired QOS: {e}")))?;
        if let Some(problem) = tree::unwanted_qos(&wanted, &desired) {
            return Err(edited(&format!("its desired QOS: {problem}")));
        }
        desired.qos = Some(wanted);
    }
    if desired.cluster != live_tree.cluster || field("cluster") != Some(live_tree.cluster.as_str()) {
        return Err(edited("its trees and its cluster do not agree"));
    }
    let result = plan::plan(&desired, &live_tree);
    let application = plan::application(&result, &desired, &live_tree);
    if !result.refused.is_empty() {
        return Err(edited("its trees ask for changes allot refuses"));
    }
    if value.get("steps") != Some(&steps_json(&application)) {
        return Err(edited("its steps are not the ones its trees give"));
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
    Ok(SavedPlan { cluster: live_tree.cluster.clone(), revision, live, desired, plan: result, application })
}
