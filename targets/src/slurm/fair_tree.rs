//! Slurm's Fair Tree as `priority/multifactor` computes it, so that what `allot fairshare`
//! predicts for a tree and its [`usage`](super::usage) can be compared line by line with a
//! real `sshare -a -l`: shares normalised among siblings (the root user is a sibling of the
//! top-level accounts), usage rolled up to the ancestors, Level FS = NormShares /
//! EffectvUsage, and users ranked by a depth-first walk that visits each level in descending
//! Level FS, with Slurm's tie rules.
//!
//! The semantics are those of Slurm's `fair_tree.c` and `assoc_mgr.c` (and its own check of
//! them, `testsuite/expect/test24.4`): an association with `Fairshare=parent` takes its
//! nearest ancestor's shares without that setting, and the children of such an account
//! are ranked as children of that ancestor. Slurm holds usage, effective usage and Level FS
//! in C `long double`, the x87 80-bit format on x86_64, and ties are exact comparisons of
//! those values, so this module does the same arithmetic (a private `extended` module
//! emulates it bit for bit): in `f64`, mathematically equal Level FS values often tie where
//! Slurm's differ, and the other way round. The classic (pre-Fair-Tree) factor and the
//! usage decay are small functions at the end.

use std::cmp::Ordering;
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

use extended::Extended;

/// `Fairshare=parent` as Slurm stores it (`SLURMDB_FS_USE_PARENT`) and `sacctmgr dump`
/// writes it.
pub const FAIRSHARE_PARENT: u32 = 0x7FFF_FFFF;

/// The root account, which every tree has and no association defines.
pub const ROOT: &str = "root";

/// Slurm's `NO_VAL`: the Level FS of an account with `Fairshare=parent`, the "previous"
/// value the first sibling of each level is compared with, and (like `INFINITE`) a value
/// `sshare` prints as blank.
const NO_VAL: u32 = 0xFFFF_FFFE;
const INFINITE: u32 = 0xFFFF_FFFF;

/// An association's raw shares (`Fairshare=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Shares {
    Count(u32),
    /// `Fairshare=parent`: use the nearest ancestor's shares.
    Parent,
}

impl Shares {
    /// Reads a raw value as Slurm stores it, where 2147483647 means `parent`.
    pub fn from_raw(raw: u32) -> Shares {
        if raw == FAIRSHARE_PARENT { Shares::Parent } else { Shares::Count(raw) }
    }

    /// The value Slurm stores (`shares_raw`).
    pub fn raw(self) -> u32 {
        match self {
            Shares::Count(count) => count,
            Shares::Parent => FAIRSHARE_PARENT,
        }
    }

    /// Whether these are `parent` shares, however they were written.
    pub fn is_parent(self) -> bool {
        self.raw() == FAIRSHARE_PARENT
    }
}

/// Whether an association is an account or a user's association with an account.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Account,
    User,
}

/// One association of the input tree.
#[derive(Clone, Debug, PartialEq)]
pub struct Association {
    pub kind: Kind,
    /// The account's or the user's name (compared and printed lower case, as Slurm stores it).
    pub name: String,
    /// The parent account; for a user, the account of this association.
    pub parent: String,
    pub shares: Shares,
    /// This association's own raw usage (decayed billing × seconds). An account can have
    /// usage of its own (left by deleted users, for example); every usage also counts for
    /// all ancestors.
    pub usage: f64,
}

impl Association {
    /// An account under `parent` (`root` for a top-level account), without usage.
    pub fn account(name: &str, parent: &str, shares: Shares) -> Association {
        Association {
            kind: Kind::Account,
            name: name.to_owned(),
            parent: parent.to_owned(),
            shares,
            usage: 0.0,
        }
    }

    /// A user's association with `account`, without usage.
    pub fn user(name: &str, account: &str, shares: Shares) -> Association {
        Association {
            kind: Kind::User,
            name: name.to_owned(),
            parent: account.to_owned(),
            shares,
            usage: 0.0,
        }
    }

    /// The same association with this raw usage of its own.
    pub fn with_usage(self, usage: f64) -> Association {
        Association { usage, ..self }
    }
}

/// Why a set of associations is not a tree Slurm would hold.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum FairTreeError {
    #[error("account `{0}` is defined twice")]
    DuplicateAccount(String),
    #[error("user `{user}` is associated with account `{account}` twice")]
    DuplicateUser { user: String, account: String },
    #[error("`root` is the implicit root account and cannot be defined")]
    RootRedefined,
    #[error("`{name}` names the parent account `{parent}`, which is not defined")]
    UnknownParent { name: String, parent: String },
    #[error("account `{0}` is not under root: its parents form a cycle")]
    NotUnderRoot(String),
    #[error("`{name}` has usage {usage}; usage must be finite and not negative")]
    InvalidUsage { name: String, usage: f64 },
}

/// One line of `sshare -a -l`: what Slurm shows for one association.
#[derive(Clone, Debug, PartialEq)]
pub struct ShareRow {
    /// The Account column: the account itself, or the account of a user's association.
    pub account: String,
    /// The User column, for a user's association.
    pub user: Option<String>,
    /// Depth below root; `sshare` indents the Account column by as many spaces.
    pub depth: usize,
    /// RawShares; `None` for the root association, which `sshare` leaves blank.
    pub raw_shares: Option<Shares>,
    /// NormShares: shares over the siblings' shares (those of the nearest ancestor without
    /// `Fairshare=parent` for an association with it).
    pub norm_shares: f64,
    /// RawUsage, rolled up (`sshare` prints it truncated to an integer).
    pub raw_usage: f64,
    /// NormUsage: usage over the cluster's; `None` for the root association.
    pub norm_usage: Option<f64>,
    /// EffectvUsage: usage over the parent's (Fair Tree's "U"); 1 for root.
    pub effective_usage: f64,
    /// LevelFS = NormShares / EffectvUsage (infinite without usage); `None` for root and for
    /// associations with `Fairshare=parent`, which `sshare` leaves blank.
    pub level_fs: Option<f64>,
    /// FairShare = rank / number of user associations; users only.
    pub fair_share: Option<f64>,
    /// The user's rank (the highest rank is the number of user associations); users only.
    pub rank: Option<u32>,
}

