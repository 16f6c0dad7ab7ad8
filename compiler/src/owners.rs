//! Ownership: whose approval a change to a project needs, and the CODEOWNERS entries of
//! the budget files. Read from the normalised model ([`crate::ir`]): the diff names the
//! approvers of each change, and `allot owners` writes the CODEOWNERS file.

use std::collections::BTreeMap;

use crate::ir::{Model, Project};

/// The owners whose approval a change inside `path`'s subtree needs: the nearest named
/// owners at `path` or above it. `projects` are a model's [`Model::projects_by_path`], and
/// `path` one of its keys (another path has no owners).
pub fn owners_at(projects: &BTreeMap<String, (&Project, Option<&Project>)>, path: &str) -> Vec<String> {
    let mut at = projects.get(path);
    while let Some((project, parent)) = at {
        if !project.owners.is_empty() {
            return project.owners.clone();
        }
        at = parent.and_then(|p| projects.get(&p.path));
    }
    Vec::new()
}

/// CODEOWNERS entries: each file but the entry file, owned by the owners of the projects
/// it defines at its top (the nearest named owners at or above them).
pub fn codeowners(model: &Model, entry: &str) -> Vec<(String, Vec<String>)> {
    let projects = model.projects_by_path();
    let mut by_file: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (path, (project, parent)) in &projects {
        let file = project.source.file.as_str();
        let top_of_file = parent.is_none_or(|p| p.source.file != file);
        if file != entry && top_of_file {
            let owners = by_file.entry(file).or_default();
            for owner in owners_at(&projects, path) {
                if !owners.contains(&owner) {
                    owners.push(owner);
                }
            }
        }
    }
    by_file.into_iter().filter(|(_, o)| !o.is_empty()).map(|(f, o)| (f.to_string(), o)).collect()
}
