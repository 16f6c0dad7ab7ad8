//! What each budget is entitled to at one instant, and over time: the capacity of one
//! cluster divided among the budgets that have demand by hierarchical weighted max-min fair
//! share (water-filling). At each level the parent's allocation goes to the children with
//! demand in proportion to their weights, each child capped by what it can use (its
//! demand, for an inner node its subtree's capped demand, and its own cap); what a capped
//! child does not need goes to its siblings by weight, and so on down the tree.
//!
//! Each level is solved exactly in one pass over its children sorted by capped demand /
//! weight (O(n log n)), with no iteration or tolerance. A [`Division`] keeps the division
//! up to date as demand changes: it divides again only the levels whose inputs changed (a
//! parent's allocation, its children's capped demands), when it is read and without
//! allocating, each level exactly as [`Hierarchy::allocate`] divides it from scratch. The
//! simulator reads one per cluster at each scheduling pass; [`Ledger`] reads one once per
//! instant and integrates the entitled GPU-hours (the allocation) and the delivered
//! GPU-hours (min(use, allocation)) between events, exactly, since both are constant
//! between two events. The audit and the simulator hold a [`Hierarchy`] per cluster (see
//! [`budgets`](crate::budgets)).

/// The index of a node in its [`Hierarchy`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub usize);

/// One budget of the tree.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub name: String,
    /// `None` for a top-level budget.
    pub parent: Option<NodeId>,
    /// Its share among its siblings, above 0; only the ratios between siblings matter.
    pub weight: f64,
    /// At most this many GPUs, its subtree's included.
    pub cap: Option<f64>,
}

impl Node {
    /// A budget without a cap.
    pub fn new(name: &str, parent: Option<NodeId>, weight: f64) -> Node {
        Node { name: name.to_owned(), parent, weight, cap: None }
    }

    /// The same budget with a cap of `gpus`.
    pub fn with_cap(self, gpus: f64) -> Node {
        Node { cap: Some(gpus), ..self }
    }
}

/// Why a tree, a demand or an event cannot be used.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum EntitlementError {
    #[error("budget `{name}` has weight {weight}; weights must be finite and above 0")]
    InvalidWeight { name: String, weight: f64 },
    #[error("budget `{name}` has cap {cap}; caps must be finite and not negative")]
    InvalidCap { name: String, cap: f64 },
    #[error("budget `{name}` names parent {parent}, which is not a node of the tree")]
    UnknownParent { name: String, parent: usize },
    #[error("budget `{0}` is not under a top-level budget: its parents form a cycle")]
    NotUnderRoot(String),
    #[error("capacity {0} must be finite and not negative")]
    InvalidCapacity(f64),
    #[error("{given} demands given for a tree of {nodes} budgets")]
    DemandCount { given: usize, nodes: usize },
    #[error("budget `{name}` has demand or use {gpus}; it must be finite and not negative")]
    InvalidDemand { name: String, gpus: f64 },
    #[error("budget `{0}` has sub-budgets; demand and use belong to leaves")]
    NotALeaf(String),
    #[error("node {0} is not a node of the tree")]
    UnknownNode(usize),
    #[error("time {0} s is not a finite number of seconds")]
    InvalidTime(f64),
    #[error("an event at {at} s comes after one at {now} s")]
    OutOfOrder { at: f64, now: f64 },
    #[error("the budgets' shares change to a tree of another shape (budget `{0}`)")]
    OtherShape(String),
}

/// A validated tree of budgets.
#[derive(Clone, Debug, PartialEq)]
pub struct Hierarchy {
    nodes: Vec<Node>,
    children: Vec<Vec<NodeId>>,
    roots: Vec<NodeId>,
    /// Parents before children.
    preorder: Vec<NodeId>,
}

impl Hierarchy {
    /// Checks the weights, caps and parents; a node's children keep the nodes' order.
    pub fn new(nodes: Vec<Node>) -> Result<Hierarchy, EntitlementError> {
        let mut children = vec![Vec::new(); nodes.len()];
        let mut roots = Vec::new();
        for (index, node) in nodes.iter().enumerate() {
            check_node(node)?;
            match node.parent {
                None => roots.push(NodeId(index)),
                Some(NodeId(parent)) => match children.get_mut(parent) {
                    Some(siblings) => siblings.push(NodeId(index)),
                    None => return Err(EntitlementError::UnknownParent { name: node.name.clone(), parent }),
                },
            }
        }
        let preorder = preorder(&roots, &children);
        if preorder.len() < nodes.len() {
            let reached: std::collections::HashSet<NodeId> = preorder.iter().copied().collect();
            let stray = (0..nodes.len()).map(NodeId).find(|id| !reached.contains(id));
            let name = stray.and_then(|id| nodes.get(id.0)).map_or_else(String::new, |n| n.name.clone());
            return Err(EntitlementError::NotUnderRoot(name));
        }
        Ok(Hierarchy { nodes, children, roots, preorder })
    }

