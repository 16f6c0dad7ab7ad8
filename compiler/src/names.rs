//! The syntax rules of names: which names every target can carry, and the syntax each
//! scheduler gives the names that reach only it (a Slurm cluster, partition or node list,
//! a GPU type, Kubernetes flavors, resources and node labels, YARN resources). `check` reports
//! names that break them; the targets check them again before they write anything
//! (defence in depth), and the Slurm import refuses to bring such names in.
//!
//! The portable rule is the intersection of the targets' rules: Slurm lower-cases account
//! names, Kubernetes needs DNS-1123 labels (queue names travel in pod labels, at most 63
//! characters), YARN splits queue paths on `.`. (YARN also reserves `root` as a queue name;
//! that is a rule of project names only, in `check`.)
//!
//! Every rule here refuses blanks and control characters, so that no name can end a line
//! of a script, a comment or a configuration file.

pub const MAX_NAME_LEN: usize = 63;
/// The Slurm QOS that work beyond a budget, and unbudgeted work, runs under: the one QOS
/// every contract's QOS may preempt (no contract may take its name).
pub const PREEMPTIBLE_QOS: &str = "preemptible";
/// The longest Kubernetes DNS subdomain (an object name, a label key's prefix).
pub const MAX_SUBDOMAIN_LEN: usize = 253;
/// The longest Slurm cluster name allot writes (Slurm keeps it in a database table name).
pub const MAX_SLURM_CLUSTER_LEN: usize = 40;
/// The longest Slurm node list (`slurm nodes=`) allot writes into a slurm.conf line.
pub const MAX_SLURM_NODES_LEN: usize = 1024;

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

/// Characters Slurm's flat files, `sacctmgr` and YARN's ACLs read as syntax, and the
/// shell's: none may appear in a user or group name.
const MEMBER_SYNTAX: &[char] = &[
    ':', ',', '\'', '"', '=', '#', '\\', '*', '`', '$', ';', '|', '&', '<', '>', '(', ')', '{', '}', '[',
    ']', '!', '?', '~',
];

/// Why a user or group name cannot reach Slurm's association files and YARN's or
/// YuniKorn's ACLs, if it cannot.
pub fn unusable_account_member(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("it is empty")
    } else if name.len() > 255 {
        Some("it is longer than 255 characters")
    } else if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Some("it contains blanks or control characters")
    } else if name.chars().any(|c| MEMBER_SYNTAX.contains(&c)) {
        Some(
            "Slurm's files separate fields with `:`, `,`, `=` and quotes, ACLs read `*` as everyone, and none of `*`, `$`, `;`, `|`, `&`, brackets or quotes belongs in a name",
        )
    } else {
        None
    }
}

/// `[a-z0-9]`, then letters, digits and `extra`, ending with a letter or digit.
fn word(name: &str, upper: bool, extra: &str) -> bool {
    let ok_end = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || (upper && c.is_ascii_uppercase());
    let mut chars = name.chars();
    let (Some(first), Some(last)) = (name.chars().next(), name.chars().last()) else { return false };
    ok_end(first) && ok_end(last) && chars.all(|c| ok_end(c) || extra.contains(c))
}

/// Why `name` cannot be a Slurm cluster name (`slurm cluster=`): it names files allot
/// writes (`<cluster>.cfg`) and the cluster in `sacctmgr`, which lower-cases it.
pub fn bad_slurm_cluster(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("it is empty")
    } else if name.len() > MAX_SLURM_CLUSTER_LEN {
        Some("Slurm cluster names are at most 40 characters")
    } else if !word(name, false, "-_") {
        Some(
            "Slurm cluster names are lower-case letters, digits, `-` and `_`, starting and ending with a letter or digit",
        )
    } else {
        None
    }
}