/// A column of `sshare -l` this module computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Column {
    Account,
    User,
    RawShares,
    NormShares,
    RawUsage,
    NormUsage,
    EffectvUsage,
    FairShare,
    LevelFS,
}

impl Column {
    /// The columns Fair Tree's result depends on: `sshare -l` without NormUsage (which
    /// Fair Tree does not use) and the TRES minutes columns.
    pub const FAIR_TREE: [Column; 8] = [
        Column::Account,
        Column::User,
        Column::RawShares,
        Column::NormShares,
        Column::RawUsage,
        Column::EffectvUsage,
        Column::FairShare,
        Column::LevelFS,
    ];

    /// `sshare -l` under Fair Tree, without its last two columns (GrpTRESMins, TRESRunMins).
    pub const LONG: [Column; 9] = [
        Column::Account,
        Column::User,
        Column::RawShares,
        Column::NormShares,
        Column::RawUsage,
        Column::NormUsage,
        Column::EffectvUsage,
        Column::FairShare,
        Column::LevelFS,
    ];

    /// The column's header, as `sshare` prints it.
    pub fn header(self) -> &'static str {
        match self {
            Column::Account => "Account",
            Column::User => "User",
            Column::RawShares => "RawShares",
            Column::NormShares => "NormShares",
            Column::RawUsage => "RawUsage",
            Column::NormUsage => "NormUsage",
            Column::EffectvUsage => "EffectvUsage",
            Column::FairShare => "FairShare",
            Column::LevelFS => "LevelFS",
        }
    }
}

/// The order in which Fair Tree visits siblings tied on Level FS: the order of Slurm's
/// association list, which changed with Slurm 23.11.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SiblingOrder {
    /// Slurm 22.05 to 23.02: users first, then accounts, each by name (`a` before `a-b`).
    #[default]
    Slurm22,
    /// Slurm 23.11 and later: by lineage, the path of names from root (`/root/a-b/` before
    /// `/root/a/`, a user `u` of `a` as `/root/a/0-u/`).
    Slurm23,
}

impl SiblingOrder {
    /// What the order is, for a note beside the figures.
    pub fn describe(self) -> &'static str {
        match self {
            SiblingOrder::Slurm22 => {
                "siblings tied on Level FS in Slurm 22.05's order (users first, then by name)"
            }
            SiblingOrder::Slurm23 => {
                "siblings tied on Level FS in Slurm 23.11's order (by lineage: /root/a-b/ before /root/a/)"
            }
        }
    }
}

/// The result of one Fair Tree pass: a row per association in `sshare`'s order
/// (depth first from root; within an account its users, then its sub-accounts, each by name).
#[derive(Clone, Debug, PartialEq)]
pub struct FairTree {
    rows: Vec<ShareRow>,
    user_count: u32,
}

impl FairTree {
    /// Runs Fair Tree over `associations`, all below the implicit `root` account, with
    /// Slurm 22.05's order of tied siblings.
    pub fn compute(associations: &[Association]) -> Result<FairTree, FairTreeError> {
        FairTree::compute_in(associations, SiblingOrder::default())
    }

    /// [`compute`](FairTree::compute) with tied siblings visited in `sibling_order`.
    pub fn compute_in(
        associations: &[Association],
        sibling_order: SiblingOrder,
    ) -> Result<FairTree, FairTreeError> {
        let nodes = build_nodes(associations)?;
        let order = preorder(&nodes);
        if order.len() < nodes.len() {
            return Err(not_under_root(&nodes, &order));
        }
        let levels = Levels::compute(&nodes, &order, sibling_order);
        let user_count = nodes.iter().filter(|n| n.kind == Kind::User).count() as u32;
        let ranks = rank_users(&nodes, &levels, user_count);
        let depths = depths(&nodes, &order);
        let rows = order
            .iter()
            .map(|&i| share_row(&nodes, &levels, &ranks, user_count, i, depths.get(i).copied().unwrap_or(0)))
            .collect();
        Ok(FairTree { rows, user_count })
    }

    /// The rows, in `sshare`'s order.
    pub fn rows(&self) -> &[ShareRow] {
        &self.rows
    }

    /// The number of user associations (the denominator of FairShare).
    pub fn user_count(&self) -> u32 {
        self.user_count
    }

    /// The row of an account (`user` = `None`) or of a user's association with `account`.
    pub fn row(&self, account: &str, user: Option<&str>) -> Option<&ShareRow> {
        let account = account.to_lowercase();
        let user = user.map(str::to_lowercase);
        self.rows.iter().find(|r| r.account == account && r.user == user)
    }

    /// The associations beside account `account` under its parent (itself included), in
    /// `sshare`'s order: the accounts and users Fair Tree compares it with.
    pub fn siblings(&self, account: &str) -> Vec<&ShareRow> {
        let account = account.to_lowercase();
        let Some(at) = self.rows.iter().position(|r| r.account == account && r.user.is_none()) else {
            return Vec::new();
        };
        let depth = self.rows[at].depth;
        // The parent's row is the nearest row above one level up; the siblings follow it
        // until a row above their level.
        let start = self.rows[..at].iter().rposition(|r| r.depth < depth).map_or(0, |p| p + 1);
        self.rows[start..].iter().take_while(|r| r.depth >= depth).filter(|r| r.depth == depth).collect()
    }

