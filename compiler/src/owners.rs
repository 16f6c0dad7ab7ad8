//! Ownership: who may own a project, whose approval a change to a project needs, and the
//! CODEOWNERS entries of the budget files. The rules of an owner ([`check_owner`]) serve
//! the check (`check::owners`) and CODEOWNERS alike; the rest reads the normalised model
//! ([`crate::ir`]): the diff names the approvers of each change, and `allot owners` writes
//! the CODEOWNERS file ([`codeowners`], [`codeowners_line`]).

use std::collections::BTreeMap;

use crate::ir::{Model, Project};

/// Names that chat tools mirroring pull requests (Slack, Discord, Mattermost) read as a
/// mention of everyone; GitHub has no such handle, so they are never an owner.
const MASS_MENTIONS: &[&str] = &["everyone", "here", "channel", "all"];

/// Why a string is not an owner: the first rule it breaks.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OwnerError {
    #[error("is empty")]
    Empty,
    #[error("is neither a GitHub handle (`@user`, `@org/team`) nor an e-mail address")]
    Unknown,
    #[error(
        "is not a GitHub user name: 1 to 39 letters, digits or single hyphens, not starting or ending with a hyphen"
    )]
    BadUser,
    #[error("is not a GitHub team: `@org/team-slug`, the slug of lower-case letters, digits, `-` and `_`")]
    BadTeam,
    #[error("reads as a mention of everyone in chat tools, and names no GitHub user")]
    MassMention,
    #[error(
        "is not an e-mail address allot accepts: `local@domain`, the local part of letters, digits, `.` `_` `+` `-`, the domain of dot-separated labels of letters, digits and inner hyphens"
    )]
    BadEmail,
}

/// Checks that `owner` is a GitHub handle, `@user` or `@org/team-slug`, or an e-mail
/// address (`local@domain`, conservatively: no character that Markdown, HTML or
/// CODEOWNERS reads).
pub fn check_owner(owner: &str) -> Result<(), OwnerError> {
    if owner.is_empty() {
        return Err(OwnerError::Empty);
    }
    if let Some(handle) = owner.strip_prefix('@') {
        return match handle.split_once('/') {
            Some((org, team)) => {
                if !is_user(org) {
                    Err(OwnerError::BadTeam)
                } else if is_team_slug(team) {
                    Ok(())
                } else {
                    Err(OwnerError::BadTeam)
                }
            }
            None if MASS_MENTIONS.contains(&handle.to_ascii_lowercase().as_str()) => {
                Err(OwnerError::MassMention)
            }
            None if is_user(handle) => Ok(()),
            None => Err(OwnerError::BadUser),
        };
    }
    match owner.split_once('@') {
        Some((local, domain)) if is_email_local(local) && is_domain(domain) => Ok(()),
        Some(_) => Err(OwnerError::BadEmail),
        None => Err(OwnerError::Unknown),
    }
}

/// A GitHub user or organisation name: 1 to 39 ASCII letters, digits or single hyphens,
/// not starting or ending with a hyphen.
fn is_user(name: &str) -> bool {
    (1..=39).contains(&name.len())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

/// A team's slug: lower-case ASCII letters, digits, `-` and `_`.
fn is_team_slug(slug: &str) -> bool {
    !slug.is_empty()
        && slug.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

fn is_email_local(local: &str) -> bool {
    (1..=64).contains(&local.len())
        && local.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '-'))
        && !local.starts_with('.')
        && !local.ends_with('.')
        && !local.contains("..")
}

