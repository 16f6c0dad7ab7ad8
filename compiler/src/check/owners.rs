//! Owners: every name in a project's `owners` is a GitHub handle (`@user`, `@org/team`)
//! or an e-mail address ([`crate::owners::check_owner`]), since owners reach the pull
//! request comment, the approvers of the diff and the CODEOWNERS file.

use crate::ast::{Budget, walk};
use crate::diagnostic::{Code, Diagnostic};
use crate::escape;
use crate::owners::check_owner;

pub(super) fn check(budget: &Budget, out: &mut Vec<Diagnostic>) {
    walk(&budget.projects, &mut |_, project| {
        for owner in &project.owners {
            if let Err(reason) = check_owner(&owner.value) {
                out.push(
                    Diagnostic::error(
                        Code::OwnerInvalid,
                        format!(
                            "the owner `{}` of `{}` {reason}",
                            escape::line(&owner.value),
                            project.name.value
                        ),
                    )
                    .label(owner.span, "not an owner")
                    .help("write a GitHub handle, `@user` or `@org/team-slug`, or an e-mail address, `name@example.org`"),
                );
            }
        }
    });
}