    /// The number of nodes.
    #[inline]
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the tree has no node.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The node `id`, if it is one of this tree's.
    #[inline]
    pub fn node(&self, id: NodeId) -> Option<&Node> {
        self.nodes.get(id.0)
    }

    /// The node called `name`, if there is one.
    pub fn find(&self, name: &str) -> Option<NodeId> {
        self.nodes.iter().position(|n| n.name == name).map(NodeId)
    }

    /// A node's children, in the nodes' order.
    #[inline]
    pub fn children(&self, id: NodeId) -> &[NodeId] {
        self.children.get(id.0).map_or(&[], Vec::as_slice)
    }

    /// The top-level budgets.
    #[inline]
    pub fn roots(&self) -> &[NodeId] {
        &self.roots
    }

    /// Whether a node has no children (the nodes that have demand and use).
    #[inline]
    pub fn is_leaf(&self, id: NodeId) -> bool {
        self.children(id).is_empty()
    }

    /// Divides `capacity` GPUs given each node's demand (`demand[i]` for node `i`; inner
    /// nodes' demands must be 0: theirs is their subtree's).
    pub fn allocate(&self, capacity: f64, demand: &[f64]) -> Result<Entitlement, EntitlementError> {
        if !capacity.is_finite() || capacity < 0.0 {
            return Err(EntitlementError::InvalidCapacity(capacity));
        }
        self.check_leaf_amounts(demand)?;
        let (capped_demand, children_demand) = self.capped_demand(demand);
        let roots_demand: f64 = self.roots.iter().map(|r| value_at(&capped_demand, *r)).sum();
        let mut allocation = vec![0.0; self.nodes.len()];
        let mut scratch = Scratch::default();
        self.share_out(capacity, &self.roots, roots_demand, &capped_demand, &mut allocation, &mut scratch);
        for &id in &self.preorder {
            let amount = value_at(&allocation, id);
            self.share_out(
                amount,
                self.children(id),
                value_at(&children_demand, id),
                &capped_demand,
                &mut allocation,
                &mut scratch,
            );
        }
        let unallocated = capacity - capacity.min(roots_demand);
        Ok(Entitlement { allocation, capped_demand, unallocated })
    }

    /// What each node can use (`min(demand, cap)`, for inner nodes `min(sum of the
    /// children's, cap)`), and for each node the sum of its children's.
    fn capped_demand(&self, demand: &[f64]) -> (Vec<f64>, Vec<f64>) {
        let mut capped = vec![0.0; self.nodes.len()];
        let mut children_demand = vec![0.0; self.nodes.len()];
        for &id in self.preorder.iter().rev() {
            self.cap_node(id, demand, &mut capped, &mut children_demand);
        }
        (capped, children_demand)
    }

    /// Sets a node's capped demand (and, for an inner node, the sum of its children's) from
    /// its own demand or its children's capped demands.
    fn cap_node(&self, id: NodeId, demand: &[f64], capped: &mut [f64], children_demand: &mut [f64]) {
        let children = self.children(id);
        let wanted = if children.is_empty() {
            value_at(demand, id)
        } else {
            let sum: f64 = children.iter().map(|c| value_at(capped, *c)).sum();
            if let Some(slot) = children_demand.get_mut(id.0) {
                *slot = sum;
            }
            sum
        };
        let cap = self.node(id).and_then(|n| n.cap).unwrap_or(f64::INFINITY);
        if let Some(slot) = capped.get_mut(id.0) {
            *slot = wanted.min(cap);
        }
    }

