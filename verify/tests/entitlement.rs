//! The entitlement water-filling against hand-checked cases, over time, and its invariants.

use allot_verify::entitlement::{
    Change, Division, EntitlementError, Event, Hierarchy, Ledger, Node, NodeId, integrate,
};
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------
// Entitlement: hand-checked cases
// ---------------------------------------------------------------------------------------

fn allocate(nodes: Vec<Node>, capacity: f64, demand: &[f64]) -> Vec<f64> {
    Hierarchy::new(nodes).unwrap().allocate(capacity, demand).unwrap().allocations().to_vec()
}

fn assert_close(actual: &[f64], expected: &[f64]) {
    assert_eq!(actual.len(), expected.len());
    for (a, e) in actual.iter().zip(expected) {
        assert!((a - e).abs() <= 1e-9 * e.abs().max(1.0), "{actual:?} vs {expected:?}");
    }
}

#[test]
fn a_small_demand_is_met_and_the_rest_shared_by_weight() {
    // 100 GPUs; A (0.5) wants 80, B (0.3) 10, C (0.2) 50. By demand/weight: B 33, A 160,
    // C 250. B's fair share 100 * 0.3 = 30 covers its 10; the other 90 go to A and C by
    // 0.5 : 0.2, i.e. 64.29 and 25.71, both below their demands.
    let nodes = vec![Node::new("a", None, 0.5), Node::new("b", None, 0.3), Node::new("c", None, 0.2)];
    assert_close(&allocate(nodes, 100.0, &[80.0, 10.0, 50.0]), &[90.0 * 5.0 / 7.0, 10.0, 90.0 * 2.0 / 7.0]);
}

#[test]
fn caps_and_subtrees() {
    // 64 GPUs; X (weight 3, cap 40) with X1 and X2 (weight 1 each, 30 each); Y (weight 1) 64.
    // X can use min(60, 40) = 40; its fair share 64 * 3/4 = 48 covers it; Y gets 24.
    // X's 40 go to X1 and X2 equally: 20 each.
    let x = NodeId(0);
    let nodes = vec![
        Node::new("x", None, 3.0).with_cap(40.0),
        Node::new("x1", Some(x), 1.0),
        Node::new("x2", Some(x), 1.0),
        Node::new("y", None, 1.0),
    ];
    let hierarchy = Hierarchy::new(nodes).unwrap();
    let entitlement = hierarchy.allocate(64.0, &[0.0, 30.0, 30.0, 64.0]).unwrap();
    assert_eq!(entitlement.allocations(), &[40.0, 20.0, 20.0, 24.0]);
    assert_eq!(entitlement.capped_demand(x), 40.0);
    assert_eq!(entitlement.unallocated(), 0.0);
}

#[test]
fn without_enough_demand_gpus_stay_unallocated() {
    // 10 GPUs, demands 3 and 4: both met, 3 left over.
    let nodes = vec![Node::new("a", None, 1.0), Node::new("b", None, 9.0)];
    let entitlement = Hierarchy::new(nodes).unwrap().allocate(10.0, &[3.0, 4.0]).unwrap();
    assert_eq!(entitlement.allocations(), &[3.0, 4.0]);
    assert_eq!(entitlement.unallocated(), 3.0);
}

#[test]
fn a_budget_without_demand_neither_gets_nor_dilutes() {
    // 12 GPUs; A (1) and C (2) want 100, B (1) nothing: A 4, C 8.
    let nodes = vec![Node::new("a", None, 1.0), Node::new("b", None, 1.0), Node::new("c", None, 2.0)];
    assert_eq!(allocate(nodes, 12.0, &[100.0, 0.0, 100.0]), vec![4.0, 0.0, 8.0]);
}

