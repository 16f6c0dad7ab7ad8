//! Lowering: KDL documents to the [`Budget`] syntax tree ([`crate::ast`]), following
//! includes through a [`Loader`]. Reports everything about the shape of the files (unknown nodes and
//! properties, missing and wrongly typed values, bad durations and percentages, include
//! problems, size limits); the meaning of the values is `check`'s business.

use std::collections::BTreeMap;

use kdl::{KdlDocument, KdlEntry, KdlNode, KdlValue};

use crate::ast::*;
use crate::diagnostic::{Code, Diagnostic, did_you_mean};
use crate::source::{FileId, LoadError, Loader, SourceFile, Sources, Span, Spanned, resolve_include};
use crate::syntax;
use crate::units::{Instant, MAX_DURATION, Seconds, parse_duration, parse_instant, parse_percent};

/// Deepest project tree, includes followed.
pub const MAX_PROJECT_DEPTH: usize = 32;
/// Most files in one repository.
pub const MAX_FILES: usize = 1000;

/// What lowering a repository produced.
#[derive(Debug)]
pub struct Lowered {
    pub sources: Sources,
    pub budget: Budget,
    pub diagnostics: Vec<Diagnostic>,
    /// Every file could be read and parsed: checks of the whole tree would mislead when a
    /// file is missing from it.
    pub complete: bool,
}

/// Reads the repository from `entry` and lowers it into a tree.
pub fn lower(loader: &dyn Loader, entry: &str) -> Lowered {
    let mut lowering = Lowering {
        loader,
        sources: Sources::default(),
        diagnostics: Vec::new(),
        included: BTreeMap::new(),
        stack: Vec::new(),
        complete: true,
    };
    let mut budget = Budget::default();
    if let Some((file, doc)) = lowering.read(entry, None) {
        budget.origin = Some(Span { file, offset: 0, len: 0 });
        lowering.stack.push(entry.to_string());
        lowering.entry_file(file, &doc, &mut budget);
    }
    Lowered {
        sources: lowering.sources,
        budget,
        diagnostics: lowering.diagnostics,
        complete: lowering.complete,
    }
}

struct Lowering<'l> {
    loader: &'l dyn Loader,
    sources: Sources,
    diagnostics: Vec<Diagnostic>,
    /// Every included file and the include that brought it in.
    included: BTreeMap<String, Span>,
    /// The chain of files being lowered, for cycle detection.
    stack: Vec<String>,
    /// No file failed to load or parse.
    complete: bool,
}

const TOP_LEVEL: &[&str] = &["cluster", "policy", "contract", "project", "include", "expect"];
const INCLUDED_TOP_LEVEL: &[&str] = &["project", "include"];
const PROJECT_CHILDREN: &[&str] = &[
    "project",
    "include",
    "users",
    "groups",
    "namespaces",
    "owners",
    "clusters",
    "contracts",
    "on",
    "grant",
];