/// Two or more labels of ASCII letters, digits and inner hyphens, at most 253 characters.
fn is_domain(domain: &str) -> bool {
    let labels: Vec<&str> = domain.split('.').collect();
    domain.len() <= 253
        && labels.len() >= 2
        && labels.iter().all(|label| {
            (1..=63).contains(&label.len())
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

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

/// Why a CODEOWNERS line cannot be written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CodeownersError {
    #[error("the path `{path}` has {what}, which a CODEOWNERS pattern cannot match literally")]
    Path { path: String, what: &'static str },
    #[error("the owner `{owner}` of `{path}` {reason}")]
    Owner { path: String, owner: String, reason: OwnerError },
}

/// One CODEOWNERS line: `/<path> <owner> ...`, `path` from the repository's root. Spaces
/// and `#` are backslash-escaped as CODEOWNERS reads them; a path holding what no escape
/// makes literal there (a glob character `*` `?` `[` `]`, a backslash, another white space
/// or a control character) is refused, and so is an owner [`check_owner`] refuses.
pub fn codeowners_line(path: &str, owners: &[String]) -> Result<String, CodeownersError> {
    let refuse = |what| Err(CodeownersError::Path { path: crate::escape::line(path), what });
    let mut line = String::from("/");
    for c in path.trim_start_matches('/').chars() {
        match c {
            ' ' => line.push_str("\\ "),
            '#' => line.push_str("\\#"),
            '*' | '?' => return refuse("a glob character `*` or `?`"),
            '[' | ']' => return refuse("a bracket `[` or `]`"),
            '\\' => return refuse("a backslash"),
            c if crate::escape::is_hidden(c) => return refuse("a control character"),
            c if c.is_whitespace() => return refuse("white space other than a space"),
            c => line.push(c),
        }
    }
    for owner in owners {
        check_owner(owner).map_err(|reason| CodeownersError::Owner {
            path: crate::escape::line(path),
            owner: crate::escape::line(owner),
            reason,
        })?;
        line.push(' ');
        line.push_str(owner);
    }
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_and_addresses_are_owners() {
        for ok in
            ["@alice", "@a", "@org/olmo-leads", "@my-org/team_1", "@Alice-Bob", "ops.team+gpu@example.org"]
        {
            assert_eq!(check_owner(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn anything_else_is_refused_with_its_reason() {
        let cases = [
            ("", OwnerError::Empty),
            ("alice", OwnerError::Unknown),
            ("@", OwnerError::BadUser),
            ("@-alice", OwnerError::BadUser),
            ("@alice-", OwnerError::BadUser),
            ("@al--ice", OwnerError::BadUser),
            (&format!("@{}", "a".repeat(40)), OwnerError::BadUser),
            ("@alice\n### Fake summary", OwnerError::BadUser),
            ("@alice <img src=x>", OwnerError::BadUser),
            ("@everyone", OwnerError::MassMention),
            ("@Here", OwnerError::MassMention),
            ("@org/Team", OwnerError::BadTeam),
            ("@org/", OwnerError::BadTeam),
            ("@org/a/b", OwnerError::BadTeam),
            ("@-org/team", OwnerError::BadTeam),
            ("a@b", OwnerError::BadEmail),
            ("a b@example.org", OwnerError::BadEmail),
            ("a@example..org", OwnerError::BadEmail),
            ("*@example.org", OwnerError::BadEmail),
            ("a@-x.org", OwnerError::BadEmail),
        ];
        for (owner, error) in cases {
            assert_eq!(check_owner(owner), Err(error), "{owner:?}");
        }
    }

    #[test]
    fn codeowners_paths_are_escaped_or_refused() {
        let owners = vec!["@org/a".to_string()];
        assert_eq!(codeowners_line("budgets/teams/a.kdl", &owners).unwrap(), "/budgets/teams/a.kdl @org/a");
        assert_eq!(
            codeowners_line("teams/my team#1.kdl", &owners).unwrap(),
            "/teams/my\\ team\\#1.kdl @org/a"
        );
        for path in ["teams/*.kdl", "teams/?.kdl", "teams/[ab].kdl", "a\\b.kdl", "a\nb.kdl", "a\tb.kdl"] {
            assert!(matches!(codeowners_line(path, &owners), Err(CodeownersError::Path { .. })), "{path:?}");
        }
        let forged = vec!["@org/a\n* @attacker".to_string()];
        let error = codeowners_line("teams/a.kdl", &forged).unwrap_err();
        assert!(matches!(error, CodeownersError::Owner { .. }));
        assert!(!error.to_string().contains('\n'), "{error}");
    }
}
