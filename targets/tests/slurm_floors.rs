//! The budgets' floors on Slurm without a Slurm: which floors a model gets and with what
//! caps and accounts, the slurm.conf lines and QOS that carry them, and `job_submit.lua` run
//! by a real Lua 5.1 interpreter (the version Debian's Slurm 22.05 embeds), jobs in hand.

use std::io::Write;
use std::process::{Command, Stdio};

use allot_compiler::test_support::model;
use allot_targets::slurm::Slurm;
use allot_targets::slurm::floors::{Floors, floors, lua_string};
use allot_targets::slurm::qos::Qos;
use allot_targets::slurm::tree;
use allot_targets::{Emitted, Target};

/// 64 GPUs: ml 60% (38 guaranteed: nlp and vision 19 each, none left to ml itself), physics
/// 30% (19), 6 unguaranteed.
const BUDGETS: &str = r#"cluster main gpus=64 gpu-type=h100 gpus-per-node=8 {
    slurm cluster=lab partition=gpu
}
contract batch min-runtime="1h" resumable=#true default=#true
project ml share="60%" {
    project nlp share=1
    project vision share=1
}
project physics share="30%"
"#;

/// Each floor's (name, GPUs, accounts).
fn caps(found: &Floors) -> Vec<(&str, u64, Vec<&str>)> {
    found
        .floors
        .iter()
        .map(|f| (f.name.as_str(), f.gpus, f.accounts.iter().map(String::as_str).collect()))
        .collect()
}

fn file<'e>(emitted: &'e Emitted, path: &str) -> &'e str {
    &emitted.files.iter().find(|f| f.path == path).unwrap_or_else(|| panic!("{path} written")).contents
}

#[test]
fn each_guaranteed_budget_gets_a_floor_over_the_bound_partition() {
    let model = model(BUDGETS);
    let (found, violations) = floors(&model, "lab", "lab-slurm.conf");
    assert!(violations.is_empty(), "{violations:?}");
    assert_eq!(
        caps(&found),
        [
            ("gpu-floor-nlp", 19, vec!["nlp"]),
            ("gpu-floor-vision", 19, vec!["vision"]),
            ("gpu-floor-physics", 19, vec!["physics"])
        ]
    );
    let routes: Vec<(&str, String)> =
        found.routes.iter().map(|r| (r.account.as_str(), r.partitions.join(","))).collect();
    assert_eq!(
        routes,
        [
            ("ml", "gpu".to_string()),
            ("nlp", "gpu-floor-nlp,gpu".to_string()),
            ("vision", "gpu-floor-vision,gpu".to_string()),
            ("physics", "gpu-floor-physics,gpu".to_string()),
        ]
    );
    let emitted = Slurm.emit(&model);
    assert!(emitted.violations.is_empty(), "{:?}", emitted.violations);
    let conf = file(&emitted, "lab-slurm.conf");
    assert!(conf.contains("\nPreemptType=preempt/partition_prio\n"), "{conf}");
    assert!(conf.contains("\nEnforcePartLimits=ALL\nJobSubmitPlugins=lua\n"), "{conf}");
    assert!(
        conf.contains("\nPartitionName=gpu-floor-nlp Nodes=ALL PriorityTier=2 PreemptMode=OFF QOS=gpu-floor-nlp AllowAccounts=nlp TRESBillingWeights=\"GRES/gpu=1.0\"\n"),
        "{conf}"
    );
    assert!(conf.contains("# PriorityTier=1 PreemptMode=REQUEUE TRESBillingWeights="), "{conf}");
    let qos = file(&emitted, "lab-qos.sh");
    // The three floors of 19 GPUs are set in one call.
    assert!(qos.contains("\nqos gpu-floor-nlp,gpu-floor-vision,gpu-floor-physics Priority=0 PreemptMode=cluster PreemptExemptTime=-1 MaxWall=-1 MaxTRESPerJob=gres/gpu=-1 GrpTRES=gres/gpu=19\n"), "{qos}");
}

#[test]
fn a_parent_with_gpus_of_its_own_has_a_floor_its_sub_projects_share() {
    // ml keeps 10 of its 40 GPUs for itself (its sub-projects' shares add up to 75%): its
    // floor of 10 is open to its own jobs and its sub-projects', after their own floors.
    let text = r#"cluster main gpus=40 gpu-type=h100 gpus-per-node=8 {
        slurm cluster=lab partition=gpu
    }
    contract batch min-runtime="1h" default=#true
    project ml share="100%" {
        project nlp share="50%"
        project vision share="25%"
    }
    "#;
    let (found, violations) = floors(&model(text), "lab", "lab-slurm.conf");
    assert!(violations.is_empty(), "{violations:?}");
    assert_eq!(
        caps(&found),
        [
            ("gpu-floor-ml", 10, vec!["ml", "nlp", "vision"]),
            ("gpu-floor-nlp", 20, vec!["nlp"]),
            ("gpu-floor-vision", 10, vec!["vision"]),
        ]
    );
    let nlp = found.routes.iter().find(|r| r.account == "nlp").unwrap();
    assert_eq!(nlp.partitions, ["gpu-floor-nlp", "gpu-floor-ml", "gpu"]);
}