    /// `sshare -a -l -P` with the [`Column::FAIR_TREE`] columns.
    pub fn to_sshare_parsable(&self) -> String {
        self.to_parsable(&Column::FAIR_TREE)
    }

    /// `sshare -a -P -o <columns>`: a header, then a line per association, fields separated by
    /// `|`, numbers with six decimals, blanks where `sshare` prints none.
    pub fn to_parsable(&self, columns: &[Column]) -> String {
        let header: Vec<&str> = columns.iter().map(|c| c.header()).collect();
        let mut out = header.join("|");
        out.push('\n');
        for row in &self.rows {
            let fields: Vec<String> = columns.iter().map(|&c| sshare_field(row, c)).collect();
            out.push_str(&fields.join("|"));
            out.push('\n');
        }
        out
    }
}

/// One association of the tree; index 0 is root.
struct Node {
    kind: Kind,
    name: String,
    shares: Shares,
    own_usage: f64,
    parent: Option<usize>,
    /// In `sshare`'s order: users, then accounts, each by name.
    children: Vec<usize>,
}

fn build_nodes(associations: &[Association]) -> Result<Vec<Node>, FairTreeError> {
    let root = Node {
        kind: Kind::Account,
        name: ROOT.to_owned(),
        shares: Shares::Count(1),
        own_usage: 0.0,
        parent: None,
        children: Vec::new(),
    };
    let mut nodes = vec![root];
    let mut names = Names { accounts: HashMap::from([(ROOT.to_owned(), 0)]), users: HashSet::new() };
    for association in associations {
        let name = association.name.to_lowercase();
        let usage = association.usage;
        if !usage.is_finite() || usage < 0.0 {
            return Err(FairTreeError::InvalidUsage { name, usage });
        }
        names.register(association.kind, &name, &association.parent.to_lowercase(), nodes.len())?;
        let shares = Shares::from_raw(association.shares.raw());
        nodes.push(Node {
            kind: association.kind,
            name,
            shares,
            own_usage: usage,
            parent: None,
            children: Vec::new(),
        });
    }
    for (index, association) in associations.iter().enumerate() {
        let parent_name = association.parent.to_lowercase();
        let Some(&parent) = names.accounts.get(&parent_name) else {
            let name = association.name.to_lowercase();
            return Err(FairTreeError::UnknownParent { name, parent: parent_name });
        };
        let child = index + 1;
        if let Some(node) = nodes.get_mut(child) {
            node.parent = Some(parent);
        }
        if let Some(node) = nodes.get_mut(parent) {
            node.children.push(child);
        }
    }
    sort_children(&mut nodes);
    Ok(nodes)
}

/// The names seen so far: accounts are unique, and so is each user's association with an account.
struct Names {
    accounts: HashMap<String, usize>,
    users: HashSet<(String, String)>,
}

impl Names {
    fn register(&mut self, kind: Kind, name: &str, parent: &str, index: usize) -> Result<(), FairTreeError> {
        match kind {
            Kind::Account if name == ROOT => Err(FairTreeError::RootRedefined),
            Kind::Account => match self.accounts.entry(name.to_owned()) {
                Entry::Occupied(_) => Err(FairTreeError::DuplicateAccount(name.to_owned())),
                Entry::Vacant(slot) => {
                    slot.insert(index);
                    Ok(())
                }
            },
            Kind::User if self.users.insert((name.to_owned(), parent.to_owned())) => Ok(()),
            Kind::User => {
                Err(FairTreeError::DuplicateUser { user: name.to_owned(), account: parent.to_owned() })
            }
        }
    }
}

/// `sshare`'s order among siblings (Slurm's `_sort_children_list`): users first, then by name.
fn sort_children(nodes: &mut [Node]) {
    let keys: Vec<(bool, String)> = nodes.iter().map(|n| (n.kind == Kind::Account, n.name.clone())).collect();
    for node in nodes.iter_mut() {
        node.children.sort_by(|&a, &b| keys.get(a).cmp(&keys.get(b)));
    }
}

/// The nodes reachable from root, depth first, parents before children.
fn preorder(nodes: &[Node]) -> Vec<usize> {
    let mut order = Vec::with_capacity(nodes.len());
    let mut stack = vec![0];
    while let Some(index) = stack.pop() {
        order.push(index);
        if let Some(node) = nodes.get(index) {
            stack.extend(node.children.iter().rev());
        }
    }
    order
}

fn not_under_root(nodes: &[Node], reached: &[usize]) -> FairTreeError {
    let reached: HashSet<usize> = reached.iter().copied().collect();
    let stray = nodes.iter().enumerate().find(|(i, n)| n.kind == Kind::Account && !reached.contains(i));
    FairTreeError::NotUnderRoot(stray.map_or_else(String::new, |(_, n)| n.name.clone()))
}

/// Slurm's per-association values, indexed like the nodes.
struct Levels {
    /// Rolled-up usage (`usage_raw`).
    usage: Vec<Extended>,
    /// The nearest ancestor without `Fairshare=parent` (`fs_assoc_ptr`).
    fair_share_parent: Vec<Option<usize>>,
    /// The associations whose fair-share parent a node is (`children_list`), in the
    /// association list's order.
    fair_share_children: Vec<Vec<usize>>,
    norm_shares: Vec<f64>,
    effective_usage: Vec<Extended>,
    norm_usage: Vec<Extended>,
    level_fs: Vec<Extended>,
}