    /// Water-fills `amount` over `siblings`, whose capped demands sum to `demand`, writing
    /// every sibling's allocation.
    fn share_out(
        &self,
        amount: f64,
        siblings: &[NodeId],
        demand: f64,
        capped: &[f64],
        allocation: &mut [f64],
        scratch: &mut Scratch,
    ) {
        let mut set = |id: NodeId, gpus: f64| {
            if let Some(slot) = allocation.get_mut(id.0) {
                *slot = gpus;
            }
        };
        if amount >= demand {
            for &id in siblings {
                set(id, value_at(capped, id));
            }
            return;
        }
        let claims = &mut scratch.claims;
        claims.clear();
        for (position, &id) in siblings.iter().enumerate() {
            let limit = value_at(capped, id);
            if limit > 0.0 {
                let weight = self.node(id).map_or(0.0, |n| n.weight);
                claims.push(Claim { id, weight, limit, ratio: limit / weight, position });
            } else {
                set(id, 0.0);
            }
        }
        // By ascending limit / weight, ties in the siblings' order: a few claims by insertion
        // (stable, and the claims are in the siblings' order), many by their places.
        if claims.len() <= 32 {
            for i in 1..claims.len() {
                let mut j = i;
                while j > 0 && claims[j - 1].ratio.total_cmp(&claims[j].ratio).is_gt() {
                    claims.swap(j - 1, j);
                    j -= 1;
                }
            }
        } else {
            claims.sort_unstable_by(|a, b| a.ratio.total_cmp(&b.ratio).then(a.position.cmp(&b.position)));
        }
        water_fill(amount, claims, &mut scratch.weight_from, set);
    }

    fn check_leaf_amounts(&self, amounts: &[f64]) -> Result<(), EntitlementError> {
        if amounts.len() != self.nodes.len() {
            return Err(EntitlementError::DemandCount { given: amounts.len(), nodes: self.nodes.len() });
        }
        for (index, &gpus) in amounts.iter().enumerate() {
            let name = || self.nodes.get(index).map_or_else(String::new, |n| n.name.clone());
            if !gpus.is_finite() || gpus < 0.0 {
                return Err(EntitlementError::InvalidDemand { name: name(), gpus });
            }
            if gpus > 0.0 && !self.is_leaf(NodeId(index)) {
                return Err(EntitlementError::NotALeaf(name()));
            }
        }
        Ok(())
    }
}

fn check_node(node: &Node) -> Result<(), EntitlementError> {
    if !node.weight.is_finite() || node.weight <= 0.0 {
        return Err(EntitlementError::InvalidWeight { name: node.name.clone(), weight: node.weight });
    }
    match node.cap {
        Some(cap) if !cap.is_finite() || cap < 0.0 => {
            Err(EntitlementError::InvalidCap { name: node.name.clone(), cap })
        }
        _ => Ok(()),
    }
}

fn preorder(roots: &[NodeId], children: &[Vec<NodeId>]) -> Vec<NodeId> {
    let mut order = Vec::new();
    let mut stack: Vec<NodeId> = roots.iter().rev().copied().collect();
    while let Some(id) = stack.pop() {
        order.push(id);
        if let Some(below) = children.get(id.0) {
            stack.extend(below.iter().rev());
        }
    }
    order
}

#[inline]
fn value_at(values: &[f64], id: NodeId) -> f64 {
    values.get(id.0).copied().unwrap_or(0.0)
}

/// One sibling's claim on its parent's allocation.
#[derive(Clone, Copy, Debug)]
struct Claim {
    id: NodeId,
    weight: f64,
    /// What it can use: its capped demand.
    limit: f64,
    /// `limit / weight`.
    ratio: f64,
    /// Its place among its siblings.
    position: usize,
}

/// Buffers reused from one division to the next.
#[derive(Clone, Debug, Default)]
struct Scratch {
    claims: Vec<Claim>,
    weight_from: Vec<f64>,
}

/// Weighted max-min fair division of `amount` among claims (each above 0, sorted by
/// ascending limit / weight) whose limits sum to more than `amount`: the largest level L
/// such that every claim gets `min(limit, weight * L)`. Visiting the claims in order, each
/// claim that fits under the fair share of what is left is satisfied; from the first that
/// does not, all the rest are below their limits and share what is left by weight.
fn water_fill(amount: f64, claims: &[Claim], weight_from: &mut Vec<f64>, mut set: impl FnMut(NodeId, f64)) {
    // The weight of each claim and all after it, summed from the end (no cancellation).
    weight_from.clear();
    weight_from.resize(claims.len(), 0.0);
    let mut weight_sum = 0.0;
    for (slot, claim) in weight_from.iter_mut().zip(claims).rev() {
        weight_sum += claim.weight;
        *slot = weight_sum;
    }
    let mut left = amount;
    for (position, claim) in claims.iter().enumerate() {
        let weight_left = weight_from.get(position).copied().unwrap_or(claim.weight);
        if claim.limit <= left * claim.weight / weight_left {
            set(claim.id, claim.limit);
            left = (left - claim.limit).max(0.0);
            continue;
        }
        for c in claims.get(position..).unwrap_or_default() {
            set(c.id, (left * c.weight / weight_left).min(c.limit));
        }
        break;
    }
}

