//! The Kubernetes targets: every emitted object against the real CRD schemas (after the
//! OpenAPI-to-JSON-Schema rewrites), the schedulers' webhook rules, snapshots of the
//! examples, name collisions, and quotas of random trees.

mod inputs;

use std::collections::BTreeMap;

use allot_compiler::ir::Model;
use allot_compiler::test_support::model;
use allot_targets::kubernetes::{kai::Kai, kueue::Kueue, volcano::Volcano, yunikorn::YuniKorn};
use allot_targets::{Emitted, OutputFile, Target};
use proptest::prelude::*;
use serde_json::{Value, json};

fn targets() -> Vec<Box<dyn Target>> {
    vec![Box::new(Kueue), Box::new(Kai), Box::new(Volcano), Box::new(YuniKorn)]
}

/// The CRDs from the shared reference folder (`ALLOT_SHARED_DIR` overrides `../shared`),
/// by (apiVersion, kind): the served version's schema, rewritten for a JSON Schema
/// validator. `None` when absent, unless `ALLOT_REQUIRE_SHARED` is set.
fn schemas() -> Option<BTreeMap<(String, String), Value>> {
    let dir = inputs::shared("crds", "CRDs")?;
    let mut out = BTreeMap::new();
    for project in std::fs::read_dir(&dir).unwrap() {
        for file in std::fs::read_dir(project.unwrap().path()).unwrap() {
            let path = file.unwrap().path();
            if path.extension().is_none_or(|e| e != "yaml") {
                continue;
            }
            let crd: Value = serde_saphyr::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            let group = crd["spec"]["group"].as_str().unwrap();
            let kind = crd["spec"]["names"]["kind"].as_str().unwrap();
            for version in crd["spec"]["versions"].as_array().unwrap() {
                let api_version = format!("{group}/{}", version["name"].as_str().unwrap());
                let schema = rewrite(version["schema"]["openAPIV3Schema"].clone());
                out.insert((api_version, kind.to_string()), schema);
            }
        }
    }
    Some(out)
}

/// OpenAPI v3 (as Kubernetes uses it) to JSON Schema: `nullable` becomes a null type,
/// int-or-string accepts both, boolean exclusive bounds become numeric ones, and objects
/// reject unknown fields unless they preserve them (the API server would prune them; a
/// typo should fail here).
fn rewrite(mut schema: Value) -> Value {
    if let Some(object) = schema.as_object_mut() {
        if object.get("x-kubernetes-int-or-string") == Some(&json!(true)) {
            object.remove("type");
            object.insert("anyOf".into(), json!([{ "type": "integer" }, { "type": "string" }]));
        }
        if object.remove("nullable") == Some(json!(true))
            && let Some(Value::String(t)) = object.get("type").cloned()
        {
            object.insert("type".into(), json!([t, "null"]));
        }
        // OpenAPI 3.0's boolean exclusive bounds are numbers in JSON Schema 2020-12.
        for (exclusive, bound) in [("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")] {
            if let Some(Value::Bool(flag)) = object.get(exclusive).cloned() {
                object.remove(exclusive);
                if flag && let Some(value) = object.remove(bound) {
                    object.insert(exclusive.into(), value);
                }
            }
        }
        let preserve = object.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true));
        if object.contains_key("properties") && !object.contains_key("additionalProperties") && !preserve {
            object.insert("additionalProperties".into(), json!(false));
        }
        for value in object.values_mut() {
            *value = rewrite(value.take());
        }
    } else if let Some(array) = schema.as_array_mut() {
        for value in array {
            *value = rewrite(value.take());
        }
    }
    schema
}

fn dns_subdomain(name: &str) -> bool {
    name.len() <= 253
        && name.split('.').all(|part| {
            !part.is_empty()
                && part.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        })
}