impl Levels {
    fn compute(nodes: &[Node], order: &[usize], sibling_order: SiblingOrder) -> Levels {
        let usage = rolled_up_usage(nodes, order);
        let fair_share_parent = fair_share_parents(nodes, order);
        let mut fair_share_children = vec![Vec::new(); nodes.len()];
        for &index in order {
            if let Some(children) =
                fair_share_parent.get(index).copied().flatten().and_then(|p| fair_share_children.get_mut(p))
            {
                children.push(index);
            }
        }
        if sibling_order == SiblingOrder::Slurm23 {
            let lineages = lineages(nodes, order);
            for children in &mut fair_share_children {
                children.sort_by(|&a, &b| lineages.get(a).cmp(&lineages.get(b)));
            }
        }
        let norm_shares = norm_shares(nodes, &fair_share_parent, &fair_share_children);
        let mut levels = Levels {
            usage,
            fair_share_parent,
            fair_share_children,
            norm_shares,
            effective_usage: vec![Extended::ONE; nodes.len()],
            norm_usage: vec![Extended::ZERO; nodes.len()],
            level_fs: vec![Extended::from_u32(NO_VAL); nodes.len()],
        };
        for index in 1..nodes.len() {
            levels.set_usage_and_level_fs(nodes, index);
        }
        levels
    }

    /// Slurm's `_calc_assoc_fs`: effective and normalised usage, then LF = S / U.
    fn set_usage_and_level_fs(&mut self, nodes: &[Node], index: usize) {
        let usage = self.usage.get(index).copied().unwrap_or(Extended::ZERO);
        let parent_usage =
            self.fair_share_parent.get(index).copied().flatten().and_then(|p| self.usage.get(p));
        let effective = match parent_usage {
            Some(&parent) if parent != Extended::ZERO => usage.divide(parent),
            _ => Extended::ZERO,
        };
        let cluster_usage = self.usage.first().copied().unwrap_or(Extended::ZERO);
        let norm = if cluster_usage == Extended::ZERO {
            Extended::ZERO
        } else {
            usage.divide(cluster_usage).min(Extended::ONE)
        };
        let shares = self.norm_shares.get(index).copied().unwrap_or(0.0);
        let level_fs = match nodes.get(index) {
            Some(node) if node.shares.is_parent() && node.kind == Kind::User => Extended::INFINITY,
            Some(node) if node.shares.is_parent() => Extended::from_u32(NO_VAL),
            // No shares: the lowest value, decided before dividing (0 / 0 would be NaN).
            _ if shares == 0.0 => Extended::ZERO,
            _ => Extended::from_f64(shares).divide(effective),
        };
        for (values, value) in [
            (&mut self.effective_usage, effective),
            (&mut self.norm_usage, norm),
            (&mut self.level_fs, level_fs),
        ] {
            if let Some(slot) = values.get_mut(index) {
                *slot = value;
            }
        }
    }
}

/// Each association's lineage as Slurm 23.11 stores it: `/root/` for root, then an
/// account's name or `0-` and a user's name, each followed by `/`.
fn lineages(nodes: &[Node], order: &[usize]) -> Vec<String> {
    let mut out = vec![String::new(); nodes.len()];
    for &index in order {
        let Some(node) = nodes.get(index) else { continue };
        let lineage = match node.parent.and_then(|p| out.get(p)) {
            None => format!("/{}/", node.name),
            Some(parent) if node.kind == Kind::User => format!("{parent}0-{}/", node.name),
            Some(parent) => format!("{parent}{}/", node.name),
        };
        if let Some(slot) = out.get_mut(index) {
            *slot = lineage;
        }
    }
    out
}

/// Each association's usage plus its descendants', summed as Slurm's `long double`s.
fn rolled_up_usage(nodes: &[Node], order: &[usize]) -> Vec<Extended> {
    let mut usage: Vec<Extended> = nodes.iter().map(|n| Extended::from_f64(n.own_usage)).collect();
    for &index in order.iter().rev() {
        let Some(node) = nodes.get(index) else { continue };
        let own = usage.get(index).copied().unwrap_or(Extended::ZERO);
        let total =
            node.children.iter().filter_map(|&c| usage.get(c)).fold(own, |sum, &child| sum.add(child));
        if let Some(slot) = usage.get_mut(index) {
            *slot = total;
        }
    }
    usage
}

/// For each association, the nearest proper ancestor without `Fairshare=parent`: in one
/// pass over `order` (parents first), from the parent's own answer.
fn fair_share_parents(nodes: &[Node], order: &[usize]) -> Vec<Option<usize>> {
    let mut out: Vec<Option<usize>> = vec![None; nodes.len()];
    for &index in order {
        let Some(parent) = nodes.get(index).and_then(|n| n.parent) else { continue };
        let parent_has_parent_shares = nodes.get(parent).is_some_and(|n| n.shares.is_parent());
        let answer = if parent_has_parent_shares { out.get(parent).copied().flatten() } else { Some(parent) };
        if let Some(slot) = out.get_mut(index) {
            *slot = answer;
        }
    }
    out
}

/// NormShares: shares over the level's shares (Slurm's `_normalize_assoc_shares_fair_tree`).
fn norm_shares(
    nodes: &[Node],
    fair_share_parent: &[Option<usize>],
    fair_share_children: &[Vec<usize>],
) -> Vec<f64> {
    let mut level_shares = vec![0u32; nodes.len()];
    for children in fair_share_children.iter().filter(|c| !c.is_empty()) {
        let total = children_level_shares(nodes, fair_share_children, children);
        for &child in children {
            if let Some(slot) = level_shares.get_mut(child) {
                *slot = total;
            }
        }
    }
    (0..nodes.len())
        .map(|index| {
            let own = nodes.get(index).map(|n| n.shares);
            let source = match own {
                Some(shares) if shares.is_parent() => {
                    fair_share_parent.get(index).copied().flatten().unwrap_or(index)
                }
                _ => index,
            };
            let raw = nodes.get(source).map_or(0, |n| n.shares.raw());
            match level_shares.get(source).copied().unwrap_or(0) {
                0 => 0.0,
                level => f64::from(raw) / f64::from(level),
            }
        })
        .collect()
}