impl Lowering<'_> {
    fn push(&mut self, diagnostic: Diagnostic) {
        self.diagnostics.push(diagnostic);
    }

    fn too_large(&mut self, what: &str, size: u64, via: Option<Span>, name: &str) {
        let d = Diagnostic::error(
            Code::SizeFileTooLarge,
            format!("{what} has {size} bytes; allot reads files of at most 1 MiB"),
        )
        .help("split the tree over several files with `include`");
        self.push(at(d, via, "included here", name));
        self.complete = false;
    }

    /// Loads and parses one file; `via` is the include that named it.
    ///
    /// A missing included file leaves a hole in the tree that checks can work around; an
    /// unreadable or unparsable one does not.
    fn read(&mut self, path: &str, via: Option<Span>) -> Option<(FileId, KdlDocument)> {
        let name = self.loader.display_name(path);
        if self.sources.len() >= MAX_FILES {
            let d = Diagnostic::error(Code::SizeTooManyFiles, format!("more than {MAX_FILES} files"))
                .help("allot reads at most 1,000 files per repository; merge small files");
            self.push(at(d, via, "this include is one too many", &name));
            return None;
        }
        let what = if via.is_some() { format!("`{name}`") } else { "the file".to_string() };
        let bytes = match self.loader.load(path) {
            Ok(bytes) => bytes,
            Err(LoadError::TooLarge(size)) => {
                self.too_large(&what, size, via, &name);
                return None;
            }
            Err(error) => {
                let (code, text) = match (&error, via) {
                    (LoadError::Outside(_), Some(_)) => {
                        (Code::IncludeOutside, format!("cannot read included file `{name}`: {error}"))
                    }
                    (_, Some(_)) => {
                        (Code::IncludeMissing, format!("cannot read included file `{name}`: {error}"))
                    }
                    (LoadError::NotFound, None) => (Code::SourceUnreadable, "no such file".to_string()),
                    (_, None) => (Code::SourceUnreadable, error.to_string()),
                };
                let help = if matches!(error, LoadError::Outside(_)) {
                    "a symbolic link may lead only to a file inside the repository, outside `.git`"
                } else if via.is_some() {
                    "include paths are relative to the file that holds the include"
                } else {
                    "pass a budget repository folder holding `allot.kdl`, or the entry file itself"
                };
                self.push(at(Diagnostic::error(code, text).help(help), via, "included here", &name));
                self.complete &= via.is_some();
                return None;
            }
        };
        if bytes.len() > syntax::MAX_FILE_BYTES {
            self.too_large(&what, bytes.len() as u64, via, &name);
            return None;
        }
        let text = match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(error) => {
                let offset = error.utf8_error().valid_up_to();
                let d = Diagnostic::error(
                    Code::SourceUnreadable,
                    format!("{what} is not UTF-8 text (invalid byte at offset {offset})"),
                )
                .help("KDL files are UTF-8; re-save the file as UTF-8");
                self.push(at(d, via, "included here", &name));
                self.complete = false;
                return None;
            }
        };
        let file = self.sources.add(SourceFile::new(path.to_string(), name, text.into()));
        let text = self.sources.get(file).map(|f| f.text.clone()).unwrap_or_default();
        match syntax::parse(file, &text) {
            Ok(doc) => Some((file, doc)),
            Err(diagnostics) => {
                self.diagnostics.extend(diagnostics);
                self.complete = false;
                None
            }
        }
    }

    fn entry_file(&mut self, file: FileId, doc: &KdlDocument, budget: &mut Budget) {
        let mut policy_seen = None;
        let mut expect_seen = None;
        for node in doc.nodes() {
            let name = node.name().value();
            match name {
                "cluster" => {
                    if let Some(cluster) = self.cluster(file, node) {
                        budget.clusters.push(cluster);
                    }
                }
                "policy" => {
                    if self.once(file, node, &mut policy_seen) {
                        budget.policy = self.policy(file, node);
                    }
                }
                "contract" => {
                    if let Some(contract) = self.contract(file, node) {
                        budget.contracts.push(contract);
                    }
                }
                "project" => {
                    if let Some(project) = self.project(file, node, 1) {
                        budget.projects.push(project);
                    }
                }
                "include" => {
                    let projects = self.include(file, node, 1);
                    budget.projects.extend(projects);
                }
                "expect" => {
                    if self.once(file, node, &mut expect_seen) {
                        budget.expectations = self.expect(file, node);
                    }
                }
                _ => self.unknown_node(file, node, TOP_LEVEL, "at the top level"),
            }
        }
    }

    /// True the first time; a duplicate-node error after.
    fn once(&mut self, file: FileId, node: &KdlNode, seen: &mut Option<Span>) -> bool {
        let span = name_span(file, node);
        if let Some(first) = seen {
            let d = Diagnostic::error(
                Code::SyntaxDuplicateNode,
                format!("`{}` may appear only once here", node.name().value()),
            )
            .label(span, "second one")
            .label(*first, "first one")
            .help("merge the two into one node");
            self.push(d);
            return false;
        }
        *seen = Some(span);
        true
    }

    fn unknown_node(&mut self, file: FileId, node: &KdlNode, known: &[&str], place: &str) {
        let name = node.name().value();
        let help = did_you_mean(name, known.iter().copied())
            .unwrap_or_else(|| format!("known here: {}", known.join(", ")));
        let d = Diagnostic::error(Code::SyntaxUnknownNode, format!("unknown node `{name}` {place}"))
            .label(name_span(file, node), "not known here")
            .help(help);
        self.push(d);
    }

    fn entries<'n>(
        &mut self,
        file: FileId,
        node: &'n KdlNode,
        max_args: usize,
        known: &[&str],
    ) -> Entries<'n> {
        let mut entries = Entries { file, node, args: Vec::new(), props: BTreeMap::new() };
        for entry in node.entries() {
            let span = Span::new(file, entry.span());
            match entry.name() {
                None => {
                    if entries.args.len() == max_args {
                        let what = match max_args {
                            0 => format!("`{}` takes no arguments", node.name().value()),
                            1 => format!("`{}` takes one argument", node.name().value()),
                            n => format!("`{}` takes {n} arguments", node.name().value()),
                        };
                        let d = Diagnostic::error(Code::SyntaxExtraArgument, what)
                            .label(span, "unexpected argument")
                            .help(if known.is_empty() {
                                "remove it".to_string()
                            } else {
                                format!(
                                    "properties are written `key=value`; this node takes {}",
                                    known.join(", ")
                                )
                            });
                        self.push(d);
                    } else {
                        entries.args.push(entry);
                    }
                }
                Some(key) => {
                    let key = key.value();
                    if !known.contains(&key) {
                        let help = did_you_mean(key, known.iter().copied()).unwrap_or_else(|| {
                            if known.is_empty() {
                                "this node takes no properties".to_string()
                            } else {
                                format!("`{}` takes {}", node.name().value(), known.join(", "))
                            }
                        });
                        let d = Diagnostic::error(
                            Code::SyntaxUnknownProperty,
                            format!("unknown property `{key}` on `{}`", node.name().value()),
                        )
                        .label(span, "not known here")
                        .help(help);
                        self.push(d);
                    } else if let Some(first) = entries.props.get(key) {
                        let d = Diagnostic::error(
                            Code::SyntaxDuplicateProperty,
                            format!("`{key}` is given twice"),
                        )
                        .label(span, "second value")
                        .label(Span::new(file, first.span()), "first value")
                        .help("keep one of them");
                        self.push(d);
                    } else {
                        entries.props.insert(key, entry);
                    }
                }
            }
        }
        entries
    }

    fn no_children(&mut self, file: FileId, node: &KdlNode) {
        if let Some(child) = children(node).first() {
            let d = Diagnostic::error(
                Code::SyntaxUnknownNode,
                format!("`{}` takes no children", node.name().value()),
            )
            .label(name_span(file, child), "not expected here")
            .help("remove the braces and what they hold");
            self.push(d);
        }
    }

    fn cluster(&mut self, file: FileId, node: &KdlNode) -> Option<Cluster> {
        let e = self.entries(file, node, 1, &["gpus", "gpu-type", "gpus-per-node"]);
        let name = e.name_arg(self, "cluster")?;
        let mut cluster = Cluster {
            name,
            gpus: e.count(self, "gpus", true, 1),
            gpu_type: e.string(self, "gpu-type", true),
            gpus_per_node: e.count(self, "gpus-per-node", false, 1),
            slurm: None,
            kubernetes: None,
            yarn: None,
            span: header_span(file, node),
        };
        let (mut slurm_seen, mut kubernetes_seen, mut yarn_seen) = (None, None, None);
        for child in children(node) {
            match child.name().value() {
                "slurm" => {
                    let e = self.entries(file, child, 0, &["cluster", "partition", "nodes"]);
                    let binding = SlurmBinding {
                        cluster: e.string(self, "cluster", false),
                        partition: e.string(self, "partition", false),
                        nodes: e.string(self, "nodes", false),
                        span: header_span(file, child),
                    };
                    self.no_children(file, child);
                    if self.once(file, child, &mut slurm_seen) {
                        cluster.slurm = Some(binding);
                    }
                }
                "kubernetes" => {
                    let e = self.entries(file, child, usize::MAX, &["flavor", "resource", "node-label"]);
                    let options = KubernetesScheduler::ALL.map(|k| (k.as_str(), k));
                    let schedulers = e.choice_args(self, "scheduler", &options);
                    let binding = KubernetesBinding {
                        schedulers,
                        flavor: e.string(self, "flavor", false),
                        resource: e.string(self, "resource", false),
                        node_label: e.string(self, "node-label", false),
                        span: header_span(file, child),
                    };
                    self.no_children(file, child);
                    if self.once(file, child, &mut kubernetes_seen) {
                        cluster.kubernetes = Some(binding);
                    }
                }
                "yarn" => {
                    let e = self.entries(
                        file,
                        child,
                        usize::MAX,
                        &["resource", "capacity-mode", "node-memory-mb", "node-vcores"],
                    );
                    let options = YarnScheduler::ALL.map(|y| (y.as_str(), y));
                    let schedulers = e.choice_args(self, "scheduler", &options);
                    let modes = CapacityMode::ALL.map(|m| (m.as_str(), m));
                    let capacity_mode = e.choice(self, "capacity-mode", &modes);
                    let absolute = capacity_mode.as_ref().is_some_and(|m| m.value == CapacityMode::Absolute);
                    let binding = YarnBinding {
                        schedulers,
                        resource: e.string(self, "resource", false),
                        capacity_mode,
                        node_memory_mb: e.count(self, "node-memory-mb", absolute, 1),
                        node_vcores: e.count(self, "node-vcores", absolute, 1),
                        span: header_span(file, child),
                    };
                    self.no_children(file, child);
                    if self.once(file, child, &mut yarn_seen) {
                        cluster.yarn = Some(binding);
                    }
                }
                _ => self.unknown_node(file, child, &["slurm", "kubernetes", "yarn"], "in a cluster"),
            }
        }
        Some(cluster)
    }

    fn policy(&mut self, file: FileId, node: &KdlNode) -> Policy {
        let e = self.entries(file, node, 0, &["window", "unbudgeted", "overflow", "overcommit", "max-grant"]);
        let rules = WorkRule::ALL.map(|r| (r.as_str(), r));
        self.no_children(file, node);
        Policy {
            window: e.duration(self, "window", false, 1),
            unbudgeted: e.choice(self, "unbudgeted", &rules),
            overflow: e.choice(self, "overflow", &rules),
            overcommit: e.flag(self, "overcommit"),
            max_grant: e.duration(self, "max-grant", false, 1),
            span: Some(header_span(file, node)),
        }
    }

    fn contract(&mut self, file: FileId, node: &KdlNode) -> Option<Contract> {
        let e = self.entries(
            file,
            node,
            1,
            &["min-runtime", "max-runtime", "resumable", "max-gpus", "reserve", "default"],
        );
        self.no_children(file, node);
        Some(Contract {
            name: e.name_arg(self, "contract")?,
            min_runtime: e.duration(self, "min-runtime", true, 0),
            max_runtime: e.duration(self, "max-runtime", false, 1),
            resumable: e.flag(self, "resumable"),
            max_gpus: e.count(self, "max-gpus", false, 1),
            reserve: e.count(self, "reserve", false, 1),
            default: e.flag(self, "default"),
            span: header_span(file, node),
        })
    }

    fn project(&mut self, file: FileId, node: &KdlNode, depth: usize) -> Option<Project> {
        let e = self.entries(file, node, 1, &["share", "max-gpus", "overcommit"]);
        let name = e.name_arg(self, "project")?;
        let mut project = Project {
            share: e.share(self, "share", true),
            max_gpus: e.count(self, "max-gpus", false, 0),
            overcommit: e.flag(self, "overcommit"),
            name,
            users: Vec::new(),
            groups: Vec::new(),
            namespaces: Vec::new(),
            owners: Vec::new(),
            clusters: None,
            contracts: None,
            overrides: Vec::new(),
            grants: Vec::new(),
            children: Vec::new(),
            span: header_span(file, node),
        };
        if depth > MAX_PROJECT_DEPTH {
            let d = Diagnostic::error(
                Code::SizeTooDeep,
                format!("the project tree is deeper than {MAX_PROJECT_DEPTH} levels"),
            )
            .label(project.name.span, format!("level {depth}"))
            .help("flatten the tree; no scheduler benefits from this depth");
            self.push(d);
            return Some(project);
        }
        let (mut clusters_seen, mut contracts_seen) = (None, None);
        let mut overrides_seen: BTreeMap<String, Option<Span>> = BTreeMap::new();
        for child in children(node) {
            match child.name().value() {
                "project" => {
                    if let Some(p) = self.project(file, child, depth + 1) {
                        project.children.push(p);
                    }
                }
                "include" => {
                    let projects = self.include(file, child, depth + 1);
                    project.children.extend(projects);
                }
                "users" => {
                    let e = self.entries(file, child, usize::MAX, &["default"]);
                    let default = e.flag(self, "default").is_some_and(|f| f.value);
                    let names = e.string_args(self, "a user name");
                    project.users.extend(names.into_iter().map(|name| Member { name, default }));
                    self.no_children(file, child);
                }
                list @ ("groups" | "namespaces" | "owners") => {
                    let e = self.entries(file, child, usize::MAX, &[]);
                    let names = e.string_args(self, &format!("a name in `{list}`"));
                    match list {
                        "groups" => project.groups.extend(names),
                        "namespaces" => project.namespaces.extend(names),
                        _ => project.owners.extend(names),
                    }
                    self.no_children(file, child);
                }
                "clusters" => {
                    let e = self.entries(file, child, usize::MAX, &[]);
                    let names = e.string_args(self, "a cluster name");
                    self.no_children(file, child);
                    if self.once(file, child, &mut clusters_seen) {
                        project.clusters = Some(names);
                    }
                }
                "contracts" => {
                    let e = self.entries(file, child, usize::MAX, &[]);
                    let names = e.string_args(self, "a contract name");
                    self.no_children(file, child);
                    if self.once(file, child, &mut contracts_seen) {
                        project.contracts = Some(names);
                    }
                }
                "on" => {
                    let e = self.entries(file, child, 1, &["share", "max-gpus"]);
                    self.no_children(file, child);
                    let cluster = e.name_arg(self, "cluster");
                    let seen = cluster.as_ref().map(|c| overrides_seen.entry(c.value.clone()).or_default());
                    if let Some(seen) = seen
                        && !self.once(file, child, seen)
                    {
                        continue;
                    }
                    if let Some(cluster) = cluster {
                        let share = e.share(self, "share", false);
                        let max_gpus = e.count(self, "max-gpus", false, 0);
                        if share.is_none() && max_gpus.is_none() && e.props.is_empty() {
                            let d = Diagnostic::error(
                                Code::SyntaxMissingValue,
                                "`on` needs `share` or `max-gpus`",
                            )
                            .label(header_span(file, child), "overrides nothing")
                            .help("write e.g. `on saturn share=\"10%\"`");
                            self.push(d);
                        }
                        project.overrides.push(ClusterOverride {
                            cluster,
                            share,
                            max_gpus,
                            span: header_span(file, child),
                        });
                    }
                }
                "grant" => {
                    let grant = self.grant(file, child);
                    project.grants.push(grant);
                }
                _ => self.unknown_node(file, child, PROJECT_CHILDREN, "in a project"),
            }
        }
        Some(project)
    }

    /// `grant share="+10%" from=DATE until=DATE reason="..." cluster=NAME`, or
    /// `guaranteed-gpus=N` for the share.
    fn grant(&mut self, file: FileId, node: &KdlNode) -> Grant {
        let e =
            self.entries(file, node, 0, &["share", "guaranteed-gpus", "from", "until", "reason", "cluster"]);
        self.no_children(file, node);
        let share = e.get(self, "share", false, "").and_then(|entry| e.extra_share(self, entry));
        let gpus = e.count(self, "guaranteed-gpus", false, 1);
        let span = header_span(file, node);
        let amount = match (share, gpus) {
            (Some(share), None) => Some(share.map(GrantAmount::Share)),
            (None, Some(gpus)) => Some(gpus.map(GrantAmount::Gpus)),
            (share, _) => {
                // Neither given (a malformed one was reported), or both.
                let both = share.is_some();
                if both || !(e.props.contains_key("share") || e.props.contains_key("guaranteed-gpus")) {
                    let d = Diagnostic::error(
                        Code::GrantAmount,
                        if both {
                            "a grant gives either `share` or `guaranteed-gpus`, not both"
                        } else {
                            "a grant needs `share` or `guaranteed-gpus`"
                        },
                    )
                    .label(span, if both { "both given" } else { "grants nothing" })
                    .help("write `share=\"+10%\"` (points of the parent) or `guaranteed-gpus=16` (on one cluster)");
                    self.push(d);
                }
                None
            }
        };
        Grant {
            amount,
            from: e.instant(self, "from", false),
            until: e.instant(self, "until", true),
            reason: e.string(self, "reason", true),
            cluster: e.string(self, "cluster", false),
            span,
        }
    }

    /// Lowers the projects of an included file, at `depth` in the tree.
    fn include(&mut self, file: FileId, node: &KdlNode, depth: usize) -> Vec<Project> {
        let e = self.entries(file, node, 1, &[]);
        self.no_children(file, node);
        let Some(target) = e.string_arg(self, "a file path") else {
            return Vec::new();
        };
        let from = self.sources.get(file).map(|f| f.path.clone()).unwrap_or_default();
        let path = match resolve_include(&from, &target.value) {
            Ok(path) => path,
            Err(error) => {
                let d = Diagnostic::error(Code::IncludeOutside, format!("include path {error}"))
                    .label(target.span, "not inside the repository")
                    .help("write the path relative to this file, inside the budget repository");
                self.push(d);
                return Vec::new();
            }
        };
        if let Some(position) = self.stack.iter().position(|p| *p == path) {
            let mut chain: Vec<&str> = self.stack[position..].iter().map(String::as_str).collect();
            chain.push(&path);
            let d = Diagnostic::error(Code::IncludeCycle, format!("include cycle: {}", chain.join(" -> ")))
                .label(target.span, "includes a file that is already being read")
                .help("every file belongs to one subtree; remove one include of the cycle");
            self.push(d);
            return Vec::new();
        }
        if let Some(first) = self.included.get(&path) {
            let d = Diagnostic::error(Code::IncludeDuplicate, format!("`{path}` is included twice"))
                .label(target.span, "second include")
                .label(*first, "first include")
                .help("a file belongs to one subtree; include it once");
            self.push(d);
            return Vec::new();
        }
        self.included.insert(path.clone(), target.span);
        let Some((included, doc)) = self.read(&path, Some(target.span)) else {
            return Vec::new();
        };
        self.stack.push(path);
        let mut projects = Vec::new();
        for child in doc.nodes() {
            match child.name().value() {
                "project" => projects.extend(self.project(included, child, depth)),
                "include" => projects.extend(self.include(included, child, depth)),
                _ => self.unknown_node(included, child, INCLUDED_TOP_LEVEL, "in an included file"),
            }
        }
        self.stack.pop();
        projects
    }

    fn expect(&mut self, file: FileId, node: &KdlNode) -> Expectations {
        self.entries(file, node, 0, &[]);
        let mut expectations = Expectations::default();
        let mut delivered_seen = None;
        for child in children(node) {
            match child.name().value() {
                "delivered" => {
                    let e = self.entries(file, child, 0, &["per-budget", "overall"]);
                    self.no_children(file, child);
                    let per_budget = e.percent(self, "per-budget", false);
                    let overall = e.percent(self, "overall", false);
                    if self.once(file, child, &mut delivered_seen) {
                        expectations.delivered_per_budget = per_budget;
                        expectations.delivered_overall = overall;
                    }
                }
                "wait" => {
                    let e = self.entries(file, child, 0, &["contract", "p50", "p90", "p99"]);
                    self.no_children(file, child);
                    let wait = WaitExpectation {
                        contract: e.string(self, "contract", true),
                        p50: e.duration(self, "p50", false, 0),
                        p90: e.duration(self, "p90", false, 0),
                        p99: e.duration(self, "p99", false, 0),
                        span: header_span(file, child),
                    };
                    if wait.p50.is_none() && wait.p90.is_none() && wait.p99.is_none() {
                        let d = Diagnostic::error(Code::SyntaxMissingValue, "`wait` needs a percentile")
                            .label(wait.span, "no `p50`, `p90` or `p99`")
                            .help("write e.g. `wait contract=debug p90=\"5m\"`");
                        self.push(d);
                    }
                    expectations.waits.push(wait);
                }
                _ => self.unknown_node(file, child, &["delivered", "wait"], "in `expect`"),
            }
        }
        expectations
    }
}

