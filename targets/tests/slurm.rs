//! The Slurm target without a Slurm: the flat file reads back as the model (for the
//! examples and for names made to look like the file's syntax), importing a dump and
//! planning against it shows no changes, plans and scripts come in Slurm's order, and
//! snapshots of the examples.

mod inputs;

use allot_compiler::ir::Model;
use allot_compiler::test_support::model;
use allot_targets::slurm::{Slurm, import, plan, tree};
use allot_targets::{Emitted, Target};
use proptest::prelude::*;

const BUDGETS: &str = r#"cluster main gpus=64 gpu-type=h100 gpus-per-node=8 {
    slurm cluster=lab partition=gpu
}
policy overflow=preemptible
contract debug min-runtime="0s" max-runtime="2h" max-gpus=8
contract batch min-runtime="1h" resumable=#true default=#true
project ml share="60%" max-gpus=48 {
    project nlp share=1 {
        users alice bob
    }
    project vision share=1 {
        users alice default=#true
        users carol
    }
}
project physics share="30%" {
    contracts batch
    users dave
}
"#;

/// A dump as Slurm writes it: sorted, lower-cased, QOS lists sorted.
const DUMP: &str = "Cluster - 'lab':Fairshare=1:QOS='normal'\nParent - 'root'\n\
    User - 'root':DefaultAccount='root':AdminLevel='Administrator':Fairshare=1\n\
    Account - 'ml':Description='ml':Organization='allot':Fairshare=60:GrpTRES=gres/gpu=48:QOS='batch,debug,preemptible':DefaultQOS='batch'\n\
    Account - 'physics':Description='physics':Organization='allot':Fairshare=30:QOS='batch,preemptible':DefaultQOS='batch'\n\
    Account - 'old':Description='old':Organization='allot':Fairshare=5:QOS='batch,preemptible':DefaultQOS='batch'\n\
    Parent - 'ml'\n\
    Account - 'nlp':Description='ml/nlp':Organization='allot':Fairshare=1:QOS='batch,debug,preemptible':DefaultQOS='batch'\n\
    Account - 'vision':Description='ml/vision':Organization='allot':Fairshare=2:QOS='batch,debug,preemptible':DefaultQOS='batch'\n\
    Parent - 'nlp'\nUser - 'alice':DefaultAccount='vision':Fairshare=1\nUser - 'bob':DefaultAccount='nlp':Fairshare=1\n\
    Parent - 'vision'\nUser - 'alice':DefaultAccount='vision':Fairshare=1\n\
    Parent - 'old'\nUser - 'erin':DefaultAccount='old':Fairshare=1:MaxJobs=3\n";

/// Each flat file the Slurm target emits for `model`, read back as `sacctmgr` would, is
/// the tree allot checked: no name changed what the file says. The trees read.
fn flat_files_read_back(model: &Model) -> Vec<tree::Tree> {
    let Emitted { files, violations } = Slurm.emit(model);
    assert_eq!(violations, vec![]);
    let mut read = Vec::new();
    for file in files.iter().filter(|f| f.path.ends_with(".cfg")) {
        let back = tree::parse(&file.contents).unwrap_or_else(|e| panic!("{e}\n{}", file.contents));
        let mut wanted = tree::desired(model, file.path.trim_end_matches(".cfg"));
        // What only the desired tree knows: where each association comes from.
        for a in &mut wanted.accounts {
            (a.source, a.path) = (None, String::new());
        }
        for u in &mut wanted.users {
            u.source = None;
        }
        let plan = plan::plan(&wanted, &back);
        assert!(plan.is_empty(), "{}\n{}", plan::human(&plan), file.contents);
        read.push(back);
    }
    read
}

