//! Text that reaches native files, in one place: words for the shell, comment lines, and the
//! re-check of every name a target writes against the rules of [`allot_compiler::names`].
//!
//! `allot check` refuses names outside their scheduler's syntax; the emitters do not trust
//! that: what they put in a script is a quoted shell word, what they put in a comment cannot
//! end the line, and each target checks the names it writes once more as it emits them, so
//! that `allot build` writes nothing when a model that skipped the checks carries such a
//! name.

use allot_compiler::ir::{Location, Model};
use allot_compiler::{escape, names};

use crate::Violation;

/// A word the shell reads as itself: as it is when plain, else single-quoted.
pub fn shell_word(word: &str) -> String {
    let plain =
        !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "._@/=,+-:%".contains(c));
    if plain { word.to_string() } else { format!("'{}'", word.replace('\'', "'\\''")) }
}

/// Text for one comment line (`# ...` in a script or slurm.conf, `<!-- ... -->` in XML):
/// control characters, line breaks first, written as escapes (`\n`, `\u{1b}`), so that no
/// text can end the comment's line and start a line of its own.
pub fn comment(text: &str) -> String {
    escape::line(text)
}

/// Why `text` cannot be written on one line of a native file, if it cannot.
pub fn unwritable(text: &str) -> Option<&'static str> {
    text.chars()
        .any(escape::is_hidden)
        .then_some("it holds a line break, a control or a bidirectional character")
}

/// A rule of [`allot_compiler::names`]: why a name breaks it, if it does.
pub type Rule = fn(&str) -> Option<&'static str>;

/// A name checked by a [`Rule`], from the KDL at `source`.
pub struct Named<'a> {
    pub what: &'static str,
    pub value: &'a str,
    pub source: Option<&'a Location>,
}

/// A violation of `path` for each name its rule refuses.
pub fn refused<'a>(path: &str, names: impl IntoIterator<Item = (Named<'a>, Rule)>) -> Vec<Violation> {
    names
        .into_iter()
        .filter_map(|(named, rule)| {
            let why = rule(named.value)?;
            Some(Violation::at(
                path,
                format!("`{}` cannot be {}: {why}", named.value.escape_debug(), named.what),
                named.source.into_iter().cloned().collect(),
            ))
        })
        .collect()
}

/// The names targets write: clusters, projects, contracts and namespaces (portable), users
/// and groups (usable in accounts and ACLs).
pub fn model_names(path: &str, model: &Model) -> Vec<Violation> {
    let mut out = Vec::new();
    let projects = model.projects_by_path();
    for (project, _) in projects.values() {
        let at = Some(&project.source);
        let mut names: Vec<(Named, Rule)> =
            vec![(Named { what: "a project name", value: &project.name, source: at }, names::unportable)];
        for namespace in &project.namespaces {
            names.push((Named { what: "a namespace", value: namespace, source: at }, names::unportable));
        }
        for user in &project.users {
            names.push((
                Named { what: "a user name", value: &user.name, source: at },
                names::unusable_account_member,
            ));
        }
        for group in &project.groups {
            names.push((
                Named { what: "a group name", value: group, source: at },
                names::unusable_account_member,
            ));
        }
        out.extend(refused(path, names));
    }
    for contract in &model.contracts {
        let named = Named { what: "a contract name", value: &contract.name, source: Some(&contract.source) };
        out.extend(refused(path, [(named, names::unportable as Rule)]));
    }
    for cluster in &model.clusters {
        let named = Named { what: "a cluster name", value: &cluster.name, source: Some(&cluster.source) };
        out.extend(refused(path, [(named, names::unportable as Rule)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_stay_one_word() {
        assert_eq!(shell_word("jupiter"), "jupiter");
        assert_eq!(shell_word(""), "''");
        assert_eq!(shell_word("a b"), "'a b'");
        assert_eq!(shell_word("x\nrm -rf /"), "'x\nrm -rf /'");
        assert_eq!(shell_word("it's"), "'it'\\''s'");
        assert_eq!(shell_word("$(id)"), "'$(id)'");
    }

    #[test]
    fn comments_stay_on_their_line() {
        assert_eq!(comment("cluster jupiter"), "cluster jupiter");
        let hostile = comment("x\nrm -rf /\r\u{2028}\u{1b}[2J");
        assert!(!hostile.chars().any(escape::is_hidden), "{hostile}");
        assert_eq!(comment("a\nb"), "a\\nb");
        assert!(unwritable("a\nb").is_some());
        assert!(unwritable("a b").is_none());
    }
}