/// The division of one instant.
#[derive(Clone, Debug, PartialEq)]
pub struct Entitlement {
    allocation: Vec<f64>,
    capped_demand: Vec<f64>,
    unallocated: f64,
}

impl Entitlement {
    /// GPUs allocated to a node (its subtree's included).
    #[inline]
    pub fn allocation(&self, id: NodeId) -> f64 {
        value_at(&self.allocation, id)
    }

    /// Every node's allocation, indexed like the nodes.
    #[inline]
    pub fn allocations(&self) -> &[f64] {
        &self.allocation
    }

    /// What a node could use: its demand (its subtree's), capped.
    #[inline]
    pub fn capped_demand(&self, id: NodeId) -> f64 {
        value_at(&self.capped_demand, id)
    }

    /// GPUs no budget has a use for.
    #[inline]
    pub fn unallocated(&self) -> f64 {
        self.unallocated
    }
}

/// A change at one instant.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Change {
    /// A leaf's demand changes by `gpus` (a job submitted: more, ended: less).
    Demand { node: NodeId, gpus: f64 },
    /// A leaf's use changes by `gpus` (a job starts: more, stops: less).
    Use { node: NodeId, gpus: f64 },
    /// The cluster now has `gpus` GPUs.
    Capacity { gpus: f64 },
}

/// A change and when it happens, in seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Event {
    pub at: f64,
    pub change: Change,
}

/// The division of a cluster's GPUs by its budgets' demand, kept up to date where demand
/// changed: a leaf's new demand is carried up its path, and only the levels whose inputs
/// changed (a parent's allocation, its children's capped demands) are divided again, each
/// exactly as [`Hierarchy::allocate`] divides it, so the figures are the same to the last
/// bit. Changes are taken in at once and divided when the division is next read.
#[derive(Clone, Debug)]
pub struct Division<'a> {
    hierarchy: &'a Hierarchy,
    capacity: f64,
    demand: Vec<f64>,
    /// The division, up to date once [`Division::refresh`] has run.
    current: Entitlement,
    /// For each inner node, the sum of its children's capped demands.
    children_demand: Vec<f64>,
    /// Leaves whose demand changed since the last refresh, each once.
    changed: Vec<NodeId>,
    /// Per node: it is in `changed`.
    pending: Vec<bool>,
    /// The capacity changed since the last refresh.
    capacity_changed: bool,
    /// Per node: its children's capped demands changed since the last refresh.
    redo: Vec<bool>,
    /// Per node: it or a node below it must be divided again.
    on_path: Vec<bool>,
    /// The nodes left to visit in a refresh, and whether each one's allocation changed.
    stack: Vec<(NodeId, bool)>,
    /// A level's allocations before it is divided again.
    before: Vec<f64>,
    scratch: Scratch,
}

/// Entitled and delivered GPU-hours per node, integrated as events arrive (in time order),
/// over a [`Division`] brought up to date once per instant; the budgets' weights may change
/// at given moments (grants starting and ending).
#[derive(Clone, Debug)]
pub struct Ledger<'a> {
    division: Division<'a>,
    /// The weights from later moments on (in seconds, in time order), not yet in force.
    reweighs: std::collections::VecDeque<(f64, &'a Hierarchy)>,
    usage: Vec<f64>,
    /// Each node's use: a leaf's own, an inner node's its subtree's.
    used: Vec<f64>,
    now: Option<f64>,
    entitled_gpu_seconds: Vec<f64>,
    delivered_gpu_seconds: Vec<f64>,
    used_gpu_seconds: Vec<f64>,
}