/// The siblings' shares (Slurm's `_get_children_level_shares`): `parent` children count
/// their own children's shares; the sum wraps like Slurm's `uint32_t`.
fn children_level_shares(nodes: &[Node], fair_share_children: &[Vec<usize>], children: &[usize]) -> u32 {
    children.iter().fold(0u32, |sum, &child| {
        let shares = nodes.get(child).map_or(Shares::Count(0), |n| n.shares);
        let part = if shares.is_parent() {
            let grandchildren = fair_share_children.get(child).map_or(&[][..], Vec::as_slice);
            children_level_shares(nodes, fair_share_children, grandchildren)
        } else {
            shares.raw()
        };
        sum.wrapping_add(part)
    })
}

/// One level of the ranking under way: siblings in ranking order, the next to rank, and the
/// Level FS of the last one ranked.
struct Level {
    siblings: Vec<usize>,
    account_tied: bool,
    previous: Extended,
    position: usize,
}

/// The depth-first ranking of Slurm's `_calc_tree_fs`.
struct Ranking<'a> {
    nodes: &'a [Node],
    levels: &'a Levels,
    /// The rank the last user received (kept for users tied with it).
    rank: u32,
    /// The rank the next user receives when not tied ("rank, no ties").
    rank_no_ties: u32,
    ranks: Vec<Option<u32>>,
}

fn rank_users(nodes: &[Node], levels: &Levels, user_count: u32) -> Vec<Option<u32>> {
    let mut ranking =
        Ranking { nodes, levels, rank: user_count, rank_no_ties: user_count, ranks: vec![None; nodes.len()] };
    let top = levels.fair_share_children.first().cloned().unwrap_or_default();
    ranking.visit(top);
    ranking.ranks
}

impl Ranking<'_> {
    fn level_fs(&self, index: usize) -> Extended {
        self.levels.level_fs.get(index).copied().unwrap_or(Extended::ZERO)
    }

    fn is_user(&self, index: usize) -> bool {
        self.nodes.get(index).is_some_and(|n| n.kind == Kind::User)
    }

    /// Higher Level FS first; at equal Level FS users before accounts. The sort is stable
    /// like glibc's merge sort, so equal associations keep the association list's order.
    fn compare(&self, a: usize, b: usize) -> Ordering {
        self.level_fs(b).cmp(&self.level_fs(a)).then_with(|| self.is_user(b).cmp(&self.is_user(a)))
    }

    /// A level to rank: `account_tied` says the account whose children these are tied with
    /// its previous sibling, which makes the first of them tied too.
    fn level(&self, mut siblings: Vec<usize>, account_tied: bool) -> Level {
        siblings.sort_by(|&a, &b| self.compare(a, b));
        Level { siblings, account_tied, previous: Extended::from_u32(NO_VAL), position: 0 }
    }

    /// Ranks the levels depth first: a level's accounts are each followed by their
    /// children's level before their next sibling. The levels under way are kept on a stack
    /// of their own, not the call stack, so a deep tree cannot overflow it.
    fn visit(&mut self, top: Vec<usize>) {
        let mut stack = vec![self.level(top, false)];
        while let Some(level) = stack.last_mut() {
            let Some(&index) = level.siblings.get(level.position) else {
                stack.pop();
                continue;
            };
            let level_fs = self.level_fs(index);
            let tied =
                if level.position == 0 && level.account_tied { true } else { level.previous == level_fs };
            level.previous = level_fs;
            if self.is_user(index) {
                level.position += 1;
                self.rank_user(index, tied);
            } else {
                let merged = self.tied_users_following(&level.siblings, level.position);
                let end = (level.position + merged + 1).min(level.siblings.len());
                let children = level
                    .siblings
                    .get(level.position..end)
                    .unwrap_or_default()
                    .iter()
                    .flat_map(|&s| self.children_of(s))
                    .collect();
                level.position += merged + 1;
                let next = self.level(children, tied);
                stack.push(next);
            }
        }
    }

    fn rank_user(&mut self, index: usize, tied: bool) {
        if !tied {
            self.rank = self.rank_no_ties;
        }
        if let Some(slot) = self.ranks.get_mut(index) {
            *slot = Some(self.rank);
        }
        self.rank_no_ties = self.rank_no_ties.saturating_sub(1);
    }

    fn children_of(&self, index: usize) -> Vec<usize> {
        self.levels.fair_share_children.get(index).cloned().unwrap_or_default()
    }

    /// Slurm's `_count_tied_accounts`, as written: it counts the *users* after an account
    /// with its Level FS, stopping at the next account. Users sort before accounts at equal
    /// Level FS, so this is always 0 and tied sibling accounts are never merged; their tie
    /// reaches the ranking through `account_tied` instead.
    fn tied_users_following(&self, siblings: &[usize], position: usize) -> usize {
        let level_fs = siblings.get(position).map(|&s| self.level_fs(s));
        let following = siblings.get(position + 1..).unwrap_or_default();
        following.iter().take_while(|&&s| self.is_user(s) && Some(self.level_fs(s)) == level_fs).count()
    }
}