#[test]
fn a_capped_parent_passes_its_surplus_up_to_its_siblings() {
    // 30 GPUs; P (1, cap 5) with leaf L wanting 100; Q (1) wanting 100: P 5, L 5, Q 25.
    let p = NodeId(0);
    let nodes = vec![
        Node::new("p", None, 1.0).with_cap(5.0),
        Node::new("l", Some(p), 1.0),
        Node::new("q", None, 1.0),
    ];
    assert_eq!(allocate(nodes, 30.0, &[0.0, 100.0, 100.0]), vec![5.0, 5.0, 25.0]);
}

#[test]
fn bad_trees_and_demands_are_refused() {
    let err = |nodes: Vec<Node>| Hierarchy::new(nodes).unwrap_err();
    assert!(matches!(err(vec![Node::new("a", None, 0.0)]), EntitlementError::InvalidWeight { .. }));
    assert!(matches!(
        err(vec![Node::new("a", None, 1.0).with_cap(-1.0)]),
        EntitlementError::InvalidCap { .. }
    ));
    assert!(matches!(
        err(vec![Node::new("a", Some(NodeId(5)), 1.0)]),
        EntitlementError::UnknownParent { .. }
    ));
    assert_eq!(
        err(vec![Node::new("a", Some(NodeId(1)), 1.0), Node::new("b", Some(NodeId(0)), 1.0)]),
        EntitlementError::NotUnderRoot("a".into())
    );
    let hierarchy =
        Hierarchy::new(vec![Node::new("p", None, 1.0), Node::new("l", Some(NodeId(0)), 1.0)]).unwrap();
    assert_eq!(hierarchy.allocate(8.0, &[1.0, 0.0]).unwrap_err(), EntitlementError::NotALeaf("p".into()));
    assert!(matches!(hierarchy.allocate(8.0, &[0.0, -1.0]), Err(EntitlementError::InvalidDemand { .. })));
    assert!(matches!(hierarchy.allocate(8.0, &[0.0]), Err(EntitlementError::DemandCount { .. })));
    assert!(matches!(hierarchy.allocate(f64::NAN, &[0.0, 0.0]), Err(EntitlementError::InvalidCapacity(_))));
}

// ---------------------------------------------------------------------------------------
// Entitlement over time
// ---------------------------------------------------------------------------------------

#[test]
fn entitled_and_delivered_gpu_hours_between_events() {
    // 8 GPUs, A and B weighted equally. A wants and uses 8 from 0 h to 3 h; B wants 8 from
    // 1 h and uses 4 from 2 h. Allocations: 0-1 h A 8; 1-3 h A 4, B 4; 3-4 h B 8.
    // Entitled: A 8 + 4 + 4 = 16, B 4 + 4 + 8 = 16. Delivered (min(use, allocation)):
    // A 8 + 4 + 4 = 16, B 0 + 4 + 4 = 8.
    let (a, b) = (NodeId(0), NodeId(1));
    let hierarchy = Hierarchy::new(vec![Node::new("a", None, 1.0), Node::new("b", None, 1.0)]).unwrap();
    let hour = 3600.0;
    let at = |hours: f64, change| Event { at: hours * hour, change };
    let events = [
        at(0.0, Change::Demand { node: a, gpus: 8.0 }),
        at(0.0, Change::Use { node: a, gpus: 8.0 }),
        at(1.0, Change::Demand { node: b, gpus: 8.0 }),
        at(2.0, Change::Use { node: b, gpus: 4.0 }),
        at(3.0, Change::Demand { node: a, gpus: -8.0 }),
        at(3.0, Change::Use { node: a, gpus: -8.0 }),
    ];
    let ledger = integrate(&hierarchy, 8.0, &events, 4.0 * hour).unwrap();
    assert_eq!((ledger.entitled_gpu_hours(a), ledger.entitled_gpu_hours(b)), (16.0, 16.0));
    assert_eq!((ledger.delivered_gpu_hours(a), ledger.delivered_gpu_hours(b)), (16.0, 8.0));
}