/// Why `name` cannot be a Slurm partition name (`slurm partition=`), which allot writes into
/// slurm.conf lines.
pub fn bad_slurm_partition(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("it is empty")
    } else if name.len() > MAX_NAME_LEN {
        Some("allot writes partition names of at most 63 characters")
    } else if name.eq_ignore_ascii_case("default") {
        Some("`PartitionName=DEFAULT` sets the defaults of every partition")
    } else if !word(name, true, "-_.") {
        Some(
            "partition names are letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit",
        )
    } else {
        None
    }
}

/// Why `value` cannot be the nodes of a Slurm partition (`slurm nodes=`), which allot writes
/// into `Nodes=` of slurm.conf partition lines: a hostlist expression (`gpu[01-16]`,
/// `a01,b[1-4,7]`), elements of letters, digits, `-`, `_`, `.` and `[...]` ranges
/// separated by `,`, ranges not nested and nothing empty; or `ALL` alone.
pub fn bad_slurm_nodes(value: &str) -> Option<&'static str> {
    if value.is_empty() {
        return Some("it is empty");
    }
    if value.len() > MAX_SLURM_NODES_LEN {
        return Some("allot writes node lists of at most 1024 characters");
    }
    if !value.chars().all(|c| c.is_ascii_alphanumeric() || "-_.,[]".contains(c)) {
        return Some(
            "node lists are hostlist expressions: letters, digits, `-`, `_`, `.`, `,` and `[...]` ranges",
        );
    }
    if value.eq_ignore_ascii_case("all") {
        return None;
    }
    // The `[...]` ranges: closed, not nested, none empty (`[]`, `[1,]`).
    let mut open = false;
    let mut range_empty = true;
    for c in value.chars() {
        match (c, open) {
            ('[', true) => return Some("`[...]` ranges do not nest"),
            (']', false) => return Some("a `]` closes no `[`"),
            ('[', false) => (open, range_empty) = (true, true),
            (']' | ',', true) if range_empty => {
                return Some(
                    "a `[...]` range is empty (`[]`, or a leading, trailing or doubled `,` inside it)",
                );
            }
            (']', true) => open = false,
            (',', true) => range_empty = true,
            (_, true) => range_empty = false,
            _ => {}
        }
    }
    if open {
        return Some("a `[` range is not closed with `]`");
    }
    // The elements: split on the `,` outside ranges.
    let mut elements = Vec::new();
    let mut start = 0;
    for (i, c) in value.char_indices() {
        match c {
            '[' => open = true,
            ']' => open = false,
            ',' if !open => {
                elements.push(&value[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    elements.push(&value[start..]);
    if elements.iter().any(|e| e.is_empty()) {
        Some("an element of the node list is empty (a leading, trailing or doubled `,`)")
    } else if elements.len() > 1 && elements.iter().any(|e| e.eq_ignore_ascii_case("all")) {
        Some("`ALL` (every node) stands alone, not in a list")
    } else {
        None
    }
}

/// Why `name` cannot be a GPU type (`gpu-type=`): a Slurm GRES type and, unless the
/// binding names a flavor, a Kubernetes flavor.
pub fn bad_gpu_type(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("it is empty")
    } else if name.len() > MAX_NAME_LEN {
        Some("GPU types are at most 63 characters")
    } else if !word(name, true, "-_.") {
        Some("GPU types are letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit")
    } else {
        None
    }
}

/// Why `name` is not a DNS-1123 subdomain (Kubernetes object names such as a Kueue
/// ResourceFlavor; the prefix of a label key or resource name).
pub fn bad_subdomain(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("it is empty")
    } else if name.len() > MAX_SUBDOMAIN_LEN {
        Some("Kubernetes object names (DNS subdomains) are at most 253 characters")
    } else if !name.split('.').all(|label| word(label, false, "-")) {
        Some(
            "Kubernetes object names (DNS subdomains) are lower-case letters, digits, `-` and `.`, each part starting and ending with a letter or digit",
        )
    } else {
        None
    }
}

/// Why `name` is not a Kubernetes qualified name (a label key, a resource name):
/// an optional DNS-subdomain prefix and `/`, then at most 63 letters, digits, `-`, `_`
/// and `.`, starting and ending with a letter or digit.
pub fn bad_qualified_name(name: &str) -> Option<&'static str> {
    let (prefix, short) = match name.split_once('/') {
        Some((prefix, short)) => (Some(prefix), short),
        None => (None, name),
    };
    if let Some(prefix) = prefix
        && let Some(why) = bad_subdomain(prefix)
    {
        return Some(match why {
            "it is empty" => "the prefix before `/` is empty",
            _ => "the prefix before `/` must be a DNS subdomain: lower-case letters, digits, `-` and `.`",
        });
    }
    if short.is_empty() {
        Some("the name after the prefix is empty")
    } else if short.len() > MAX_NAME_LEN {
        Some("the name after the prefix is at most 63 characters")
    } else if !word(short, true, "-_.") {
        Some(
            "the name is letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit (after an optional `prefix/`)",
        )
    } else {
        None
    }
}

/// Why `value` is not a Kubernetes label value: empty, or at most 63 letters, digits, `-`,
/// `_` and `.`, starting and ending with a letter or digit.
pub fn bad_label_value(value: &str) -> Option<&'static str> {
    if value.is_empty() {
        None
    } else if value.len() > MAX_NAME_LEN {
        Some("label values are at most 63 characters")
    } else if !word(value, true, "-_.") {
        Some("label values are letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit")
    } else {
        None
    }
}