impl<'a> Division<'a> {
    /// No demand: every node is entitled to nothing.
    pub fn new(hierarchy: &'a Hierarchy, capacity: f64) -> Result<Division<'a>, EntitlementError> {
        if !capacity.is_finite() || capacity < 0.0 {
            return Err(EntitlementError::InvalidCapacity(capacity));
        }
        let zeros = vec![0.0; hierarchy.len()];
        let current =
            Entitlement { allocation: zeros.clone(), capped_demand: zeros.clone(), unallocated: capacity };
        Ok(Division {
            hierarchy,
            capacity,
            demand: zeros.clone(),
            current,
            children_demand: zeros,
            changed: Vec::new(),
            pending: vec![false; hierarchy.len()],
            capacity_changed: false,
            redo: vec![false; hierarchy.len()],
            on_path: vec![false; hierarchy.len()],
            stack: Vec::new(),
            before: Vec::new(),
            scratch: Scratch::default(),
        })
    }

    /// A leaf's demand changes by `gpus` (more, or fewer when negative).
    pub fn change_demand(&mut self, node: NodeId, gpus: f64) -> Result<(), EntitlementError> {
        change_leaf_amount(self.hierarchy, &mut self.demand, node, gpus)?;
        if !flag(&self.pending, node) {
            set_flag(&mut self.pending, node);
            self.changed.push(node);
        }
        Ok(())
    }

    /// The cluster now has `gpus` GPUs.
    pub fn set_capacity(&mut self, gpus: f64) -> Result<(), EntitlementError> {
        if !gpus.is_finite() || gpus < 0.0 {
            return Err(EntitlementError::InvalidCapacity(gpus));
        }
        self.capacity = gpus;
        self.capacity_changed = true;
        Ok(())
    }

    /// No node has demand.
    pub fn is_idle(&self) -> bool {
        self.demand.iter().all(|&gpus| gpus == 0.0)
    }

    /// The budgets' weights (and caps) change to `hierarchy`'s, a tree of the same nodes
    /// under the same parents: every level is divided again when the division is next read.
    pub fn reweigh(&mut self, hierarchy: &'a Hierarchy) -> Result<(), EntitlementError> {
        let same = |a: &Node, b: &Node| a.name == b.name && a.parent == b.parent;
        if let Some(other) = (0..self.hierarchy.len().max(hierarchy.len())).find(|&i| {
            match (self.hierarchy.node(NodeId(i)), hierarchy.node(NodeId(i))) {
                (Some(a), Some(b)) => !same(a, b),
                _ => true,
            }
        }) {
            let name = |h: &Hierarchy| h.node(NodeId(other)).map(|n| n.name.clone());
            return Err(EntitlementError::OtherShape(
                name(hierarchy).or(name(self.hierarchy)).unwrap_or_default(),
            ));
        }
        self.hierarchy = hierarchy;
        // Caps enter the capped demands: carried up again from every leaf with demand.
        for id in (0..hierarchy.len()).map(NodeId).filter(|&id| hierarchy.is_leaf(id)) {
            if !flag(&self.pending, id) {
                set_flag(&mut self.pending, id);
                self.changed.push(id);
            }
        }
        self.capacity_changed = true;
        self.redo.iter_mut().for_each(|r| *r = true);
        self.on_path.iter_mut().for_each(|r| *r = true);
        Ok(())
    }

    /// The division of the current demand.
    pub fn entitlement(&mut self) -> &Entitlement {
        self.refresh();
        &self.current
    }

    /// Brings the division up to date with the demand: the changed leaves' capped demands
    /// carried up their paths, then, from the top, every level whose parent's allocation or
    /// children's capped demands changed divided again.
    fn refresh(&mut self) {
        if self.changed.is_empty() && !self.capacity_changed {
            return;
        }
        let hierarchy = self.hierarchy;
        let parent = |id: NodeId| hierarchy.node(id).and_then(|n| n.parent);
        let mut roots_changed = std::mem::take(&mut self.capacity_changed);
        let mut changed = std::mem::take(&mut self.changed);
        for &leaf in &changed {
            if let Some(slot) = self.pending.get_mut(leaf.0) {
                *slot = false;
            }
            let capped_demand = &mut self.current.capped_demand;
            let mut id = leaf;
            loop {
                let before = value_at(capped_demand, id).to_bits();
                hierarchy.cap_node(id, &self.demand, capped_demand, &mut self.children_demand);
                if value_at(capped_demand, id).to_bits() == before {
                    break;
                }
                let Some(up) = parent(id) else {
                    roots_changed = true;
                    break;
                };
                set_flag(&mut self.redo, up);
                id = up;
            }
            if id == leaf {
                // Its capped demand is what it was: no level changes.
                continue;
            }
            // The way down from the top to every level to divide again.
            let mut mark = parent(leaf);
            while let Some(up) = mark {
                if flag(&self.on_path, up) {
                    break;
                }
                set_flag(&mut self.on_path, up);
                mark = parent(up);
            }
        }
        changed.clear();
        self.changed = changed;

        let capped = &self.current.capped_demand;
        let allocation = &mut self.current.allocation;
        let mut stack = std::mem::take(&mut self.stack);
        let roots = hierarchy.roots();
        if roots_changed {
            let roots_demand: f64 = roots.iter().map(|r| value_at(capped, *r)).sum();
            self.current.unallocated = self.capacity - self.capacity.min(roots_demand);
            self.before.clear();
            self.before.extend(roots.iter().map(|r| value_at(allocation, *r)));
            hierarchy.share_out(self.capacity, roots, roots_demand, capped, allocation, &mut self.scratch);
            push_changed(roots, &self.before, allocation, &self.on_path, &mut stack);
        } else {
            stack.extend(roots.iter().filter(|r| flag(&self.on_path, **r)).map(|&r| (r, false)));
        }
        while let Some((id, allocation_changed)) = stack.pop() {
            let children = hierarchy.children(id);
            if allocation_changed || flag(&self.redo, id) {
                self.before.clear();
                self.before.extend(children.iter().map(|c| value_at(allocation, *c)));
                let amount = value_at(allocation, id);
                let demand = value_at(&self.children_demand, id);
                hierarchy.share_out(amount, children, demand, capped, allocation, &mut self.scratch);
                push_changed(children, &self.before, allocation, &self.on_path, &mut stack);
            } else {
                stack.extend(children.iter().filter(|c| flag(&self.on_path, **c)).map(|&c| (c, false)));
            }
            if let Some(slot) = self.redo.get_mut(id.0) {
                *slot = false;
            }
            if let Some(slot) = self.on_path.get_mut(id.0) {
                *slot = false;
            }
        }
        self.stack = stack;
    }
}

impl<'a> Ledger<'a> {
    /// An empty ledger: no demand, no use, nothing integrated.
    pub fn new(hierarchy: &'a Hierarchy, capacity: f64) -> Result<Ledger<'a>, EntitlementError> {
        let zeros = vec![0.0; hierarchy.len()];
        Ok(Ledger {
            division: Division::new(hierarchy, capacity)?,
            reweighs: Default::default(),
            usage: zeros.clone(),
            used: zeros.clone(),
            now: None,
            entitled_gpu_seconds: zeros.clone(),
            delivered_gpu_seconds: zeros.clone(),
            used_gpu_seconds: zeros,
        })
    }

    /// From each moment of `later` (seconds, in time order) on, the weights of its tree, of
    /// the same shape as the ledger's ([`Division::reweigh`]).
    pub fn reweighing(mut self, later: impl IntoIterator<Item = (f64, &'a Hierarchy)>) -> Ledger<'a> {
        self.reweighs.extend(later);
        self
    }

    /// Integrates up to the event's time, then applies its change.
    pub fn apply(&mut self, event: &Event) -> Result<(), EntitlementError> {
        self.advance_to(event.at)?;
        match event.change {
            Change::Demand { node, gpus } => self.division.change_demand(node, gpus)?,
            Change::Use { node, gpus } => {
                change_leaf_amount(self.division.hierarchy, &mut self.usage, node, gpus)?;
                self.roll_up_use(node);
            }
            Change::Capacity { gpus } => self.division.set_capacity(gpus)?,
        }
        Ok(())
    }

    /// No budget has demand or use: until the next event nothing is entitled, delivered
    /// or used (the audit skips such stretches instead of walking them window by window).
    pub fn is_idle(&self) -> bool {
        self.division.is_idle() && self.usage.iter().all(|&gpus| gpus == 0.0)
    }

    /// Integrates the current allocation and use from the last event to `at` seconds, with
    /// the weights in force along the way.
    pub fn advance_to(&mut self, at: f64) -> Result<(), EntitlementError> {
        if !at.is_finite() {
            return Err(EntitlementError::InvalidTime(at));
        }
        while let Some(&(moment, hierarchy)) = self.reweighs.front().filter(|(moment, _)| *moment <= at) {
            if self.now.is_some_and(|now| moment > now) {
                self.integrate_to(moment)?;
            }
            self.division.reweigh(hierarchy)?;
            self.reweighs.pop_front();
        }
        self.integrate_to(at)
    }

    fn integrate_to(&mut self, at: f64) -> Result<(), EntitlementError> {
        let Some(now) = self.now else {
            self.now = Some(at);
            return Ok(());
        };
        if at < now {
            return Err(EntitlementError::OutOfOrder { at, now });
        }
        let seconds = at - now;
        if seconds > 0.0 {
            let allocation = self.division.entitlement().allocations();
            let sums = self
                .entitled_gpu_seconds
                .iter_mut()
                .zip(self.delivered_gpu_seconds.iter_mut())
                .zip(self.used_gpu_seconds.iter_mut());
            for (((entitled, delivered), used), (&gpus, &using)) in
                sums.zip(allocation.iter().zip(&self.used))
            {
                *entitled += gpus * seconds;
                *delivered += gpus.min(using) * seconds;
                *used += using * seconds;
            }
        }
        self.now = Some(at);
        Ok(())
    }

    /// The division at the current instant.
    pub fn entitlement(&mut self) -> Result<&Entitlement, EntitlementError> {
        Ok(self.division.entitlement())
    }

    /// The time of the last event or advance, in seconds.
    pub fn now(&self) -> Option<f64> {
        self.now
    }

    /// GPU-hours a node was entitled to so far.
    pub fn entitled_gpu_hours(&self, id: NodeId) -> f64 {
        value_at(&self.entitled_gpu_seconds, id) / 3600.0
    }

    /// GPU-hours of its entitlement a node used so far.
    pub fn delivered_gpu_hours(&self, id: NodeId) -> f64 {
        value_at(&self.delivered_gpu_seconds, id) / 3600.0
    }

    /// GPU-hours a node (with its subtree) used so far.
    pub fn used_gpu_hours(&self, id: NodeId) -> f64 {
        value_at(&self.used_gpu_seconds, id) / 3600.0
    }

    /// Carries a leaf's new use up its path: each node's is its own plus its children's,
    /// summed in the children's order.
    fn roll_up_use(&mut self, leaf: NodeId) {
        let hierarchy = self.division.hierarchy;
        let mut next = Some(leaf);
        while let Some(id) = next {
            let own = value_at(&self.usage, id);
            let total = hierarchy.children(id).iter().fold(own, |sum, c| sum + value_at(&self.used, *c));
            if let Some(slot) = self.used.get_mut(id.0) {
                *slot = total;
            }
            next = hierarchy.node(id).and_then(|n| n.parent);
        }
    }
}

/// Pushes the nodes of a level just divided whose allocation changed, or below which a
/// level must be divided again.
fn push_changed(
    level: &[NodeId],
    before: &[f64],
    allocation: &[f64],
    on_path: &[bool],
    stack: &mut Vec<(NodeId, bool)>,
) {
    for (&id, &old) in level.iter().zip(before) {
        let changed = value_at(allocation, id).to_bits() != old.to_bits();
        if changed || flag(on_path, id) {
            stack.push((id, changed));
        }
    }
}

fn flag(flags: &[bool], id: NodeId) -> bool {
    flags.get(id.0).copied().unwrap_or(false)
}

fn set_flag(flags: &mut [bool], id: NodeId) {
    if let Some(slot) = flags.get_mut(id.0) {
        *slot = true;
    }
}

/// Replays `events` (in time order) and integrates up to `until` seconds.
pub fn integrate<'a>(
    hierarchy: &'a Hierarchy,
    capacity: f64,
    events: &[Event],
    until: f64,
) -> Result<Ledger<'a>, EntitlementError> {
    let mut ledger = Ledger::new(hierarchy, capacity)?;
    for event in events {
        ledger.apply(event)?;
    }
    ledger.advance_to(until)?;
    Ok(ledger)
}

fn change_leaf_amount(
    hierarchy: &Hierarchy,
    amounts: &mut [f64],
    node: NodeId,
    gpus: f64,
) -> Result<(), EntitlementError> {
    let name = || hierarchy.node(node).map_or_else(String::new, |n| n.name.clone());
    if !hierarchy.is_leaf(node) {
        return Err(EntitlementError::NotALeaf(name()));
    }
    let slot = amounts.get_mut(node.0).ok_or(EntitlementError::UnknownNode(node.0))?;
    let changed = *slot + gpus;
    if !changed.is_finite() || changed < 0.0 {
        return Err(EntitlementError::InvalidDemand { name: name(), gpus: changed });
    }
    *slot = changed;
    Ok(())
}