#[test]
fn an_inner_budget_is_delivered_its_subtrees_use() {
    // 4 GPUs for P (leaves L1, L2) alone. L1 wants 4 and uses 1, L2 wants nothing and uses
    // 3 (borrowed): P is entitled 4 and used 4; L1 is entitled 4, delivered 1; L2 0.
    let p = NodeId(0);
    let hierarchy = Hierarchy::new(vec![
        Node::new("p", None, 1.0),
        Node::new("l1", Some(p), 1.0),
        Node::new("l2", Some(p), 1.0),
    ])
    .unwrap();
    let mut ledger = Ledger::new(&hierarchy, 4.0).unwrap();
    ledger.apply(&Event { at: 0.0, change: Change::Demand { node: NodeId(1), gpus: 4.0 } }).unwrap();
    ledger.apply(&Event { at: 0.0, change: Change::Use { node: NodeId(1), gpus: 1.0 } }).unwrap();
    ledger.apply(&Event { at: 0.0, change: Change::Use { node: NodeId(2), gpus: 3.0 } }).unwrap();
    ledger.advance_to(3600.0).unwrap();
    assert_eq!((ledger.entitled_gpu_hours(p), ledger.delivered_gpu_hours(p)), (4.0, 4.0));
    assert_eq!((ledger.entitled_gpu_hours(NodeId(1)), ledger.delivered_gpu_hours(NodeId(1))), (4.0, 1.0));
    assert_eq!((ledger.entitled_gpu_hours(NodeId(2)), ledger.delivered_gpu_hours(NodeId(2))), (0.0, 0.0));
    assert_eq!(ledger.advance_to(10.0).unwrap_err(), EntitlementError::OutOfOrder { at: 10.0, now: 3600.0 });
}

#[test]
fn capacity_changes_and_bad_events() {
    let hierarchy = Hierarchy::new(vec![Node::new("a", None, 1.0)]).unwrap();
    let a = NodeId(0);
    let events = [
        Event { at: 0.0, change: Change::Demand { node: a, gpus: 10.0 } },
        Event { at: 1800.0, change: Change::Capacity { gpus: 2.0 } },
    ];
    // Half an hour at 8 GPUs, then an hour at 2.
    let ledger = integrate(&hierarchy, 8.0, &events, 5400.0).unwrap();
    assert_eq!(ledger.entitled_gpu_hours(a), 6.0);
    let mut ledger = Ledger::new(&hierarchy, 8.0).unwrap();
    let below_zero = Event { at: 0.0, change: Change::Demand { node: a, gpus: -1.0 } };
    assert!(matches!(ledger.apply(&below_zero), Err(EntitlementError::InvalidDemand { .. })));
    let unknown = Event { at: 0.0, change: Change::Use { node: NodeId(7), gpus: 1.0 } };
    assert_eq!(ledger.apply(&unknown).unwrap_err(), EntitlementError::UnknownNode(7));
    assert!(matches!(ledger.advance_to(f64::NAN), Err(EntitlementError::InvalidTime(_))));
}

// ---------------------------------------------------------------------------------------
// Entitlement: invariants
// ---------------------------------------------------------------------------------------