fn share_row(
    nodes: &[Node],
    levels: &Levels,
    ranks: &[Option<u32>],
    user_count: u32,
    index: usize,
    depth: usize,
) -> ShareRow {
    let node = nodes.get(index);
    let parent = node.and_then(|n| n.parent).and_then(|p| nodes.get(p));
    let is_user = node.is_some_and(|n| n.kind == Kind::User);
    let name = node.map_or_else(String::new, |n| n.name.clone());
    let (account, user) = if is_user {
        (parent.map_or_else(String::new, |p| p.name.clone()), Some(name))
    } else {
        (name, None)
    };
    let is_root = index == 0;
    let shares = node.map_or(Shares::Count(0), |n| n.shares);
    let rank = ranks.get(index).copied().flatten();
    let value = |values: &[Extended]| values.get(index).copied().unwrap_or(Extended::ZERO).to_f64();
    ShareRow {
        account,
        user,
        depth,
        raw_shares: (!is_root).then_some(shares),
        norm_shares: levels.norm_shares.get(index).copied().unwrap_or(0.0),
        raw_usage: value(&levels.usage),
        norm_usage: (!is_root).then(|| value(&levels.norm_usage)),
        effective_usage: value(&levels.effective_usage),
        level_fs: (!is_root && !shares.is_parent()).then(|| value(&levels.level_fs)),
        fair_share: rank.map(|r| f64::from(r) / f64::from(user_count)),
        rank,
    }
}

/// Each association's depth below root, in one pass over `order` (parents first).
fn depths(nodes: &[Node], order: &[usize]) -> Vec<usize> {
    let mut depths = vec![0; nodes.len()];
    for &index in order {
        let depth = nodes.get(index).and_then(|n| n.parent).and_then(|p| depths.get(p)).map_or(0, |d| d + 1);
        if let Some(slot) = depths.get_mut(index) {
            *slot = depth;
        }
    }
    depths
}

/// One field as `sshare`'s `print_fields` prints it in parsable mode.
fn sshare_field(row: &ShareRow, column: Column) -> String {
    match column {
        Column::Account => format!("{:width$}{}", "", row.account, width = row.depth),
        Column::User => row.user.clone().unwrap_or_default(),
        Column::RawShares => match row.raw_shares {
            None => String::new(),
            Some(Shares::Parent) => "parent".to_owned(),
            Some(Shares::Count(count)) if count == NO_VAL || count == INFINITE => String::new(),
            Some(Shares::Count(count)) => count.to_string(),
        },
        Column::NormShares => sshare_number(Some(row.norm_shares)),
        // `(uint64_t)usage_raw`: truncated.
        Column::RawUsage => format!("{}", row.raw_usage.trunc()),
        Column::NormUsage => sshare_number(row.norm_usage),
        Column::EffectvUsage => sshare_number(Some(row.effective_usage)),
        Column::FairShare => sshare_number(row.fair_share),
        Column::LevelFS => sshare_number(row.level_fs),
    }
}

/// `%f`, or blank for no value and for the values Slurm uses to mean unset.
fn sshare_number(value: Option<f64>) -> String {
    let unset = [f64::from(NO_VAL), f64::from(INFINITE), u64::MAX as f64, (u64::MAX - 1) as f64];
    match value {
        Some(v) if !unset.contains(&v) => format!("{v:.6}"),
        _ => String::new(),
    }
}

/// The classic (non-Fair-Tree) fair-share factor `2^(-EffectvUsage / NormShares)`, 0.5 for
/// usage exactly at the share; 0 for an association without shares.
pub fn classic_fair_share_factor(effective_usage: f64, norm_shares: f64) -> f64 {
    damped_classic_fair_share_factor(effective_usage, norm_shares, 1.0)
}

/// The classic factor with `FairShareDampeningFactor` `dampening`:
/// `2^(-(EffectvUsage / NormShares) / dampening)`.
pub fn damped_classic_fair_share_factor(effective_usage: f64, norm_shares: f64, dampening: f64) -> f64 {
    if norm_shares <= 0.0 {
        return 0.0;
    }
    2f64.powf(-((effective_usage / norm_shares) / dampening))
}

/// Classic effective usage below the top level: the association's own normalised usage
/// plus its share of what its parent's effective usage exceeds it by,
/// `actual + (parent_effective - actual) * shares / siblings_shares` (at the top level the
/// effective usage is the actual usage).
pub fn classic_effective_usage(
    actual_usage: f64,
    parent_effective_usage: f64,
    shares: f64,
    siblings_shares: f64,
) -> f64 {
    if siblings_shares <= 0.0 {
        return actual_usage;
    }
    actual_usage + (parent_effective_usage - actual_usage) * shares / siblings_shares
}

/// Usage decayed by `PriorityDecayHalfLife`: `usage * 2^(-elapsed / half_life)` (a half-life
/// of 0 means no decay).
pub fn decayed_usage(usage: f64, elapsed_seconds: f64, half_life_seconds: f64) -> f64 {
    if half_life_seconds <= 0.0 {
        return usage;
    }
    usage * 2f64.powf(-elapsed_seconds / half_life_seconds)
}

/// Slurm's per-second decay factor, `1 - 0.693 / half_life` (a first-order expansion of
/// `2^(-1 / half_life)` with ln 2 rounded to 0.693).
pub fn slurm_decay_factor(half_life_seconds: f64) -> f64 {
    1.0 - 0.693 / half_life_seconds
}

/// What Slurm multiplies usage by after `elapsed_seconds`: the decay factor to that power,
/// floored at the smallest normal double as Slurm does (1 without a half-life).
pub fn slurm_decay_multiplier(elapsed_seconds: f64, half_life_seconds: f64) -> f64 {
    if half_life_seconds <= 0.0 {
        return 1.0;
    }
    slurm_decay_factor(half_life_seconds).powf(elapsed_seconds).max(f64::MIN_POSITIVE)
}