#[test]
fn the_flat_file_reads_back_as_the_model() {
    let read = flat_files_read_back(&model(BUDGETS)).remove(0);
    assert_eq!(read.cluster, "lab");
    let ml = read.account("ml").unwrap();
    assert_eq!((ml.fairshare, ml.grp_gpus), (60, Some(48)));
    assert_eq!(ml.qos, ["batch", "debug", "preemptible"]);
    assert_eq!(read.account("nlp").unwrap().grp_gpus, None, "the parent's cap covers its subtree");
    let alice: Vec<_> = read
        .users
        .iter()
        .filter(|u| u.name == "alice")
        .map(|u| (u.account.as_str(), u.default_account.as_deref()))
        .collect();
    assert_eq!(alice, [("nlp", Some("vision")), ("vision", Some("vision"))]);
}

#[test]
fn a_plan_lists_changes_with_their_source_and_orders_its_script() {
    let model = model(BUDGETS);
    let desired = tree::desired(&model, "lab");
    let live = tree::parse(DUMP).unwrap();
    let plan = plan::plan(&desired, &live);
    let lines: Vec<String> = plan
        .changes
        .iter()
        .map(|c| {
            format!(
                "{:?} {} {} {:?}",
                c.action,
                c.kind,
                c.name,
                c.fields.iter().map(|f| f.name).collect::<Vec<_>>()
            )
        })
        .collect();
    assert_eq!(
        lines,
        [
            "Change account vision [\"fairshare\"]",
            "Destroy account old [\"parent\", \"fairshare\", \"qos\", \"defaultqos\"]",
            "Add user carol [\"defaultaccount\", \"fairshare\"]",
            "Add user dave [\"defaultaccount\", \"fairshare\"]",
            "Destroy user erin [\"defaultaccount\", \"fairshare\"]",
        ]
    );
    assert_eq!(plan.summary(), "Plan: 2 to add, 1 to change, 2 to destroy.");
    let vision = &plan.changes[0];
    assert_eq!(vision.source.as_ref().map(|l| l.line), Some(11));
    let (before, after) = vision.effective_share.unwrap();
    // Slurm counts its root user (Fairshare=1) among the top accounts.
    assert!(
        (before - 60.0 / 96.0 * 2.0 / 3.0).abs() < 1e-9 && (after - 60.0 / 91.0 * 0.5).abs() < 1e-9,
        "{before} {after}"
    );
    assert_eq!(plan.drift.len(), 1, "erin's MaxJobs is drift: {:?}", plan.drift);

    let script = plan::script(&plan, &desired, &live);
    let order: Vec<&str> = script.lines().filter(|l| l.starts_with("sacctmgr")).collect();
    assert_eq!(
        order,
        [
            "sacctmgr -i modify account where name=vision cluster=lab set fairshare=1",
            "sacctmgr -i add user carol cluster=lab account=vision fairshare=1 defaultaccount=vision",
            "sacctmgr -i add user dave cluster=lab account=physics fairshare=1 defaultaccount=physics",
            "sacctmgr -i delete user where name=erin cluster=lab account=old",
            "sacctmgr -i delete account where name=old cluster=lab",
        ]
    );
}

#[test]
fn importing_a_dump_then_planning_against_it_changes_nothing() {
    let live = tree::parse(DUMP).unwrap();
    let options = import::Options { gpus: 64, gpu_type: "h100".into(), gpus_per_node: 8 };
    let files = import::to_repository(&live, &options).unwrap();
    let [(_, kdl)] = files.as_slice() else { panic!("{files:?}") };
    let imported = model(kdl);
    let plan = plan::plan(&tree::desired(&imported, "lab"), &live);
    assert!(plan.is_empty(), "{kdl}\n{}", plan::human(&plan));
    assert_eq!(plan.drift.len(), 1);
}

#[test]
fn import_refuses_names_allot_cannot_carry() {
    let dump = "Cluster - 'lab'\nParent - 'root'\nAccount - 'ml_team':Fairshare=1\n";
    let live = tree::parse(dump).unwrap();
    let options = import::Options { gpus: 8, gpu_type: "h100".into(), gpus_per_node: 8 };
    let problems = import::to_repository(&live, &options).unwrap_err();
    assert!(problems[0].contains("ml_team"), "{problems:?}");
}

