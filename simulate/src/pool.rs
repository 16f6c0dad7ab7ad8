//! A cluster's nodes for the simulator: free GPUs per node, indexed so that a job is placed
//! best fit (on the fullest node it fits) or across whole idle nodes, and the room a set of
//! running jobs would leave if given back.

use std::collections::BTreeSet;

/// What a pool would have free once some jobs are given back: checked one job at a time.
pub(super) struct Room<'p> {
    pub(super) pool: &'p Pool,
    pub(super) gpus: u32,
    /// Free GPUs of each node, counting what was given back.
    pub(super) free: Vec<u32>,
    /// GPUs on idle nodes, counting those the given-back jobs leave idle.
    pub(super) idle: u32,
}

impl Room<'_> {
    /// Gives back a job's (node, GPUs); whether the GPUs asked for fit now.
    pub(super) fn give_back(&mut self, placement: &[(u32, u32)]) -> bool {
        let pool = self.pool;
        let mut fits = false;
        for &(node, gpus) in placement {
            let free = &mut self.free[node as usize];
            *free += gpus;
            let capacity = pool.capacity[node as usize];
            // Idle now, and not before (a node with a job given back was not idle).
            if *free == capacity {
                self.idle += capacity;
            }
            fits |= self.gpus <= pool.per_node && *free >= self.gpus;
        }
        fits || (self.gpus > pool.per_node && self.idle >= self.gpus)
    }
}

/// A cluster's nodes, indexed by free GPUs.
pub(super) struct Pool {
    pub(super) per_node: u32,
    pub(super) capacity: Vec<u32>,
    pub(super) free: Vec<u32>,
    /// Nodes by free GPUs: `by_free[f]` holds the nodes with `f` free, idle or not.
    pub(super) by_free: Vec<BTreeSet<u32>>,
    /// Nodes with all their GPUs free.
    pub(super) idle: BTreeSet<u32>,
    /// Free GPUs in all, and on idle nodes.
    pub(super) free_gpus: u64,
    pub(super) idle_gpus: u64,
}

impl Pool {
    /// Whole nodes of `per_node` GPUs, and one smaller node for a remainder.
    pub(super) fn new(gpus: u64, per_node: u64) -> Pool {
        let per_node = per_node.min(u64::from(u32::MAX)) as u32;
        let mut capacity = vec![per_node; (gpus / u64::from(per_node)) as usize];
        let remainder = (gpus % u64::from(per_node)) as u32;
        if remainder > 0 {
            capacity.push(remainder);
        }
        let mut by_free = vec![BTreeSet::new(); per_node as usize + 1];
        for (node, &c) in capacity.iter().enumerate() {
            by_free[c as usize].insert(node as u32);
        }
        Pool {
            per_node,
            free: capacity.clone(),
            idle: (0..capacity.len() as u32).collect(),
            capacity,
            by_free,
            free_gpus: gpus,
            idle_gpus: gpus,
        }
    }

    /// Places `gpus`: on the fullest node that fits, or across whole idle nodes.
    pub(super) fn place(&mut self, gpus: u32) -> Option<Vec<(u32, u32)>> {
        self.place_where(gpus, None)
    }

    /// Whether `gpus` can be placed now.
    pub(super) fn fits(&self, gpus: u32) -> bool {
        if gpus <= self.per_node {
            gpus == 0 || (gpus..=self.per_node).any(|f| !self.by_free[f as usize].is_empty())
        } else {
            self.idle_gpus >= u64::from(gpus)
        }
    }

    /// Places `gpus` as [`Pool::place`] does, but only where `spare` (per node, GPUs that a
    /// reservation leaves free) allows, and takes them from `spare`.
    pub(super) fn place_within(&mut self, gpus: u32, spare: &mut [u32]) -> Option<Vec<(u32, u32)>> {
        self.place_where(gpus, Some(spare))
    }