/// Non-negative x87 80-bit extended values (C `long double` on x86_64), with the rounding
/// the FPU applies (to nearest, ties to even), for the few operations Fair Tree needs.
mod extended {
    /// Zero, `mantissa * 2^(exponent - 63)` with the mantissa's top bit set, or infinity.
    /// The derived order is the numeric order.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
    pub enum Extended {
        Zero,
        Finite { exponent: i32, mantissa: u64 },
        Infinity,
    }

    const TOP_BIT: u64 = 1 << 63;

    impl Extended {
        pub const ZERO: Extended = Extended::Zero;
        pub const ONE: Extended = Extended::Finite { exponent: 0, mantissa: TOP_BIT };
        pub const INFINITY: Extended = Extended::Infinity;

        /// Exact: every non-negative double is an extended value. Negative and NaN give zero.
        pub fn from_f64(value: f64) -> Extended {
            if value.is_nan() || value <= 0.0 {
                return Extended::Zero;
            }
            if value.is_infinite() {
                return Extended::Infinity;
            }
            let bits = value.to_bits();
            let biased = ((bits >> 52) & 0x7ff) as i32;
            let fraction = bits & ((1 << 52) - 1);
            let (significand, exponent) =
                if biased == 0 { (fraction, -1022) } else { (fraction | (1 << 52), biased - 1023) };
            let shift = significand.leading_zeros();
            Extended::Finite { exponent: exponent - (shift as i32 - 11), mantissa: significand << shift }
        }

        pub fn from_u32(value: u32) -> Extended {
            Extended::from_f64(f64::from(value))
        }

        /// `self / divisor`, rounded once; x / 0 is infinite (x87 with masked exceptions).
        pub fn divide(self, divisor: Extended) -> Extended {
            match (self, divisor) {
                (Extended::Zero, _) | (_, Extended::Infinity) => Extended::Zero,
                (Extended::Infinity, _) | (_, Extended::Zero) => Extended::Infinity,
                (
                    Extended::Finite { exponent: a_exponent, mantissa: a },
                    Extended::Finite { exponent: b_exponent, mantissa: b },
                ) => divide_mantissas(a_exponent - b_exponent, a, b),
            }
        }

        /// `self + other`, rounded once.
        pub fn add(self, other: Extended) -> Extended {
            match (self, other) {
                (Extended::Zero, x) | (x, Extended::Zero) => x,
                (Extended::Infinity, _) | (_, Extended::Infinity) => Extended::Infinity,
                (
                    Extended::Finite { exponent: a_exponent, mantissa: a },
                    Extended::Finite { exponent: b_exponent, mantissa: b },
                ) if a_exponent >= b_exponent => add_mantissas(a_exponent, a, b_exponent, b),
                (
                    Extended::Finite { exponent: a_exponent, mantissa: a },
                    Extended::Finite { exponent, mantissa },
                ) => add_mantissas(exponent, mantissa, a_exponent, a),
            }
        }

        /// The nearest double (ties to even), as a C cast from `long double` gives.
        pub fn to_f64(self) -> f64 {
            match self {
                Extended::Zero => 0.0,
                Extended::Infinity => f64::INFINITY,
                Extended::Finite { exponent, .. } if exponent > 1023 => f64::INFINITY,
                Extended::Finite { exponent, mantissa } => {
                    // 11 bits below a double's 53, more in the subnormal range.
                    let dropped = 11 + (-1022 - exponent).max(0).unsigned_abs();
                    if dropped > 64 {
                        return 0.0;
                    }
                    let kept = mantissa.checked_shr(dropped).unwrap_or(0);
                    let rest = mantissa & (u64::MAX >> (64 - dropped));
                    let half = 1u64 << (dropped - 1);
                    let up = rest > half || (rest == half && kept & 1 == 1);
                    // Exact: fewer than 54 significant bits times a power of two in range.
                    (kept + u64::from(up)) as f64 * power_of_two(exponent - 63 + dropped as i32)
                }
            }
        }
    }

    /// `a / b * 2^exponent` for normalised mantissas: their quotient lies in (1/2, 2).
    fn divide_mantissas(exponent: i32, a: u64, b: u64) -> Extended {
        let numerator = u128::from(a) << 64;
        let divisor = u128::from(b);
        let quotient = numerator / divisor;
        let remainder = numerator % divisor;
        if quotient >> 64 != 0 {
            // 65 quotient bits: the lowest decides the rounding.
            round_to_nearest_even(exponent, (quotient >> 1) as u64, quotient & 1 == 1, remainder != 0)
        } else {
            // 64 bits: one more from the remainder.
            let doubled = remainder << 1;
            let round = doubled >= divisor;
            let sticky = if round { doubled > divisor } else { doubled != 0 };
            round_to_nearest_even(exponent - 1, quotient as u64, round, sticky)
        }
    }

    /// `big * 2^(big_exponent - 63) + small * 2^(small_exponent - 63)`, `big_exponent` the larger.
    fn add_mantissas(big_exponent: i32, big: u64, small_exponent: i32, small: u64) -> Extended {
        let gap = big_exponent.abs_diff(small_exponent);
        let small_wide = u128::from(small) << 63;
        let (aligned, lost) = if gap >= 127 {
            (0, small != 0)
        } else {
            (small_wide >> gap, small_wide & ((1u128 << gap) - 1) != 0)
        };
        let sum = (u128::from(big) << 63) + aligned;
        let (shift, exponent) = if sum >> 127 != 0 { (64, big_exponent + 1) } else { (63, big_exponent) };
        let rest = sum & ((1u128 << shift) - 1);
        let half = 1u128 << (shift - 1);
        let round = rest >= half;
        round_to_nearest_even(exponent, (sum >> shift) as u64, round, rest > half || lost)
    }

