//! The YARN target: its rules against Hadoop's own fixtures, its output against the rules
//! and the model (round trip), snapshots of every example with a YARN binding, and the
//! sums of random trees.

mod inputs;

use std::path::{Path, PathBuf};

use allot_compiler::ir::{CapacityMode, Model, Project};
use allot_compiler::test_support::model;
use allot_targets::yarn::{Yarn, capacity_rules, fair_rules, validate_resource_types, xml};
use allot_targets::{Emitted, Target};
use proptest::prelude::*;

/// Hadoop's fixtures, from the shared reference folder.
fn fixtures() -> Option<PathBuf> {
    inputs::shared("yarn-fixtures", "YARN fixtures")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The rules of the Capacity Scheduler on the text of a `capacity-scheduler.xml`.
fn capacity_problems(text: &str, unique_leaf_names: bool) -> Vec<String> {
    capacity_rules::validate(&capacity_rules::read(text).unwrap(), unique_leaf_names)
}

/// The rules of the Fair Scheduler on the text of a `fair-scheduler.xml`.
fn fair_problems(text: &str) -> Vec<String> {
    fair_rules::validate(&xml::parse(text).unwrap())
}

#[test]
fn hadoops_valid_files_pass() {
    let Some(dir) = fixtures() else { return };
    for file in ["rm-conf/capacity-scheduler.xml", "cs-validation-pass/capacity-scheduler.xml"] {
        assert_eq!(capacity_problems(&read(&dir.join(file)), false), Vec::<String>::new(), "{file}");
    }
    for file in [
        "fair-scheduler-sameleafqueue.xml",
        "fair-scheduler-max-resources-percentage.xml",
        "fair-scheduler-conversion.xml",
        "fair-scheduler-orderingpolicy-mixed.xml",
    ] {
        assert_eq!(fair_problems(&read(&dir.join(file))), Vec::<String>::new(), "{file}");
    }
    let types = xml::parse(&read(&dir.join("resource-types-test.xml"))).unwrap();
    assert_eq!(validate_resource_types(&xml::properties(&types).unwrap()), Vec::<String>::new());
}

#[test]
fn hadoops_invalid_files_fail_for_the_stated_reason() {
    let Some(dir) = fixtures() else { return };
    let problems = capacity_problems(&read(&dir.join("cs-validation-fail/capacity-scheduler.xml")), false);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("root.default") && problems[0].contains("leaf-queue-template"),
        "{problems:?}"
    );
    let error = xml::parse(&read(&dir.join("fair-scheduler-invalid.xml"))).unwrap_err();
    assert!(error.to_string().contains("not well-formed"), "{error}");
}