/// A diagnostic labelled at the include that named a file, or naming the file itself.
fn at(d: Diagnostic, via: Option<Span>, label: &str, name: &str) -> Diagnostic {
    match via {
        Some(span) => d.label(span, label),
        None => Diagnostic { file_name: Some(name.to_string()), ..d },
    }
}

fn children(node: &KdlNode) -> &[KdlNode] {
    node.children().map(KdlDocument::nodes).unwrap_or(&[])
}

fn name_span(file: FileId, node: &KdlNode) -> Span {
    Span::new(file, node.name().span())
}

/// From the node's name to the end of its last entry: the line a reader sees.
fn header_span(file: FileId, node: &KdlNode) -> Span {
    let start = node.name().span().offset();
    let end = node
        .entries()
        .iter()
        .map(|e| e.span().offset() + e.span().len())
        .max()
        .unwrap_or(start + node.name().span().len());
    Span { file, offset: start, len: end.saturating_sub(start) }
}

fn text(value: &KdlValue) -> Option<String> {
    value.as_string().map(str::to_string)
}

fn kind(value: &KdlValue) -> &'static str {
    match value {
        KdlValue::String(_) => "a string",
        KdlValue::Integer(_) => "an integer",
        KdlValue::Float(_) => "a number",
        KdlValue::Bool(_) => "a flag",
        KdlValue::Null => "#null",
    }
}