#[test]
fn clusters_sharing_a_slurm_cluster_need_their_nodes() {
    let text = r#"cluster a gpus=8 gpu-type=h100 gpus-per-node=8 {
        slurm cluster=lab partition=h100
    }
    cluster b gpus=8 gpu-type=l40s gpus-per-node=8 {
        slurm cluster=lab partition=l40s
    }
    contract batch min-runtime="1h" default=#true
    project ml share=1
    "#;
    let (_, violations) = floors(&model(text), "lab", "lab-slurm.conf");
    assert_eq!(violations.len(), 2, "{violations:?}");
    assert!(violations[0].message.contains("needs `nodes=`"), "{violations:?}");
    let text = text
        .replace("partition=h100", "partition=h100 nodes=\"h[01-04]\"")
        .replace("partition=l40s", "partition=l40s nodes=\"l[01-02]\"");
    let emitted = Slurm.emit(&model(&text));
    assert!(emitted.violations.is_empty(), "{:?}", emitted.violations);
    let conf = file(&emitted, "lab-slurm.conf");
    assert!(conf.contains("PartitionName=h100-floor-ml Nodes=h[01-04] "), "{conf}");
    assert!(conf.contains("PartitionName=l40s-floor-ml Nodes=l[01-02] "), "{conf}");
}

#[test]
fn a_floor_name_slurm_cannot_take_is_refused() {
    // 63 characters at most: `gpu-floor-` and a 60-character project name are 70.
    let long = "p".repeat(60);
    let text = format!(
        "cluster main gpus=8 gpu-type=h100 gpus-per-node=8 {{\n    slurm cluster=lab partition=gpu\n}}\n\
         contract batch min-runtime=\"1h\" default=#true\nproject {long} share=1\n"
    );
    let emitted = Slurm.emit(&model(&text));
    assert!(
        emitted.violations.iter().any(|v| v.message.contains("a floor partition's name")),
        "{:?}",
        emitted.violations
    );
}

/// [`BUDGETS`] with a contract `debug` holding 4 GPUs: the budgets share the other 60.
fn with_reserve() -> String {
    BUDGETS
        .replace("contract batch", "contract debug min-runtime=\"0s\" max-gpus=1 reserve=4\ncontract batch")
}

#[test]
fn a_reserve_is_a_partition_of_the_highest_tier_for_its_contract_alone() {
    let model = model(&with_reserve());
    let (found, violations) = floors(&model, "lab", "lab-slurm.conf");
    assert!(violations.is_empty(), "{violations:?}");
    // Of the 60 GPUs no reserve holds: ml 60% = 36 (nlp and vision 18 each), physics 30%
    // = 18, 6 unguaranteed.
    assert_eq!(
        caps(&found),
        [
            ("gpu-floor-nlp", 18, vec!["nlp"]),
            ("gpu-floor-vision", 18, vec!["vision"]),
            ("gpu-floor-physics", 18, vec!["physics"])
        ]
    );
    let [reserve] = found.reserves.as_slice() else { panic!("{:?}", found.reserves) };
    assert_eq!(
        (reserve.name.as_str(), reserve.gpus, reserve.contract.as_str()),
        ("gpu-reserve-debug", 4, "debug")
    );
    let emitted = Slurm.emit(&model);
    assert!(emitted.violations.is_empty(), "{:?}", emitted.violations);
    let conf = file(&emitted, "lab-slurm.conf");
    assert!(
        conf.contains("\nPartitionName=gpu-reserve-debug Nodes=ALL PriorityTier=3 PreemptMode=OFF QOS=gpu-reserve-debug AllowQos=debug "),
        "{conf}"
    );
    let qos = file(&emitted, "lab-qos.sh");
    assert!(qos.contains("\nqos gpu-reserve-debug Priority=0 PreemptMode=cluster PreemptExemptTime=-1 MaxWall=-1 MaxTRESPerJob=gres/gpu=-1 GrpTRES=gres/gpu=4\n"), "{qos}");
    assert!(qos.contains("    gpu-reserve-debug"), "made with the other QOS: {qos}");
}