/// A random tree (each node below an earlier one or at the top), weights, caps, the leaves'
/// demands and a capacity.
fn random_division() -> impl Strategy<Value = (Vec<Node>, Vec<f64>, f64)> {
    let node = (
        any::<usize>(),
        0.1..10.0f64,
        prop::option::weighted(0.3, 0.0..60.0f64),
        0.0..50.0f64,
        any::<bool>(),
    );
    (prop::collection::vec(node, 1..14), 0.0..300.0f64).prop_map(|(specs, capacity)| {
        let mut nodes = Vec::new();
        for (i, (seed, weight, cap, _, _)) in specs.iter().enumerate() {
            let parent = (i > 0 && seed % 3 != 0).then(|| NodeId(seed % i));
            let mut node = Node::new(&format!("n{i}"), parent, *weight);
            node.cap = *cap;
            nodes.push(node);
        }
        let has_children: Vec<bool> =
            (0..nodes.len()).map(|i| nodes.iter().any(|n| n.parent == Some(NodeId(i)))).collect();
        let demand = specs
            .iter()
            .zip(&has_children)
            .map(|((_, _, _, gpus, wants), &inner)| if inner || !wants { 0.0 } else { *gpus })
            .collect();
        (nodes, demand, capacity)
    })
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn divisions_respect_demand_caps_capacity_and_parents((nodes, demand, capacity) in random_division()) {
        let hierarchy = Hierarchy::new(nodes.clone()).unwrap();
        let entitlement = hierarchy.allocate(capacity, &demand).unwrap();
        let allocation = entitlement.allocations();
        for (i, node) in nodes.iter().enumerate() {
            let id = NodeId(i);
            prop_assert!(allocation[i] >= 0.0);
            prop_assert!(allocation[i] <= entitlement.capped_demand(id));
            prop_assert!(allocation[i] <= node.cap.unwrap_or(f64::INFINITY));
            if hierarchy.is_leaf(id) {
                prop_assert!(allocation[i] <= demand[i]);
            } else {
                let children: f64 = hierarchy.children(id).iter().map(|c| allocation[c.0]).sum();
                prop_assert!(close(children, allocation[i]), "children {children} vs {}", allocation[i]);
            }
        }
        let total_demand: f64 = hierarchy.roots().iter().map(|&r| entitlement.capped_demand(r)).sum();
        let allocated: f64 = hierarchy.roots().iter().map(|r| allocation[r.0]).sum();
        prop_assert!(close(allocated, capacity.min(total_demand)), "{allocated} vs {capacity} / {total_demand}");
        prop_assert!(close(entitlement.unallocated(), capacity - allocated));
    }

    #[test]
    fn divisions_are_max_min_fair((nodes, demand, capacity) in random_division()) {
        // Among siblings, one that gets less than it can use is not behind any other in
        // allocation per weight.
        let hierarchy = Hierarchy::new(nodes.clone()).unwrap();
        let entitlement = hierarchy.allocate(capacity, &demand).unwrap();
        let per_weight = |id: NodeId| entitlement.allocation(id) / nodes[id.0].weight;
        let mut levels: Vec<Vec<NodeId>> = vec![hierarchy.roots().to_vec()];
        levels.extend((0..nodes.len()).map(|i| hierarchy.children(NodeId(i)).to_vec()));
        for siblings in levels {
            for &short in siblings.iter().filter(|&&s| !close(entitlement.allocation(s), entitlement.capped_demand(s))) {
                for &other in &siblings {
                    prop_assert!(per_weight(short) >= per_weight(other) - 1e-9 * capacity.max(1.0));
                }
            }
        }
    }

    #[test]
    fn a_heavier_leaf_never_gets_less((nodes, demand, capacity) in random_division(), pick in any::<usize>(), factor in 1.0..10.0f64) {
        let hierarchy = Hierarchy::new(nodes.clone()).unwrap();
        let leaves: Vec<usize> = (0..nodes.len()).filter(|&i| hierarchy.is_leaf(NodeId(i))).collect();
        let leaf = leaves[pick % leaves.len()];
        let before = hierarchy.allocate(capacity, &demand).unwrap().allocation(NodeId(leaf));
        let mut heavier = nodes;
        heavier[leaf].weight *= factor;
        let after = Hierarchy::new(heavier).unwrap().allocate(capacity, &demand).unwrap().allocation(NodeId(leaf));
        prop_assert!(after >= before - 1e-9 * capacity.max(1.0), "{before} -> {after}");
    }
}

