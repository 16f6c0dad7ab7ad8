//! Properties of the normalised model on random trees written as KDL: guaranteed GPUs of
//! children (plus what is left unallocated) sum exactly to their parent at every level,
//! and effective shares are the product of normalised shares along the path.

use allot_compiler::ir::Project;
use allot_compiler::{MemoryLoader, compile};

use proptest::prelude::*;

/// The moment compiled at (the inputs hold no grant it would change).
const AT: allot_compiler::units::Instant = 1_767_225_600;

#[derive(Clone, Debug)]
struct Node {
    weight: u32,
    children: Vec<Node>,
}

fn forest() -> impl Strategy<Value = Vec<Node>> {
    let leaf = (1u32..100).prop_map(|weight| Node { weight, children: vec![] });
    let tree = leaf.prop_recursive(5, 80, 6, |inner| {
        (1u32..100, prop::collection::vec(inner, 0..6))
            .prop_map(|(weight, children)| Node { weight, children })
    });
    prop::collection::vec(tree, 1..7)
}

/// Writes a sibling set either as weights or as percentages (summing to at most 100).
fn write(nodes: &[Node], depth: usize, counter: &mut usize, percent: bool, fill: u32, out: &mut String) {
    let total: u64 = nodes.iter().map(|n| u64::from(n.weight)).sum();
    for node in nodes {
        *counter += 1;
        let share = if percent {
            let thousandths = u64::from(node.weight) * u64::from(fill) * 1000 / total;
            format!("\"{}.{:03}%\"", thousandths / 1000, thousandths % 1000)
        } else {
            node.weight.to_string()
        };
        let indent = "    ".repeat(depth);
        out.push_str(&format!("{indent}project p{counter} share={share} {{\n"));
        let child_percent = node.weight % 2 == 0;
        write(&node.children, depth + 1, counter, child_percent, 1 + node.weight, out);
        out.push_str(&format!("{indent}}}\n"));
    }
}

fn source(gpus: &[u32], forest: &[Node], percent: bool) -> String {
    let mut text = String::new();
    for (i, g) in gpus.iter().enumerate() {
        text.push_str(&format!("cluster c{i} gpus={g} gpu-type=h100 gpus-per-node=1\n"));
    }
    text.push_str("contract batch min-runtime=\"1h\" default=#true\n");
    write(forest, 0, &mut 0, percent, 100, &mut text);
    text
}

fn check_level(cluster: &str, parent_gpus: u64, parent_effective: f64, rest: u64, projects: &[Project]) {
    let sum: u64 = projects.iter().map(|p| p.clusters[cluster].guaranteed_gpus).sum();
    assert_eq!(sum + rest, parent_gpus, "children + unallocated == parent on {cluster}");
    for p in projects {
        let a = &p.clusters[cluster];
        assert!(a.guaranteed_gpus <= parent_gpus);
        assert!((a.effective_share - parent_effective * a.normalized_share).abs() < 1e-12);
        // Largest remainder never strays a whole GPU from the exact quota.
        assert!((a.guaranteed_gpus as f64 - parent_gpus as f64 * a.normalized_share).abs() < 1.0 + 1e-9);
        if !p.children.is_empty() {
            check_level(cluster, a.guaranteed_gpus, a.effective_share, a.unallocated_gpus, &p.children);
        } else {
            assert_eq!(a.unallocated_gpus, 0);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn guaranteed_gpus_add_up_at_every_level(
        gpus in prop::collection::vec(1u32..5000, 1..3),
        forest in forest(),
        percent in any::<bool>(),
    ) {
        let text = source(&gpus, &forest, percent);
        let compilation = compile(&MemoryLoader::new([("allot.kdl", text.as_str())]), "allot.kdl", AT);
        prop_assert!(compilation.diagnostics.is_empty(), "{:?}\n{text}", compilation.diagnostics);
        let model = compilation.model.expect("a clean model");
        for cluster in &model.clusters {
            check_level(&cluster.name, cluster.gpus, 1.0, cluster.unallocated_gpus, &model.projects);
        }
    }
}

#[test]
fn weights_divide_the_cluster_among_siblings() {
    let text = "cluster a gpus=10 gpu-type=h100\ncontract b min-runtime=\"1h\" default=#true\n\
                project x share=1\nproject y share=1\nproject z share=1\n";
    let model = compile(&MemoryLoader::new([("allot.kdl", text)]), "allot.kdl", AT).model.unwrap();
    let gpus: Vec<u64> = model.projects.iter().map(|p| p.clusters["a"].guaranteed_gpus).collect();
    assert_eq!(gpus, vec![4, 3, 3]);
    assert_eq!(model.clusters[0].unallocated_gpus, 0);
}

#[test]
fn overrides_and_restrictions_apply_per_cluster() {
    let text = "cluster a gpus=100 gpu-type=h100\ncluster b gpus=10 gpu-type=h100\n\
                contract c min-runtime=\"1h\" default=#true\n\
                project x share=\"50%\" { on b share=\"20%\" max-gpus=5 }\n\
                project y share=\"50%\" { clusters a }\n";
    let model = compile(&MemoryLoader::new([("allot.kdl", text)]), "allot.kdl", AT).model.unwrap();
    let x = &model.projects[0].clusters;
    assert_eq!((x["a"].guaranteed_gpus, x["b"].guaranteed_gpus, x["b"].max_gpus), (50, 2, Some(5)));
    assert!(!model.projects[1].clusters.contains_key("b"));
    assert_eq!(model.clusters[1].unallocated_gpus, 8);
}

#[test]
fn declared_overcommit_scales_shares_down() {
    let text = "cluster a gpus=100 gpu-type=h100 gpus-per-node=4\npolicy overcommit=#true\n\
                contract c min-runtime=\"1h\" default=#true\n\
                project x share=\"75%\"\nproject y share=\"50%\"\n";
    let compilation = compile(&MemoryLoader::new([("allot.kdl", text)]), "allot.kdl", AT);
    assert_eq!(compilation.diagnostics.len(), 1);
    let model = compilation.model.unwrap();
    let gpus: Vec<u64> = model.projects.iter().map(|p| p.clusters["a"].guaranteed_gpus).collect();
    assert_eq!(gpus, vec![60, 40]);
}