#[test]
fn a_saved_plan_may_want_a_reserves_cap_and_no_stray_one() {
    let model = model(&with_reserve());
    let desired = tree::desired(&model, "lab");
    let wanted = tree::wanted_qos(&model, "lab");
    assert!(wanted.iter().any(|q| q.name == "gpu-reserve-debug" && q.grp_gpus == Some(4)), "{wanted:?}");
    assert_eq!(tree::unwanted_qos(&wanted, &desired), None);
    // A cap named as the reserve of a QOS the tree does not name is refused.
    let mut stray = wanted.clone();
    let cap = stray.iter().find(|q| q.name == "gpu-reserve-debug").unwrap().clone();
    stray.push(Qos { name: "gpu-reserve-nobody".into(), ..cap });
    let problem = tree::unwanted_qos(&stray, &desired);
    assert!(problem.as_deref().is_some_and(|p| p.contains("gpu-reserve-nobody")), "{problem:?}");
}

#[test]
fn a_reserve_whose_name_slurm_cannot_take_or_another_has_is_refused() {
    let long = "d".repeat(60);
    let emitted = Slurm.emit(&model(&with_reserve().replace("contract debug", &format!("contract {long}"))));
    assert!(
        emitted.violations.iter().any(|v| v.message.contains("a reserve partition's name")),
        "{:?}",
        emitted.violations
    );
    // Two bound partitions, `gpu` and `gpu-floor`: project `reserve-x`'s floor over `gpu`
    // and contract x's reserve over `gpu-floor` are both `gpu-floor-reserve-x`.
    let text = r#"cluster a gpus=8 gpu-type=h100 gpus-per-node=8 {
        slurm cluster=lab partition=gpu nodes="a[1]"
    }
    cluster b gpus=8 gpu-type=h100 gpus-per-node=8 {
        slurm cluster=lab partition=gpu-floor nodes="b[1]"
    }
    contract x min-runtime="0s" reserve=1
    contract batch min-runtime="1h" default=#true
    project reserve-x share=1
    "#;
    let (_, violations) = floors(&model(text), "lab", "lab-slurm.conf");
    assert!(
        violations
            .iter()
            .any(|v| v.message.contains("reserve gpu-floor-reserve-x takes the name of a partition or QOS")),
        "{violations:?}"
    );
}

#[test]
fn job_submit_lua_puts_a_contracts_reserve_first_in_a_real_lua() {
    let emitted = Slurm.emit(&model(&with_reserve()));
    let script = file(&emitted, "lab-job_submit.lua");
    let script = script.strip_suffix("return slurm.SUCCESS\n").expect("the script's last line");
    let jobs = r#"
        local cases = {
          { partition = "gpu", account = "nlp", qos = "debug" },
          { partition = "gpu", account = "nlp", default_qos = "debug" },
          { partition = "gpu", account = "nlp", qos = "batch", default_qos = "debug" },
          { partition = "gpu", account = "ml", qos = "debug" },
          { partition = "gpu", account = "vision", qos = "debug", requeue = 0 },
          { partition = "gpu", account = "ml", qos = "debug", requeue = 0 },
          { partition = "gpu", account = "nlp", qos = "preemptible" },
          { partition = "cpu", account = "nlp", qos = "debug" },
        }
        for _, job in ipairs(cases) do
          local rc = slurm_job_submit(job, {}, 1000)
          io.write(rc, ' ', show(job), '\n')
        end
    "#;
    let Some(answer) = run_lua(script, jobs) else {
        assert!(std::env::var_os("CI").is_none(), "no Lua 5.1 interpreter (scripts/test.sh installs lua5.1)");
        eprintln!("skipped: no Lua interpreter");
        return;
    };
    assert_eq!(
        answer,
        "0 gpu-reserve-debug,gpu-floor-nlp,gpu debug\n\
         0 gpu-reserve-debug,gpu-floor-nlp,gpu nil\n\
         0 gpu-floor-nlp,gpu batch\n\
         0 gpu-reserve-debug,gpu debug\n\
         0 gpu-reserve-debug,gpu-floor-vision debug\n\
         0 gpu-reserve-debug debug\n\
         0 gpu preemptible\n\
         0 cpu debug\n"
    );
}

#[test]
fn lua_strings_carry_any_text_as_itself() {
    assert_eq!(lua_string("gpu-floor-a"), "\"gpu-floor-a\"");
    assert_eq!(lua_string("a\"b\\c\nd]]"), "\"a\\\"b\\\\c\\010d]]\"");
    assert_eq!(lua_string("é"), "\"\\195\\169\"");
}