#[test]
fn account_names_must_be_unique_in_a_slurm_cluster() {
    let model = model(
        "cluster c gpus=8 gpu-type=h100 {\n    slurm\n}\ncontract b min-runtime=\"1h\" default=#true\n\
         project a share=1 {\n    project eval share=1\n}\nproject b share=1 {\n    project eval share=1\n}\n",
    );
    let violations = Slurm.emit(&model).violations;
    assert_eq!(violations.len(), 1, "{violations:?}");
    let lines: Vec<usize> = violations[0].locations.iter().map(|l| l.line).collect();
    assert_eq!(lines, [6, 9]);
}

#[test]
fn examples_with_a_slurm_binding_match_their_snapshots() {
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(false);
    let _guard = settings.bind_to_scope();
    for name in ["itp-debug", "published-case", "university-hpc"] {
        let model = inputs::example(name);
        assert!(!flat_files_read_back(&model).is_empty(), "{name}");
        for file in &Slurm.emit(&model).files {
            insta::assert_snapshot!(format!("slurm-{name}-{}", file.path), &file.contents);
        }
        insta::assert_snapshot!(format!("slurm-{name}-FIDELITY.md"), Slurm.fidelity(&model).to_markdown());
    }
}

/// A user name `allot check` accepts, with the characters it allows beyond a project's.
fn user_name() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "a", "0", "-", "_", ".", "@", "/", "+", "%", "^", "é", "ß", "日本", "🙂", "yes", "null", "0755",
        "parent", "-x",
    ]);
    prop::collection::vec(pieces, 1..4).prop_map(|pieces| pieces.concat())
}

/// A budget file binding one Slurm cluster, its contracts, projects and users named by
/// `names` and `users` (distinct), projects nested three deep.
fn lookalike_budget() -> impl Strategy<Value = String> {
    let projects = prop::sample::subsequence(
        vec!["yes", "null", "0755", "1e3", "parent", "cluster", "account", "user", "fairshare", "x--y", "0"],
        3..8,
    );
    let contracts = prop::sample::subsequence(vec!["yes", "null", "0755", "normal", "parent", "x--y"], 1..3);
    let users = prop::collection::btree_set(user_name(), 0..8);
    (projects, contracts, users, prop::collection::vec(1u32..100, 8)).prop_map(
        |(projects, contracts, users, shares)| {
            let mut text =
                "cluster c gpus=64 gpu-type=h100 {\n    slurm cluster=lab partition=gpu\n}\n".to_string();
            for (i, contract) in contracts.iter().enumerate() {
                text.push_str(&format!("contract \"{contract}\" min-runtime=\"{i}h\" default=#{}\n", i == 0));
            }
            let users: Vec<String> = users.into_iter().collect();
            let mut users = users.chunks(users.len().div_ceil(projects.len()).max(1));
            for (i, project) in projects.iter().enumerate() {
                let depth = i % 3;
                text.push_str(&format!(
                    "{}project \"{project}\" share={} {{\n",
                    "    ".repeat(depth),
                    shares[i]
                ));
                if let Some(members) = users.next() {
                    let quoted: Vec<String> = members.iter().map(|u| format!("\"{u}\"")).collect();
                    text.push_str(&format!("{}users {}\n", "    ".repeat(depth + 1), quoted.join(" ")));
                }
                if depth == 2 || i + 1 == projects.len() {
                    for level in (0..=depth).rev() {
                        text.push_str(&format!("{}}}\n", "    ".repeat(level)));
                    }
                }
            }
            text
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn flat_files_of_lookalike_names_read_back_as_the_model(text in lookalike_budget()) {
        flat_files_read_back(&model(&text));
    }
}