/// Every object's schema errors; objects of kinds with no CRD (ConfigMaps, Kueue's
/// Configuration) are counted apart.
fn schema_errors(
    schemas: &BTreeMap<(String, String), Value>,
    files: &[OutputFile],
) -> (Vec<String>, usize, usize) {
    let (mut errors, mut checked, mut skipped) = (Vec::new(), 0, 0);
    for file in files.iter().filter(|f| f.path.ends_with(".yaml")) {
        let objects: Vec<Value> = serde_saphyr::from_multiple(&file.contents).unwrap();
        for object in objects {
            let key = (
                object["apiVersion"].as_str().unwrap().to_string(),
                object["kind"].as_str().unwrap().to_string(),
            );
            let Some(schema) = schemas.get(&key) else {
                skipped += 1;
                continue;
            };
            checked += 1;
            let name = object["metadata"]["name"].as_str().unwrap_or("");
            if !dns_subdomain(name) {
                errors.push(format!("{}: {name} is not a DNS-1123 subdomain", file.path));
            }
            let validator = jsonschema::validator_for(schema).unwrap();
            for error in validator.iter_errors(&object) {
                errors.push(format!("{} {}/{name} at {}: {error}", file.path, key.1, error.instance_path()));
            }
        }
    }
    (errors, checked, skipped)
}

fn kubernetes_examples() -> Vec<(String, Model)> {
    let out = inputs::examples(|m| m.clusters.iter().any(|c| c.bindings.kubernetes.is_some()));
    assert!(out.len() >= 2, "examples with a Kubernetes binding: {}", out.len());
    out
}

#[test]
fn every_emitted_object_matches_its_crd_schema() {
    let Some(schemas) = schemas() else { return };
    let mut total = 0;
    for (name, model) in kubernetes_examples() {
        for target in targets() {
            let files = target.emit(&model).files;
            let (errors, checked, _) = schema_errors(&schemas, &files);
            assert!(errors.is_empty(), "{name}/{}:\n{}", target.name(), errors.join("\n"));
            total += checked;
        }
    }
    assert!(total > 50, "only {total} objects were checked against a schema");
}

#[test]
fn the_schema_check_catches_bad_objects() {
    let Some(schemas) = schemas() else { return };
    let model = &kubernetes_examples()[0].1;
    let files = Kueue.emit(model).files;
    let queues = files.iter().find(|f| f.path.ends_with("clusterqueues.yaml")).unwrap();
    let broken = [
        ("reclaimWithinCohort: Any", "reclaimWithinCohort: Sometimes"),
        ("queueingStrategy: BestEffortFIFO", "queueingStrategy: BestEffortFIFO\n  queueingStrategyy: x"),
        ("nominalQuota: \"", "nominalQuota: \"-x"),
    ];
    for (from, to) in broken {
        let bad = OutputFile { path: queues.path.clone(), contents: queues.contents.replacen(from, to, 1) };
        let (errors, _, _) = schema_errors(&schemas, &[bad]);
        assert!(!errors.is_empty(), "`{to}` passed the schema");
    }
}

/// Also, in a debug build (as tests are), every file reads back as exactly the objects
/// whose rules were checked: the YAML writer asserts it.
#[test]
fn examples_pass_the_webhook_rules_and_match_their_snapshots() {
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(false);
    let _guard = settings.bind_to_scope();
    for (name, model) in kubernetes_examples() {
        for target in targets() {
            let Emitted { files, violations } = target.emit(&model);
            assert_eq!(violations, vec![], "{name}/{}", target.name());
            assert_eq!(target.emit(&model).files, files, "{name}/{}: emit is deterministic", target.name());
            for file in &files {
                let snapshot = format!("{}-{name}-{}", target.name(), file.path.replace('/', "-"));
                insta::assert_snapshot!(snapshot, &file.contents);
            }
            if !files.is_empty() {
                insta::assert_snapshot!(
                    format!("{}-{name}-FIDELITY.md", target.name()),
                    target.fidelity(&model).to_markdown()
                );
            }
        }
    }
}

#[test]
fn names_that_collide_after_flattening_point_at_both_projects() {
    let model = model(
        "cluster c gpus=8 gpu-type=h100 {\n    kubernetes kueue kai volcano\n}\ncontract b min-runtime=\"1h\" default=#true\n\
         project a share=1 {\n    project b share=1\n}\nproject a-b share=1\n",
    );
    for target in [&Kueue as &dyn Target, &Kai, &Volcano] {
        let violations = target.emit(&model).violations;
        let collision = violations.iter().find(|v| v.message.contains("`a-b`")).expect("a collision");
        let lines: Vec<usize> = collision.locations.iter().map(|l| l.line).collect();
        assert_eq!(lines, vec![6, 8], "{}", target.name());
    }
}