/// `job_submit.lua` run by Lua 5.1 with Slurm's `slurm` table stubbed, then `jobs`: what
/// they write. `None`: no `lua5.1` here.
fn run_lua(script: &str, jobs: &str) -> Option<String> {
    let lua = "lua5.1";
    Command::new(lua).arg("-v").output().ok()?;
    let harness = format!(
        "slurm = {{ SUCCESS = 0, ERROR = -1, ESLURM_ACCESS_DENIED = 2002, NO_VAL16 = 65534 }}\n\
         {script}\n\
         local function show(j) return tostring(j.partition) .. ' ' .. tostring(j.qos) end\n\
         {jobs}\n"
    );
    let mut child = Command::new(lua)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    child.stdin.take().unwrap().write_all(harness.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "lua: {}", String::from_utf8_lossy(&output.stderr));
    Some(String::from_utf8(output.stdout).unwrap())
}

#[test]
fn job_submit_lua_routes_jobs_to_their_floors_in_a_real_lua() {
    let emitted = Slurm.emit(&model(BUDGETS));
    let script = file(&emitted, "lab-job_submit.lua");
    // The script ends by returning SUCCESS, as Slurm checks on load: the harness drops it.
    let script = script.strip_suffix("return slurm.SUCCESS\n").expect("the script's last line");
    let jobs = r#"
        local cases = {
          { partition = "gpu", account = "nlp" },
          { partition = "gpu", default_account = "Physics" },
          { partition = "gpu", account = "ml" },
          { partition = "gpu", account = "nlp", qos = "preemptible" },
          { partition = "gpu", account = "vision", requeue = 0 },
          { partition = "cpu", account = "nlp" },
          { account = "nlp" },
          { partition = "gpu", account = "nobody" },
        }
        for _, job in ipairs(cases) do
          local rc = slurm_job_submit(job, {}, 1000)
          io.write(rc, ' ', show(job), '\n')
        end
        -- No partition asked for: the cluster's default, when it is a bound one.
        local job = { account = "nlp" }
        slurm_job_submit(job, { cpu = { flag_default = 0 }, gpu = { flag_default = 1 } }, 1000)
        io.write(show(job), '\n')
        job = { account = "nlp" }
        slurm_job_submit(job, { cpu = { flag_default = 1 }, gpu = { flag_default = 0 } }, 1000)
        io.write(show(job), '\n')
        io.write(slurm_job_modify({ partition = "gpu-floor-nlp" }, {}, {}, 1000), '\n')
        io.write(slurm_job_modify({ qos = "batch" }, {}, {}, 1000), '\n')
        io.write(slurm_job_modify({ partition = "gpu" }, {}, {}, 0), '\n')
        io.write(slurm_job_modify({ time_limit = 60 }, {}, {}, 1000), '\n')
    "#;
    let Some(answer) = run_lua(script, jobs) else {
        assert!(std::env::var_os("CI").is_none(), "no Lua 5.1 interpreter (scripts/test.sh installs lua5.1)");
        eprintln!("skipped: no Lua interpreter");
        return;
    };
    assert_eq!(
        answer,
        "0 gpu-floor-nlp,gpu nil\n\
         0 gpu-floor-physics,gpu nil\n\
         0 gpu nil\n\
         0 gpu preemptible\n\
         0 gpu-floor-vision nil\n\
         0 cpu nil\n\
         0 nil nil\n\
         0 gpu nil\n\
         gpu-floor-nlp,gpu nil\n\
         nil nil\n\
         2002\n\
         2002\n\
         0\n\
         0\n"
    );
}

#[test]
fn a_hostile_budget_name_never_reaches_a_line_of_its_own() {
    // A model that passed the checks, with a project renamed afterwards: the build is
    // refused, and meanwhile every file keeps the name inside a string or a comment.
    let payload = "x\"]] = 1 os.execute('rm -rf /') --\nPartitionName=evil Nodes=ALL";
    let mut model = model(BUDGETS);
    model.projects[1].name = format!("physics{payload}");
    let emitted = Slurm.emit(&model);
    assert!(!emitted.violations.is_empty(), "the build is refused");
    for file in &emitted.files {
        for line in file.contents.lines() {
            assert!(!line.starts_with("PartitionName=evil"), "{}: {}", file.path, file.contents);
        }
    }
    let script = file(&emitted, "lab-job_submit.lua");
    assert!(!script.contains("os.execute"), "the hostile account's route is not written:\n{script}");
    // What is written is Lua that a real Lua reads.
    let script = script.strip_suffix("return slurm.SUCCESS\n").unwrap();
    if let Some(answer) = run_lua(script, "io.write(routes.gpu.nlp, '\\n')") {
        assert_eq!(answer, "gpu-floor-nlp,gpu\n");
    }
}