    /// Places `gpus` on the fullest node that fits, or across whole idle nodes, where `spare`
    /// allows when there is one (and takes them from it).
    pub(super) fn place_where(
        &mut self,
        gpus: u32,
        mut spare: Option<&mut [u32]>,
    ) -> Option<Vec<(u32, u32)>> {
        let allows = |spare: &Option<&mut [u32]>, node: u32, gpus: u32| {
            spare.as_ref().is_none_or(|spare| spare[node as usize] >= gpus)
        };
        if gpus == 0 {
            return Some(Vec::new());
        }
        if gpus <= self.per_node {
            let node = (gpus..=self.per_node)
                .find_map(|f| self.by_free[f as usize].iter().find(|&&n| allows(&spare, n, gpus)).copied())?;
            self.take(node, gpus);
            if let Some(spare) = spare.as_deref_mut() {
                spare[node as usize] -= gpus;
            }
            return Some(vec![(node, gpus)]);
        }
        let mut chosen = Vec::new();
        let mut room = 0;
        for &node in &self.idle {
            if room >= gpus {
                break;
            }
            let whole = self.capacity[node as usize];
            if allows(&spare, node, whole) {
                room += whole;
                chosen.push(node);
            }
        }
        if room < gpus {
            return None;
        }
        Some(
            chosen
                .into_iter()
                .map(|node| {
                    let whole = self.capacity[node as usize];
                    self.take(node, whole);
                    if let Some(spare) = spare.as_deref_mut() {
                        spare[node as usize] = 0;
                    }
                    (node, whole)
                })
                .collect(),
        )
    }

    /// Where [`Pool::place`] would put `gpus` if each node had `free` GPUs free: the fullest
    /// node that fits (the lowest numbered among equals), or whole idle nodes in order.
    pub(super) fn shadow(&self, gpus: u32, free: &[u32]) -> Vec<(u32, u32)> {
        if gpus == 0 {
            return Vec::new();
        }
        if gpus <= self.per_node {
            let best = (0..free.len()).filter(|&n| free[n] >= gpus).min_by_key(|&n| (free[n], n));
            return best.map(|n| vec![(n as u32, gpus)]).unwrap_or_default();
        }
        let mut chosen = Vec::new();
        let mut room = 0;
        for (node, &f) in free.iter().enumerate() {
            if room >= gpus {
                break;
            }
            if f == self.capacity[node] {
                room += f;
                chosen.push((node as u32, f));
            }
        }
        chosen
    }

    /// Room for `gpus` as running jobs are given back one by one (nothing changes).
    pub(super) fn room_for(&self, gpus: u32) -> Room<'_> {
        Room { pool: self, gpus, free: self.free.clone(), idle: self.idle_gpus as u32 }
    }

    pub(super) fn take(&mut self, node: u32, gpus: u32) {
        let free = &mut self.free[node as usize];
        self.by_free[*free as usize].remove(&node);
        if self.idle.remove(&node) {
            self.idle_gpus -= u64::from(self.capacity[node as usize]);
        }
        self.free_gpus -= u64::from(gpus);
        *free -= gpus;
        self.by_free[*free as usize].insert(node);
    }

    pub(super) fn free(&mut self, placement: &[(u32, u32)]) {
        for &(node, gpus) in placement {
            let free = &mut self.free[node as usize];
            self.by_free[*free as usize].remove(&node);
            *free += gpus;
            self.by_free[*free as usize].insert(node);
            self.free_gpus += u64::from(gpus);
            if *free == self.capacity[node as usize] && self.idle.insert(node) {
                self.idle_gpus += u64::from(*free);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn best_fit_keeps_whole_nodes_free() {
        let mut pool = Pool::new(16, 8);
        let a = pool.place(6).expect("fits");
        let b = pool.place(2).expect("fits");
        assert_eq!(a[0].0, b[0].0, "the 2-GPU job fills the node the 6-GPU job left");
        assert_eq!(pool.place(8).expect("an idle node").len(), 1);
        assert!(pool.place(1).is_none());
        pool.free(&b);
        assert!(!pool.room_for(16).give_back(&a));
    }

    #[test]
    pub(super) fn large_jobs_take_whole_idle_nodes() {
        let mut pool = Pool::new(20, 8);
        let small = pool.place(5).expect("fits");
        assert!(pool.place(16).is_none(), "one 8-GPU node and the 4-GPU remainder are idle: 12 GPUs");
        assert!(pool.room_for(16).give_back(&small));
        pool.free(&small);
        assert_eq!(pool.place(16).expect("two idle nodes").len(), 2);
    }
}