#[test]
fn volcano_refuses_trees_deeper_than_its_webhook_allows() {
    let mut text = "cluster c gpus=8 gpu-type=h100 {\n    kubernetes volcano\n}\ncontract b min-runtime=\"1h\" default=#true\n".to_string();
    for depth in 0..5 {
        text.push_str(&format!("{}project p{depth} share=1 {{\n", "    ".repeat(depth)));
    }
    text.push_str(&"}\n".repeat(5));
    let model = model(&text);
    let violations = Volcano.emit(&model).violations;
    assert!(
        violations.iter().any(|v| v.message.contains("p0/p1/p2/p3/p4") && v.locations[0].line == 9),
        "{violations:?}"
    );
}

#[test]
fn kai_splits_a_leaf_whose_contracts_protect_differently() {
    let model = model(
        "cluster c gpus=10 gpu-type=h100 {\n    kubernetes kai\n}\n\
         contract debug min-runtime=\"0s\"\ncontract batch min-runtime=\"1h\" default=#true\n\
         project a share=1\n",
    );
    let files = Kai.emit(&model).files;
    let queues: Vec<Value> = serde_saphyr::from_multiple(&files[0].contents).unwrap();
    let names: Vec<&str> = queues.iter().map(|q| q["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["a", "a-debug", "a-batch", "root-unbudgeted"]);
    assert_eq!(queues[1]["spec"]["preemptMinRuntime"], "0s");
    assert_eq!(queues[2]["spec"]["reclaimMinRuntime"], "1h");
    let quotas: Vec<i64> =
        queues[..3].iter().map(|q| q["spec"]["resources"]["gpu"]["quota"].as_i64().unwrap()).collect();
    assert_eq!(quotas, [10, 5, 5]);
}

/// Budget files with one cluster bound to all four schedulers and up to three levels.
fn random_tree() -> impl Strategy<Value = String> {
    let level = || prop::collection::vec(1u32..20, 1..4);
    (level(), level(), level(), 1u64..500, any::<bool>()).prop_map(|(top, middle, bottom, gpus, percent)| {
        let share = |n: u32| if percent { format!("\"{}%\"", n.min(33)) } else { n.to_string() };
        let mut text = format!(
            "cluster c gpus={gpus} gpu-type=h100 gpus-per-node=1 {{\n    kubernetes kueue kai volcano yunikorn\n}}\ncontract b min-runtime=\"1h\" default=#true\n"
        );
        for (i, t) in top.iter().enumerate() {
            text.push_str(&format!("project t{i} share={} max-gpus={} {{\n", share(*t), gpus / 2));
            for (j, m) in middle.iter().enumerate() {
                text.push_str(&format!("    project t{i}m{j} share={} {{\n", share(*m)));
                for (k, b) in bottom.iter().enumerate() {
                    text.push_str(&format!("        project t{i}m{j}b{k} share={}\n", share(*b)));
                }
                text.push_str("    }\n");
            }
            text.push_str("}\n");
        }
        text
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn quotas_of_children_never_exceed_their_parent(text in random_tree()) {
        let model = model(&text);
        for target in targets() {
            prop_assert_eq!(target.emit(&model).violations, vec![], "{}", target.name());
        }
        // Kueue: a cohort's members' quotas plus its own pool are exactly its guarantee.
        let files = Kueue.emit(&model).files;
        let objects: Vec<Value> = files.iter().flat_map(|f| serde_saphyr::from_multiple::<Value>(&f.contents).unwrap()).collect();
        let quota = |o: &Value| o["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"].as_str().map_or(0, |q| q.parse::<u64>().unwrap());
        let gpus = model.clusters[0].gpus;
        let total: u64 = objects.iter().filter(|o| o["kind"] == "ClusterQueue" || o["kind"] == "Cohort").map(quota).sum();
        prop_assert_eq!(total, gpus);
    }
}