/// Changes to a random division: (leaf pick, demand or use, amount, whether time moves,
/// capacity change).
fn random_changes() -> impl Strategy<Value = Vec<(usize, bool, f64, bool, Option<f64>)>> {
    let change = (
        any::<usize>(),
        any::<bool>(),
        prop_oneof![(1u32..9).prop_map(f64::from), 0.0..20.0f64],
        any::<bool>(),
        prop::option::weighted(0.05, 0.0..300.0f64),
    );
    prop::collection::vec(change, 1..60)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn a_ledger_divides_and_integrates_as_a_division_from_scratch(
        (nodes, _, capacity) in random_division(),
        changes in random_changes(),
    ) {
        // The ledger divides again only where demand changed; the division and the
        // integrals are the same to the last bit as dividing from scratch at every instant.
        let hierarchy = Hierarchy::new(nodes.clone()).unwrap();
        let leaves: Vec<usize> = (0..nodes.len()).filter(|&i| hierarchy.is_leaf(NodeId(i))).collect();
        let mut ledger = Ledger::new(&hierarchy, capacity).unwrap();
        let (mut capacity, mut now) = (capacity, 0.0);
        let mut demand = vec![0.0; nodes.len()];
        let mut entitled = vec![0.0; nodes.len()];
        for (pick, is_demand, amount, moves, new_capacity) in changes {
            if moves {
                let seconds = 1.0 + (pick % 7) as f64;
                let division = hierarchy.allocate(capacity, &demand).unwrap();
                for (sum, gpus) in entitled.iter_mut().zip(division.allocations()) {
                    *sum += gpus * seconds;
                }
                now += seconds;
            }
            let node = NodeId(leaves[pick % leaves.len()]);
            // Down by the amount when it has that much, else up.
            let gpus = if demand[node.0] >= amount && pick % 2 == 0 { -amount } else { amount };
            let change = match new_capacity {
                Some(gpus) => {
                    capacity = gpus;
                    Change::Capacity { gpus }
                }
                None if is_demand => {
                    demand[node.0] += gpus;
                    Change::Demand { node, gpus }
                }
                None => Change::Use { node, gpus: amount },
            };
            ledger.apply(&Event { at: now, change }).unwrap();
            let expected = hierarchy.allocate(capacity, &demand).unwrap();
            let division = ledger.entitlement().unwrap();
            for i in 0..nodes.len() {
                prop_assert_eq!(division.allocation(NodeId(i)).to_bits(), expected.allocation(NodeId(i)).to_bits());
                prop_assert_eq!(division.capped_demand(NodeId(i)).to_bits(), expected.capped_demand(NodeId(i)).to_bits());
            }
            prop_assert_eq!(division.unallocated().to_bits(), expected.unallocated().to_bits());
        }
        // Integrate one more second, then compare.
        let division = hierarchy.allocate(capacity, &demand).unwrap();
        for (sum, gpus) in entitled.iter_mut().zip(division.allocations()) {
            *sum += gpus * 1.0;
        }
        ledger.advance_to(now + 1.0).unwrap();
        for (i, seconds) in entitled.iter().enumerate() {
            prop_assert_eq!(ledger.entitled_gpu_hours(NodeId(i)).to_bits(), (seconds / 3600.0).to_bits());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn a_division_read_after_many_changes_is_the_division_from_scratch(
        (nodes, _, capacity) in random_division(),
        changes in random_changes(),
    ) {
        // As the simulator uses it: several changes (the same leaf up and down among them)
        // between two reads; every read is the same to the last bit as dividing from scratch.
        let hierarchy = Hierarchy::new(nodes.clone()).unwrap();
        let leaves: Vec<usize> = (0..nodes.len()).filter(|&i| hierarchy.is_leaf(NodeId(i))).collect();
        let mut division = Division::new(&hierarchy, capacity).unwrap();
        let mut capacity = capacity;
        let mut demand = vec![0.0; nodes.len()];
        for (pick, up_and_down, amount, read, new_capacity) in changes {
            let node = NodeId(leaves[pick % leaves.len()]);
            if let Some(gpus) = new_capacity {
                capacity = gpus;
                division.set_capacity(gpus).unwrap();
            }
            // Down by the amount when it has that much (a run that ended), else up.
            let gpus = if demand[node.0] >= amount && pick % 2 == 0 { -amount } else { amount };
            demand[node.0] += gpus;
            division.change_demand(node, gpus).unwrap();
            if up_and_down && demand[node.0] >= amount {
                demand[node.0] -= amount;
                division.change_demand(node, -amount).unwrap();
            }
            if read {
                let expected = hierarchy.allocate(capacity, &demand).unwrap();
                let now = division.entitlement();
                for i in 0..nodes.len() {
                    prop_assert_eq!(now.allocation(NodeId(i)).to_bits(), expected.allocation(NodeId(i)).to_bits());
                    prop_assert_eq!(now.capped_demand(NodeId(i)).to_bits(), expected.capped_demand(NodeId(i)).to_bits());
                }
                prop_assert_eq!(now.unallocated().to_bits(), expected.unallocated().to_bits());
            }
        }
        prop_assert_eq!(division.is_idle(), demand.iter().all(|&gpus| gpus == 0.0));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn a_division_reweighed_is_the_division_of_the_new_weights_from_scratch(
        (nodes, demand, capacity) in random_division(),
        factors in prop::collection::vec(0.1..10.0f64, 14),
        changes in random_changes(),
    ) {
        // Grants change the weights at a moment: the division then, and every change after,
        // is the same to the last bit as dividing by the new weights from scratch.
        let old = Hierarchy::new(nodes.clone()).unwrap();
        let mut reweighed = nodes.clone();
        for (node, factor) in reweighed.iter_mut().zip(&factors) {
            node.weight *= factor;
        }
        let new = Hierarchy::new(reweighed).unwrap();
        let leaves: Vec<usize> = (0..nodes.len()).filter(|&i| old.is_leaf(NodeId(i))).collect();
        let mut division = Division::new(&old, capacity).unwrap();
        let mut demand_now = vec![0.0; nodes.len()];
        for &leaf in &leaves {
            if demand[leaf] > 0.0 {
                division.change_demand(NodeId(leaf), demand[leaf]).unwrap();
                demand_now[leaf] = demand[leaf];
            }
        }
        division.entitlement();
        division.reweigh(&new).unwrap();
        let same = |division: &mut Division, demand: &[f64]| -> Result<(), TestCaseError> {
            let expected = new.allocate(capacity, demand).unwrap();
            let now = division.entitlement();
            for i in 0..nodes.len() {
                prop_assert_eq!(now.allocation(NodeId(i)).to_bits(), expected.allocation(NodeId(i)).to_bits());
            }
            Ok(())
        };
        same(&mut division, &demand_now)?;
        for (pick, _, amount, _, _) in changes {
            let node = NodeId(leaves[pick % leaves.len()]);
            let gpus = if demand_now[node.0] >= amount && pick % 2 == 0 { -amount } else { amount };
            demand_now[node.0] += gpus;
            division.change_demand(node, gpus).unwrap();
            same(&mut division, &demand_now)?;
        }
    }
}

#[test]
fn a_reweighing_to_another_tree_is_refused() {
    let a = Hierarchy::new(vec![Node::new("a", None, 1.0), Node::new("b", None, 1.0)]).unwrap();
    let other = Hierarchy::new(vec![Node::new("a", None, 1.0), Node::new("c", None, 1.0)]).unwrap();
    let more =
        Hierarchy::new(vec![Node::new("a", None, 1.0), Node::new("b", None, 1.0), Node::new("c", None, 1.0)])
            .unwrap();
    let mut division = Division::new(&a, 8.0).unwrap();
    assert_eq!(division.reweigh(&other), Err(EntitlementError::OtherShape("c".into())));
    assert_eq!(division.reweigh(&more), Err(EntitlementError::OtherShape("c".into())));
}