/// Why `label` is not a Kubernetes node label `key=value`.
pub fn bad_node_label(label: &str) -> Option<&'static str> {
    let Some((key, value)) = label.split_once('=') else {
        return Some("a node label is written `key=value`");
    };
    bad_qualified_name(key).or_else(|| bad_label_value(value))
}

/// Why `name` is not a Kubernetes resource name (`nvidia.com/gpu`): a qualified name;
/// extended resources need the prefix.
pub fn bad_kubernetes_resource(name: &str) -> Option<&'static str> {
    if !name.contains('/') {
        return Some("extended resources are written `domain/name`, e.g. `nvidia.com/gpu`");
    }
    bad_qualified_name(name)
}

/// Why `name` is not a YARN resource type (`yarn.io/gpu`): an optional prefix of
/// `.`-separated letters, digits and `-` and `/`, then a letter and letters, digits, `.`,
/// `_` and `-`.
pub fn bad_yarn_resource(name: &str) -> Option<&'static str> {
    let (prefix, short) = name.rsplit_once('/').unwrap_or(("", name));
    let prefix_ok = prefix.is_empty()
        || prefix
            .split('.')
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
    let mut chars = short.chars();
    let short_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if name.len() > MAX_SUBDOMAIN_LEN {
        Some("resource type names are at most 253 characters")
    } else if !prefix_ok {
        Some("the prefix before `/` is `.`-separated letters, digits and `-`")
    } else if !short_ok {
        Some(
            "YARN resource types start with a letter, then letters, digits, `.`, `_` and `-` (after an optional `prefix/`)",
        )
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

    #[test]
    fn members() {
        for ok in ["alice", "ml-staff", "bob.smith", "svc_1", "alice@example.org"] {
            assert_eq!(unusable_account_member(ok), None, "{ok}");
        }
        for bad in ["", "a b", "a\nb", "a'b", "a:b", "*", "a$(id)", "a;b", "a`b`", "a\tb"] {
            assert!(unusable_account_member(bad).is_some(), "{bad:?}");
        }
    }

    #[test]
    fn slurm_names() {
        for ok in ["jupiter", "tern", "c-1", "my_cluster"] {
            assert_eq!(bad_slurm_cluster(ok), None, "{ok}");
        }
        for bad in ["", "Jupiter", "a\nrm -rf /", "../x", "a/b", "a b", "a'", &"x".repeat(41)] {
            assert!(bad_slurm_cluster(bad).is_some(), "{bad:?}");
        }
        for ok in ["gpu", "a100", "GPU_big", "h100.long"] {
            assert_eq!(bad_slurm_partition(ok), None, "{ok}");
        }
        for bad in ["", "DEFAULT", "default", "gpu\nPartitionName=evil", "a b", "a=b", "a#b", "a,b"] {
            assert!(bad_slurm_partition(bad).is_some(), "{bad:?}");
        }
        for ok in [
            "gpu[01-16]",
            "ALL",
            "all",
            "All",
            "node1",
            "gpu01,gpu02",
            "a100-[1-4,7],h100_x[01-08]",
            "rack[1-2]n[01-10]",
            "n1.example.org",
            &"n".repeat(1024),
        ] {
            assert_eq!(bad_slurm_nodes(ok), None, "{ok}");
        }
        for bad in [
            "",
            "gpu[01-16]\nPartitionName=evil",
            "gpu01\n",
            "gpu01#comment",
            "gpu01 gpu02",
            "Nodes=x PriorityTier=9",
            "gpu=01",
            "gpu\"01",
            "gpu'01",
            "gpu[01-16",
            "gpu01-16]",
            "gpu]01[",
            "gpu[0[1-2]]",
            "gpu[[01-02]]",
            "gpu[]",
            "gpu[,01]",
            "gpu[01,]",
            "gpu[01,,02]",
            ",gpu01",
            "gpu01,",
            "gpu01,,gpu02",
            ",",
            "ALL,gpu01",
            "gpu01\t",
            "gpü01",
            "gpu*",
            "gpu01;reboot",
            &"n".repeat(1025),
        ] {
            assert!(bad_slurm_nodes(bad).is_some(), "{bad:?}");
        }
        for ok in ["h100", "a100-80gb", "L40S", "gb200.nvl"] {
            assert_eq!(bad_gpu_type(ok), None, "{ok}");
        }
        for bad in ["", "h'100", "h100\n", "h 100", "a:b"] {
            assert!(bad_gpu_type(bad).is_some(), "{bad:?}");
        }
    }

    #[test]
    fn kubernetes_names() {
        for ok in ["h100", "h100.large", "a-b.c-d"] {
            assert_eq!(bad_subdomain(ok), None, "{ok}");
        }
        for bad in ["", "H100", "a..b", "-a", "a_b", "a/b", &"x".repeat(254)] {
            assert!(bad_subdomain(bad).is_some(), "{bad:?}");
        }
        for ok in ["nvidia.com/gpu", "amd.com/gpu", "example.org/Big_GPU.v2"] {
            assert_eq!(bad_kubernetes_resource(ok), None, "{ok}");
        }
        for bad in
            ["gpu", "nvidia.com/", "/gpu", "Nvidia.com/gpu", "nvidia.com/gpu\n", "a/b/c", "nvidia.com/g pu"]
        {
            assert!(bad_kubernetes_resource(bad).is_some(), "{bad:?}");
        }
        for ok in ["node.kubernetes.io/instance-type=g5.12xlarge", "gpu=", "accelerator=H100_SXM"] {
            assert_eq!(bad_node_label(ok), None, "{ok}");
        }
        for bad in
            ["nolabel", "my label=x", "a=b c", "a=-b", "=x", "a=b\nc", &format!("a={}", "x".repeat(64))]
        {
            assert!(bad_node_label(bad).is_some(), "{bad:?}");
        }
    }

    #[test]
    fn yarn_resources() {
        for ok in ["yarn.io/gpu", "gpu", "example.com/fpga-1"] {
            assert_eq!(bad_yarn_resource(ok), None, "{ok}");
        }
        for bad in ["", "yarn.io/", "1gpu", "yarn.io/gpu=1", "yarn.io/gpu,x", "a]b"] {
            assert!(bad_yarn_resource(bad).is_some(), "{bad:?}");
        }
    }
}