#[test]
fn the_rules_catch_what_the_resourcemanager_refuses() {
    let config = |properties: &[(&str, &str)]| {
        let body: String = properties
            .iter()
            .map(|(k, v)| {
                format!("<property><name>yarn.scheduler.capacity.{k}</name><value>{v}</value></property>")
            })
            .collect();
        format!("<configuration>{body}</configuration>")
    };
    let cases: &[(&[(&str, &str)], &str)] = &[
        (&[("root.a.capacity", "100")], "R1"),
        (&[("root.queues", "a,b"), ("root.a.capacity", "60"), ("root.b.capacity", "30")], "R6"),
        (&[("root.queues", "a,b"), ("root.a.capacity", "60"), ("root.b.capacity", "2w")], "R4"),
        (&[("root.queues", "a"), ("root.a.capacity", "140")], "R2"),
        (&[("root.queues", "a"), ("root.a.capacity", "20000w")], "R3"),
        (&[("root.queues", "a"), ("root.a.capacity", "100"), ("root.a.maximum-capacity", "50")], "R9"),
        (&[("root.queues", "a"), ("root.a.capacity", "100"), ("root.a.state", "PAUSED")], "R10"),
        (&[("root.queues", "a"), ("root.a.capacity", "[vcores=2]")], "R8"),
        (&[("root.queues", "a,b"), ("root.a.capacity", "0"), ("root.b.capacity", "0")], "R7"),
        (&[("root.queues", "a,root"), ("root.a.capacity", "50"), ("root.root.capacity", "50")], "R12"),
        (
            &[
                ("root.queues", "a"),
                ("root.a.capacity", "[memory=100,vcores=1]"),
                ("root.a.queues", "b"),
                ("root.a.b.capacity", "[memory=200,vcores=1]"),
            ],
            "R5",
        ),
        (
            &[
                ("root.queues", "a"),
                ("root.a.capacity", "100"),
                ("root.a.queues", "b"),
                ("root.a.b.capacity", "100"),
                ("root.a.reservable", "true"),
            ],
            "R14",
        ),
    ];
    for (properties, rule) in cases {
        let problems = capacity_problems(&config(properties), false);
        assert!(problems.iter().any(|p| p.contains(&format!("{rule}:"))), "{rule} not found in {problems:?}");
    }
    let same_leaf = config(&[
        ("root.queues", "a,b"),
        ("root.a.capacity", "50"),
        ("root.b.capacity", "50"),
        ("root.a.queues", "x"),
        ("root.a.x.capacity", "100"),
        ("root.b.queues", "x"),
        ("root.b.x.capacity", "100"),
    ]);
    assert!(capacity_problems(&same_leaf, false).is_empty());
    assert!(capacity_problems(&same_leaf, true).iter().any(|p| p.contains("R11:")));

    let fair = |body: &str| fair_problems(&format!("<allocations>{body}</allocations>"));
    assert!(fair("<queue name=\"a.b\"/>").iter().any(|p| p.contains("period")));
    assert!(fair("<queue name=\"root\"/><queue name=\"x\"/>").iter().any(|p| p.contains("alongside")));
    assert!(
        fair("<queue name=\"a\"><maxResources>memory-mb=-1</maxResources></queue>")
            .iter()
            .any(|p| p.contains("negative"))
    );
    assert!(fair("<queue name=\"a\"><schedulingPolicy>fair</schedulingPolicy><queue name=\"b\"><schedulingPolicy>drf</schedulingPolicy></queue></queue>").iter().any(|p| p.contains("drf child")));
    assert!(
        fair("<queue name=\"a\" type=\"parent\"><reservation/></queue>")
            .iter()
            .any(|p| p.contains("reservation"))
    );
    assert!(
        fair("<queuePlacementPolicy><rule name=\"specified\" create=\"false\"/></queuePlacementPolicy>")
            .iter()
            .any(|p| p.contains("last rule"))
    );
    assert_eq!(fair_problems("<configuration/>").len(), 1);
}

fn yarn_examples() -> Vec<(String, Model)> {
    let out = inputs::examples(|m| m.clusters.iter().any(|c| c.bindings.yarn.is_some()));
    assert!(!out.is_empty(), "no example has a YARN binding");
    out
}

#[test]
fn examples_build_validate_and_match_their_snapshots() {
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(false);
    let _guard = settings.bind_to_scope();
    for (name, model) in yarn_examples() {
        let Emitted { files, violations } = Yarn.emit(&model);
        assert_eq!(violations, vec![], "{name}");
        assert_eq!(Yarn.emit(&model).files, files, "{name}: emit is deterministic");
        for file in &files {
            insta::assert_snapshot!(format!("yarn-{name}-{}", file.path.replace('/', "-")), &file.contents);
        }
        insta::assert_snapshot!(format!("yarn-{name}-FIDELITY.md"), Yarn.fidelity(&model).to_markdown());
    }
}

/// Checks a parsed queue against the projects it stands for: same children (plus the
/// queues allot adds), percentages equal to the normalised shares within rounding.
fn compare(queue: &capacity_rules::ParsedQueue, projects: &[&Project], cluster: &str) {
    let names: Vec<&str> = queue.children.iter().map(|c| c.path.rsplit('.').next().unwrap()).collect();
    let project_names: Vec<&str> = projects.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names.iter().filter(|n| !n.starts_with('_')).copied().collect::<Vec<_>>(),
        project_names,
        "{}",
        queue.path
    );
    let mut sum = 0.0;
    for child in &queue.children {
        let percent: f64 = child.capacity.as_deref().unwrap().parse().unwrap();
        sum += percent;
        let name = child.path.rsplit('.').next().unwrap();
        if let Some(project) = projects.iter().find(|p| p.name == name) {
            let share = project.clusters[cluster].normalized_share * 100.0;
            assert!((percent - share).abs() < 0.001 + 1e-9, "{}: {percent} vs {share}", child.path);
            let grandchildren: Vec<&Project> =
                project.children.iter().filter(|c| c.clusters.contains_key(cluster)).collect();
            compare(child, &grandchildren, cluster);
        }
    }
    if !queue.children.is_empty() {
        assert!((sum - 100.0).abs() < 1e-9, "{}: children sum to {sum}", queue.path);
    }
}