/// The arguments and properties of one node, already checked against what it takes.
struct Entries<'n> {
    file: FileId,
    node: &'n KdlNode,
    args: Vec<&'n KdlEntry>,
    props: BTreeMap<&'n str, &'n KdlEntry>,
}

impl<'n> Entries<'n> {
    fn span(&self, entry: &KdlEntry) -> Span {
        Span::new(self.file, entry.span())
    }

    fn get(&self, l: &mut Lowering, key: &str, required: bool, example: &str) -> Option<&'n KdlEntry> {
        let entry = self.props.get(key).copied();
        if entry.is_none() && required {
            let node = self.node.name().value();
            let d = Diagnostic::error(Code::SyntaxMissingValue, format!("`{node}` needs `{key}`"))
                .label(header_span(self.file, self.node), format!("no `{key}`"))
                .help(format!("add `{key}={example}`"));
            l.push(d);
        }
        entry
    }

    fn wrong_type(&self, l: &mut Lowering, entry: &KdlEntry, what: &str, example: &str) {
        let d = Diagnostic::error(
            Code::SyntaxWrongType,
            format!("expected {what}, found {}", kind(entry.value())),
        )
        .label(self.span(entry), format!("should be {what}"))
        .help(format!("for example `{example}`"));
        l.push(d);
    }

    /// The entry's value if `extract` accepts its type; a wrong-type error otherwise.
    fn typed<T>(
        &self,
        l: &mut Lowering,
        entry: &KdlEntry,
        what: &str,
        example: &str,
        extract: impl Fn(&KdlValue) -> Option<T>,
    ) -> Option<Spanned<T>> {
        match extract(entry.value()) {
            Some(value) => Some(Spanned::new(value, self.span(entry))),
            None => {
                self.wrong_type(l, entry, what, example);
                None
            }
        }
    }

    /// The first argument, as a name; an error when missing.
    fn name_arg(&self, l: &mut Lowering, what: &str) -> Option<Spanned<String>> {
        if self.args.is_empty() {
            let d = Diagnostic::error(
                Code::SyntaxMissingValue,
                format!("`{}` needs a {what} name", self.node.name().value()),
            )
            .label(name_span(self.file, self.node), "no name")
            .help(format!("write `{} NAME ...`", self.node.name().value()));
            l.push(d);
            return None;
        }
        self.string_arg(l, &format!("a {what} name"))
    }

    fn string_arg(&self, l: &mut Lowering, what: &str) -> Option<Spanned<String>> {
        let Some(entry) = self.args.first() else {
            let d = Diagnostic::error(
                Code::SyntaxMissingValue,
                format!("`{}` needs {what}", self.node.name().value()),
            )
            .label(name_span(self.file, self.node), "missing argument")
            .help(format!("write `{} \"...\"`", self.node.name().value()));
            l.push(d);
            return None;
        };
        self.typed(l, entry, what, "\"name\"", text)
    }

    fn string_args(&self, l: &mut Lowering, what: &str) -> Vec<Spanned<String>> {
        if self.args.is_empty() {
            let d = Diagnostic::error(
                Code::SyntaxMissingValue,
                format!("`{}` lists nothing", self.node.name().value()),
            )
            .label(name_span(self.file, self.node), "empty list")
            .help(format!("write `{} NAME NAME ...`, or remove it", self.node.name().value()));
            l.push(d);
        }
        self.args.iter().filter_map(|entry| self.typed(l, entry, what, "alice", text)).collect()
    }

    fn choice_args<T: Copy>(&self, l: &mut Lowering, what: &str, options: &[(&str, T)]) -> Vec<Spanned<T>> {
        let words: Vec<&str> = options.iter().map(|(w, _)| *w).collect();
        if self.args.is_empty() {
            let d = Diagnostic::error(
                Code::SyntaxMissingValue,
                format!("`{}` needs at least one {what}", self.node.name().value()),
            )
            .label(name_span(self.file, self.node), "which schedulers?")
            .help(format!("name one or more of {}", words.join(", ")));
            l.push(d);
        }
        self.args.iter().filter_map(|entry| self.pick(l, entry, what, options)).collect()
    }

    fn pick<T: Copy>(
        &self,
        l: &mut Lowering,
        entry: &KdlEntry,
        what: &str,
        options: &[(&str, T)],
    ) -> Option<Spanned<T>> {
        let words: Vec<&str> = options.iter().map(|(w, _)| *w).collect();
        let KdlValue::String(s) = entry.value() else {
            self.wrong_type(l, entry, &format!("one of {}", words.join(", ")), words[0]);
            return None;
        };
        if let Some((_, value)) = options.iter().find(|(w, _)| w == s) {
            return Some(Spanned::new(*value, self.span(entry)));
        }
        let help = did_you_mean(s, words.iter().copied())
            .unwrap_or_else(|| format!("choose one of {}", words.join(", ")));
        let d = Diagnostic::error(Code::ValueBadChoice, format!("`{s}` is not a {what}"))
            .label(self.span(entry), format!("expected one of {}", words.join(", ")))
            .help(help);
        l.push(d);
        None
    }

    fn choice<T: Copy>(&self, l: &mut Lowering, key: &str, options: &[(&str, T)]) -> Option<Spanned<T>> {
        let entry = self.get(l, key, false, "")?;
        self.pick(l, entry, &format!("value of `{key}`"), options)
    }

    fn string(&self, l: &mut Lowering, key: &str, required: bool) -> Option<Spanned<String>> {
        let entry = self.get(l, key, required, "\"...\"")?;
        self.typed(l, entry, "a string", &format!("{key}=\"...\""), text)
    }

    fn flag(&self, l: &mut Lowering, key: &str) -> Option<Spanned<bool>> {
        let entry = self.get(l, key, false, "#true")?;
        self.typed(l, entry, "a flag", &format!("{key}=#true"), KdlValue::as_bool)
    }

    /// A non-negative integer of at least `min`.
    fn count(&self, l: &mut Lowering, key: &str, required: bool, min: u64) -> Option<Spanned<u64>> {
        let entry = self.get(l, key, required, "8")?;
        let KdlValue::Integer(n) = entry.value() else {
            self.wrong_type(l, entry, "a whole number", &format!("{key}=8"));
            return None;
        };
        match u64::try_from(*n) {
            Ok(n) if n >= min && n <= u64::from(u32::MAX) => Some(Spanned::new(n, self.span(entry))),
            _ => {
                let d = Diagnostic::error(
                    Code::ValueOutOfRange,
                    format!("`{key}` must be from {min} to {}", u32::MAX),
                )
                .label(self.span(entry), "out of range")
                .help(if min > 0 {
                    "a cluster or job has at least one GPU"
                } else {
                    "write a count of GPUs"
                });
                l.push(d);
                None
            }
        }
    }

    /// A duration of at least `min` seconds and at most [`MAX_DURATION`].
    fn duration(
        &self,
        l: &mut Lowering,
        key: &str,
        required: bool,
        min: Seconds,
    ) -> Option<Spanned<Seconds>> {
        let entry = self.get(l, key, required, "\"8h\"")?;
        let s = self.typed(l, entry, "a duration string", &format!("{key}=\"8h\""), text)?.value;
        match parse_duration(&s) {
            Some(seconds) if seconds < min || seconds > MAX_DURATION => {
                let range = if min == 0 { "at most 10 years" } else { "above zero and at most 10 years" };
                let d = Diagnostic::error(
                    Code::ValueOutOfRange,
                    format!("`{key}` must be {range}, not \"{}\"", s.escape_debug()),
                )
                .label(self.span(entry), if seconds < min { "zero" } else { "too long" })
                .help(if seconds < min {
                    format!(
                        "`{key}` is a length of time that a zero would make meaningless; write e.g. \"8h\""
                    )
                } else {
                    "write at most \"3650d\"".to_string()
                });
                l.push(d);
                None
            }
            Some(seconds) => Some(Spanned::new(seconds, self.span(entry))),
            None => {
                let d = Diagnostic::error(Code::ValueBadDuration, format!("`{}` is not a duration", s.escape_debug()))
                    .label(self.span(entry), "not a duration")
                    .help("write a whole number and a unit s, m, h, d or w, e.g. \"90s\", \"8h\", \"7d\", \"1h30m\"");
                l.push(d);
                None
            }
        }
    }

    fn percent(&self, l: &mut Lowering, key: &str, required: bool) -> Option<Spanned<Percent>> {
        let entry = self.get(l, key, required, "\"95%\"")?;
        let s = self.typed(l, entry, "a percentage string", &format!("{key}=\"95%\""), text)?.value;
        self.parse_percent(l, entry, &s)
    }

    fn parse_percent(&self, l: &mut Lowering, entry: &KdlEntry, s: &str) -> Option<Spanned<Percent>> {
        let Some(p) = parse_percent(s) else {
            let d = Diagnostic::error(
                Code::ValueBadPercentage,
                format!("`{}` is not a percentage", s.escape_debug()),
            )
            .label(self.span(entry), "not a percentage")
            .help("write a number with up to 6 decimals followed by `%`, e.g. \"35%\" or \"12.5%\"");
            l.push(d);
            return None;
        };
        if p > 100.0 {
            let d = Diagnostic::error(Code::ValueOutOfRange, format!("`{}` is over 100%", s.escape_debug()))
                .label(self.span(entry), "over 100%")
                .help("a percentage is at most \"100%\"; for relative sizes use weights (`share=3`)");
            l.push(d);
            return None;
        }
        Some(Spanned::new(Percent(p), self.span(entry)))
    }

    /// A grant's `share`: `"+10%"`, points of the parent above zero.
    fn extra_share(&self, l: &mut Lowering, entry: &KdlEntry) -> Option<Spanned<Percent>> {
        let s = self.typed(l, entry, "a percentage string", "share=\"+10%\"", text)?.value;
        let Some(points) = s.strip_prefix('+') else {
            let d = Diagnostic::error(
                Code::ValueBadPercentage,
                format!("`{}` is not an extra share", s.escape_debug()),
            )
            .label(self.span(entry), "no `+`")
            .help("a grant adds to the project's share: write the points it adds, e.g. \"+10%\"");
            l.push(d);
            return None;
        };
        let p = self.parse_percent(l, entry, points)?;
        if p.value.0 <= 0.0 {
            let d = Diagnostic::error(Code::ValueOutOfRange, "a grant adds more than 0%")
                .label(p.span, "adds nothing")
                .help("remove the grant, or write the points it adds, e.g. \"+10%\"");
            l.push(d);
            return None;
        }
        Some(p)
    }

    /// `"2027-01-10"` or an RFC 3339 time with its offset.
    fn instant(&self, l: &mut Lowering, key: &str, required: bool) -> Option<Spanned<Instant>> {
        let entry = self.get(l, key, required, "\"2027-01-10\"")?;
        let s = self.typed(l, entry, "a date string", &format!("{key}=\"2027-01-10\""), text)?.value;
        match parse_instant(&s) {
            Some(instant) => Some(Spanned::new(instant, self.span(entry))),
            None => {
                let d = Diagnostic::error(Code::ValueBadDate, format!("`{}` is not a date", s.escape_debug()))
                    .label(self.span(entry), "not a date")
                    .help("write a date, \"2027-01-10\" (its first second, UTC), or a time with its offset, \"2027-01-10T09:00:00+01:00\"; years 1970 to 9999");
                l.push(d);
                None
            }
        }
    }

    /// A percentage string or a number (a weight). Zero and negatives are `check`'s.
    fn share(&self, l: &mut Lowering, key: &str, required: bool) -> Option<Spanned<Share>> {
        let entry = self.get(l, key, required, "\"25%\"")?;
        match entry.value() {
            KdlValue::String(s) => {
                self.parse_percent(l, entry, s).map(|p| Spanned::new(Share::Percent(p.value), p.span))
            }
            KdlValue::Integer(n) => Some(Spanned::new(Share::Weight(*n as f64), self.span(entry))),
            KdlValue::Float(f) if f.is_finite() => Some(Spanned::new(Share::Weight(*f), self.span(entry))),
            _ => {
                self.wrong_type(l, entry, "a percentage or a weight", "share=\"25%\" or share=3");
                None
            }
        }
    }
}
