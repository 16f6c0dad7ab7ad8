//! The syntax rules of names: which names every target can carry. `check` reports names
//! that break them; the Slurm import refuses to bring such names in.
//!
//! The rule is the intersection of the targets' rules: Slurm lower-cases account names,
//! Kubernetes needs DNS-1123 labels (queue names travel in pod labels, at most 63
//! characters), YARN splits queue paths on `.`. (YARN also reserves `root` as a queue name;
//! that is a rule of project names only, in `check`.)

pub const MAX_NAME_LEN: usize = 63;

/// Why a name is not portable, if it is not.
pub fn unportable(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("it is empty");
    }
    if name.len() > MAX_NAME_LEN {
        return Some("Kubernetes label values are at most 63 characters");
    }
    if name.chars().any(|c| c.is_ascii_uppercase()) {
        return Some("Slurm lower-cases names and Kubernetes names are lower case");
    }
    if name.contains('.') {
        return Some("YARN reads `.` as a queue path separator");
    }
    if !name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-') {
        return Some("Kubernetes names (DNS-1123 labels) allow only `a-z`, `0-9` and `-`");
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Some("Kubernetes names must start and end with a letter or digit");
    }
    None
}

/// A portable name close to `name`.
pub fn portable_form(name: &str) -> String {
    let mapped: String = name
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_lowercase() || c.is_ascii_digit() { c } else { '-' })
        .collect();
    let mut out = String::new();
    for c in mapped.chars() {
        if !(c == '-' && (out.is_empty() || out.ends_with('-'))) {
            out.push(c);
        }
    }
    out.truncate(MAX_NAME_LEN);
    out.trim_end_matches('-').to_string()
}

/// Why a user or group name cannot reach Slurm's association files, if it cannot.
pub fn unusable_account_member(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("it is empty")
    } else if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Some("it contains blanks")
    } else if name.chars().any(|c| matches!(c, ':' | ',' | '\'' | '"' | '=' | '#' | '\\')) {
        Some("Slurm's files separate fields with `:`, `,`, `=` and quotes")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn portable_names() {
        for ok in ["a", "olmo", "team-7", "a1-b2", &"x".repeat(63)] {
            assert_eq!(unportable(ok), None, "{ok}");
        }
        for bad in ["", "Olmo", "a.b", "a_b", "-a", "a-", "é", &"x".repeat(64)] {
            assert!(unportable(bad).is_some(), "{bad}");
        }
        assert_eq!(portable_form("Vision.Team"), "vision-team");
        assert_eq!(portable_form("nlp__group_"), "nlp-group");
    }
}