#[test]
fn emitted_files_round_trip_to_the_model() {
    for (name, model) in yarn_examples() {
        for file in Yarn.emit(&model).files {
            let cluster = file.path.split('/').next().unwrap();
            let top: Vec<&Project> =
                model.projects.iter().filter(|p| p.clusters.contains_key(cluster)).collect();
            let binding =
                model.clusters.iter().find(|c| c.name == cluster).unwrap().bindings.yarn.as_ref().unwrap();
            if file.path.ends_with("/capacity-scheduler.xml") {
                let hierarchy = capacity_rules::hierarchy(&capacity_rules::read(&file.contents).unwrap());
                if binding.capacity_mode == CapacityMode::Percent {
                    compare(&hierarchy, &top, cluster);
                } else {
                    compare_gpus(&hierarchy, &top, cluster);
                }
            } else if file.path.ends_with("/fair-scheduler.xml") {
                let allocations = xml::parse(&file.contents).unwrap();
                let root = allocations.children.iter().find(|c| c.name == "queue").unwrap();
                compare_weights(root, &top, cluster);
            } else {
                continue;
            }
            eprintln!("{name}/{}: round trip ok", file.path);
        }
    }
}

/// Absolute mode: each queue's GPUs are the project's guaranteed GPUs.
fn compare_gpus(queue: &capacity_rules::ParsedQueue, projects: &[&Project], cluster: &str) {
    for project in projects {
        let child =
            queue.children.iter().find(|c| c.path.rsplit('.').next() == Some(project.name.as_str())).unwrap();
        let vector = child.capacity.as_deref().unwrap();
        let gpus = vector
            .trim_matches(['[', ']'])
            .split(',')
            .find_map(|kv| kv.strip_prefix("yarn.io/gpu="))
            .unwrap();
        assert_eq!(gpus.parse::<u64>().unwrap(), project.clusters[cluster].guaranteed_gpus, "{}", child.path);
        let below: Vec<&Project> =
            project.children.iter().filter(|c| c.clusters.contains_key(cluster)).collect();
        compare_gpus(child, &below, cluster);
    }
}

/// Fair Scheduler: the same queues, weights equal to the shares within rounding.
fn compare_weights(queue: &xml::Element, projects: &[&Project], cluster: &str) {
    let children: Vec<&xml::Element> = queue.children.iter().filter(|c| c.name == "queue").collect();
    let names: Vec<&str> =
        children.iter().filter_map(|c| c.get_attribute("name")).filter(|n| !n.starts_with('_')).collect();
    assert_eq!(names, projects.iter().map(|p| p.name.as_str()).collect::<Vec<_>>());
    for project in projects {
        let child = children.iter().find(|c| c.get_attribute("name") == Some(project.name.as_str())).unwrap();
        let weight: f64 = child.child_text("weight").unwrap().trim().parse().unwrap();
        assert!((weight - project.clusters[cluster].normalized_share * 100.0).abs() < 0.001 + 1e-9);
        let below: Vec<&Project> =
            project.children.iter().filter(|c| c.clusters.contains_key(cluster)).collect();
        compare_weights(child, &below, cluster);
    }
}

/// Budget files with one YARN cluster and two levels of projects, by weights or by
/// percentages (at most 20% each, so that no level overcommits).
fn random_tree() -> impl Strategy<Value = String> {
    (prop::collection::vec((1u32..40, prop::collection::vec(1u32..40, 0..5)), 1..5), 1u64..400, any::<bool>())
        .prop_map(|(groups, gpus, weights)| {
            let share = |n: u32| if weights { n.to_string() } else { format!("\"{}%\"", n.min(100 / 5)) };
            let mut text = format!(
                "cluster c gpus={gpus} gpu-type=h100 gpus-per-node=1 {{\n    yarn capacity fair\n}}\ncontract b min-runtime=\"1h\" default=#true\n"
            );
            for (i, (top, children)) in groups.iter().enumerate() {
                text.push_str(&format!("project p{i} share={} {{\n", share(*top)));
                for (j, child) in children.iter().enumerate() {
                    text.push_str(&format!("    project p{i}-{j} share={}\n", share(*child)));
                }
                text.push_str("}\n");
            }
            text
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn capacities_sum_to_100_at_every_level(text in random_tree()) {
        let model = model(&text);
        let Emitted { files, violations } = Yarn.emit(&model);
        prop_assert_eq!(violations, vec![]);
        let capacity = files.iter().find(|f| f.path == "c/capacity-scheduler.xml").unwrap();
        let hierarchy = capacity_rules::hierarchy(&capacity_rules::read(&capacity.contents).unwrap());
        let top: Vec<&Project> = model.projects.iter().collect();
        compare(&hierarchy, &top, "c");
    }
}
