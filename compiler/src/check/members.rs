//! Members: a user in several projects has exactly one default project (Slurm's
//! DefaultAccount; the verifier bills unlabelled jobs there).

use std::collections::{BTreeMap, BTreeSet};

use crate::ast::{Budget, Member, walk};
use crate::diagnostic::{Code, Diagnostic};
use crate::source::Span;

/// A user's memberships, one per project and default flag, and the distinct projects
/// (known by their names' spans) among them.
type Memberships<'a> = (Vec<(&'a str, &'a Member)>, BTreeSet<Span>);

pub(super) fn check(budget: &Budget, out: &mut Vec<Diagnostic>) {
    let mut memberships: BTreeMap<&str, Memberships> = BTreeMap::new();
    let mut seen = BTreeSet::new();
    walk(&budget.projects, &mut |_, project| {
        for member in &project.users {
            if seen.insert((member.name.value.as_str(), project.name.span, member.default)) {
                let (projects, distinct) = memberships.entry(member.name.value.as_str()).or_default();
                projects.push((project.name.value.as_str(), member));
                distinct.insert(project.name.span);
            }
        }
    });
    for (user, (projects, distinct)) in memberships {
        if distinct.len() < 2 {
            continue;
        }
        let defaults: Vec<_> = projects.iter().filter(|(_, m)| m.default).collect();
        match defaults.as_slice() {
            [] => {
                let (first_project, first) = projects[0];
                let (second_project, second) = projects[1];
                out.push(
                    Diagnostic::error(Code::MemberNoDefault, format!("user `{user}` is in {} projects and none is the default", distinct.len()))
                        .label(second.name.span, format!("in `{second_project}`"))
                        .label(first.name.span, format!("in `{first_project}`"))
                        .help(format!("list `{user}` on a `users ... default=#true` line in the project that should bill jobs naming no project")),
                );
            }
            [_] => {}
            [(first_project, first), rest @ ..] => {
                for (project, member) in rest {
                    out.push(
                        Diagnostic::error(
                            Code::MemberConflictingDefault,
                            format!("user `{user}` has more than one default project"),
                        )
                        .label(member.name.span, format!("default in `{project}`"))
                        .label(first.name.span, format!("default in `{first_project}`"))
                        .help("keep `default=#true` for this user in one project only"),
                    );
                }
            }
        }
    }
}