    fn round_to_nearest_even(exponent: i32, kept: u64, round: bool, sticky: bool) -> Extended {
        if !(round && (sticky || kept & 1 == 1)) {
            return Extended::Finite { exponent, mantissa: kept };
        }
        match kept.checked_add(1) {
            Some(mantissa) => Extended::Finite { exponent, mantissa },
            None => Extended::Finite { exponent: exponent + 1, mantissa: TOP_BIT },
        }
    }

    /// `2^power` for a power in the range of doubles (subnormals included).
    fn power_of_two(power: i32) -> f64 {
        if power >= -1022 {
            f64::from_bits(((power + 1023).max(0) as u64) << 52)
        } else {
            f64::from_bits(1u64 << (power + 1074).clamp(0, 51))
        }
    }

    #[cfg(test)]
    mod tests {
        use super::Extended;

        fn finite(exponent: i32, mantissa: u64) -> Extended {
            Extended::Finite { exponent, mantissa }
        }

        // Expected values: the same operations on x86_64 `long double` (gcc, glibc).
        #[test]
        fn quotients_match_x87() {
            let third = Extended::from_f64(1.0).divide(Extended::from_f64(3.0));
            assert_eq!(third, finite(-2, 0xaaaa_aaaa_aaaa_aaab));
            let u = Extended::from_f64(20.0).divide(Extended::from_f64(110.0));
            assert_eq!(u, finite(-3, 0xba2e_8ba2_e8ba_2e8c));
            assert_eq!(Extended::from_f64(40.0 / 170.0).divide(u), finite(0, 0xa5a5_a5a5_a5a5_a500));
            let u = Extended::from_f64(25.0).divide(Extended::from_f64(110.0));
            assert_eq!(u, finite(-3, 0xe8ba_2e8b_a2e8_ba2f));
            assert_eq!(Extended::from_f64(50.0 / 170.0).divide(u), finite(0, 0xa5a5_a5a5_a5a5_a733));
            let q = Extended::from_f64(990.0).divide(Extended::from_f64(7.0));
            assert_eq!(q, finite(7, 0x8d6d_b6db_6db6_db6e));
            assert_eq!(q.to_f64().to_bits(), 0x4061_adb6_db6d_b6db);
            let tiny = Extended::from_f64(5e-324).divide(Extended::from_f64(3.0));
            assert_eq!(tiny, finite(-1076, 0xaaaa_aaaa_aaaa_aaab));
            assert_eq!(tiny.to_f64(), 0.0);
        }

        #[test]
        fn sums_match_x87() {
            let sum = Extended::from_f64(0.1).add(Extended::from_f64(0.2));
            assert_eq!(sum, finite(-2, 0x9999_9999_9999_9c00));
            assert_eq!(sum.to_f64(), 0.1 + 0.2);
            assert_eq!(
                Extended::from_f64(990.0).add(Extended::from_f64(7.0)),
                finite(9, 0xf940_0000_0000_0000)
            );
            let big = Extended::from_f64(1e308).add(Extended::from_f64(1e308));
            assert_eq!(big, finite(1024, 0x8e67_9c2f_5e45_0000));
            assert_eq!(big.to_f64(), f64::INFINITY);
        }

        #[test]
        fn doubles_round_trip() {
            for value in [0.5, 1.0, 3.0, 1e-310, 5e-324, f64::MAX, 0.1, 2.0f64.powi(-1022)] {
                assert_eq!(Extended::from_f64(value).to_f64().to_bits(), value.to_bits());
            }
            assert_eq!(Extended::ONE, Extended::from_f64(1.0));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn siblings_are_the_associations_under_the_same_parent() {
        let associations = [
            Association::account("eng", ROOT, Shares::Count(60)),
            Association::account("ml", "eng", Shares::Count(70)),
            Association::user("bob", "ml", Shares::Count(1)).with_usage(10.0),
            Association::account("web", "eng", Shares::Count(30)),
            Association::user("carol", "eng", Shares::Count(1)),
            Association::account("sci", ROOT, Shares::Count(40)),
        ];
        let tree = FairTree::compute(&associations).unwrap();
        let names = |account: &str| -> Vec<String> {
            tree.siblings(account)
                .iter()
                .map(|r| r.user.clone().unwrap_or_else(|| r.account.clone()))
                .collect()
        };
        // ml's siblings are eng's children: accounts and users alike, not bob below ml.
        let mut under_eng = names("ml");
        under_eng.sort();
        assert_eq!(under_eng, ["carol", "ml", "web"]);
        assert_eq!(names("sci").len(), 2, "eng and sci under root");
        assert!(names("nowhere").is_empty());
    }

    #[test]
    fn a_chain_100_000_deep_is_ranked_without_recursion_or_walks_to_root() {
        // Recursion per level would overflow the stack; a walk to root per association
        // (for its depth or its fair-share parent) would take minutes.
        const DEPTH: usize = 100_000;
        let name = |i: usize| if i == 0 { ROOT.to_string() } else { format!("a{i}") };
        let mut associations: Vec<Association> = (1..=DEPTH)
            .map(|i| {
                let shares = if i % 2 == 0 { Shares::Parent } else { Shares::Count(1) };
                Association::account(&name(i), &name(i - 1), shares)
            })
            .collect();
        associations.push(Association::user("alice", &name(DEPTH), Shares::Count(1)).with_usage(5.0));
        let tree = FairTree::compute(&associations).unwrap();
        let alice = tree.row(&name(DEPTH), Some("alice")).unwrap();
        assert_eq!((alice.depth, alice.rank, alice.raw_usage), (DEPTH + 1, Some(1), 5.0));
        assert_eq!(tree.row("a1", None).map(|r| r.raw_usage), Some(5.0), "usage rolls up to the top");
    }
}
