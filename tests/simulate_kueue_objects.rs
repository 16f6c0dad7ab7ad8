//! `allot replay simulate --kueue-objects [CLUSTER=]DIR` and `--kueue-config FILE` from the
//! command line: a cluster's own Kueue objects (a kubectl dump, a List, JSON) and Kueue's
//! Configuration simulated instead of what `allot build` writes, each outcome worked out by
//! hand on a two-job trace; the budgets' ClusterQueues found by allot's names; and every
//! refusal of the folder, its files and the flags, with what it says.

use std::path::Path;

use serde_json::{Value, json};

use crate::common::{allot_in as allot, git};

/// One cluster of 8 GPUs on one node, bound to Kueue (allot writes ClusterQueues a and b of
/// 4 GPUs each in Cohort root, reclaimWithinCohort Any, Fair Sharing on).
const BUDGETS: &str = "cluster c gpus=8 gpu-type=h100 gpus-per-node=8 {\n    kubernetes kueue\n}\n\
    contract batch min-runtime=\"0s\" default=#true\nproject a share=\"50%\"\nproject b share=\"50%\"\n";

/// A whole-node job of a at 0 for 1000 s, and a 4-GPU job of b at 10 for 100 s.
const TRACE: &str = "id,project,gpus,submit,duration\n1,a,8,0,1000\n2,b,4,10,100\n";

/// ClusterQueue NAME in Cohort pool with GPU quota QUOTA of flavor h100, reclaiming borrowed
/// quota from any workload of the Cohort; as `kubectl get -o yaml` prints an item of a List.
fn cluster_queue(name: &str, quota: u32) -> String {
    format!(
        "- apiVersion: kueue.x-k8s.io/v1beta2
  kind: ClusterQueue
  metadata:
    creationTimestamp: \"2026-01-01T00:00:00Z\"
    generation: 1
    name: {name}
    resourceVersion: \"1234\"
    uid: 5d2e4c1a-0000-4000-8000-000000000001
  spec:
    cohortName: pool
    namespaceSelector: {{}}
    preemption:
      reclaimWithinCohort: Any
    queueingStrategy: BestEffortFIFO
    resourceGroups:
    - coveredResources:
      - nvidia.com/gpu
      flavors:
      - name: h100
        resources:
        - name: nvidia.com/gpu
          nominalQuota: \"{quota}\"
  status:
    admittedWorkloads: 0
    pendingWorkloads: 0
"
    )
}

/// What `kubectl get clusterqueues,cohorts,resourceflavors -A -o yaml` prints for Cohort pool,
/// ResourceFlavor h100 and two ClusterQueues of the quotas given.
fn dump(queues: &[(&str, u32)]) -> String {
    let mut out = String::from(
        "apiVersion: v1
items:
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: Cohort
  metadata:
    name: pool
  spec: {}
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: ResourceFlavor
  metadata:
    name: h100
  spec:
    nodeLabels: {}
",
    );
    for (name, quota) in queues {
        out.push_str(&cluster_queue(name, *quota));
    }
    out.push_str("kind: List\nmetadata:\n  resourceVersion: \"\"\n");
    out
}

/// Kueue's Configuration with Fair Sharing on, both preemption strategies.
const FAIR_SHARING: &str = "apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
fairSharing:
  preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]
";

/// A budget repository with the budgets and trace given, and the folders of `files`
/// (`(path, contents)`).
fn repo(budgets: &str, trace: &str, files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("allot.kdl"), budgets).unwrap();
    std::fs::write(dir.path().join("trace.csv"), trace).unwrap();
    for (path, contents) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, contents).unwrap();
    }
    dir
}

/// `allot replay simulate . --trace trace.csv ARGS` in `dir`: status, stdout, stderr.
fn simulate(dir: &Path, args: &[&str]) -> (i32, String, String) {
    allot(dir, &[&["replay", "simulate", ".", "--trace", "trace.csv"][..], args].concat())
}

/// The one run's figures that tell the outcomes apart: preemptions, unplaceable jobs, and
/// the short jobs' wait p50 and p90 (every job here is short).
fn figures(dir: &Path, args: &[&str]) -> (Value, String) {
    let (status, stdout, stderr) = simulate(dir, &[args, &["--format", "json"]].concat());
    assert_eq!(status, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{stdout}");
    let run = &runs[0];
    assert_eq!(run["policy"], "Kueue as configured");
    let waits = &run["short_jobs"];
    let shown = json!({
        "preemptions": run["preemptions"],
        "unplaceable": run["unplaceable"],
        "waits": [waits["wait_p50_s"], waits["wait_p90_s"]],
    });
    (shown, stderr)
}

/// The error of a run that fails, with its status checked.
fn refused(dir: &Path, args: &[&str]) -> String {
    let (status, stdout, stderr) = simulate(dir, args);
    assert_eq!(status, 1, "{stdout}{stderr}");
    stderr
}

#[test]
fn a_kubectl_dump_of_other_quotas_is_simulated_instead_of_what_allot_writes() {
    // allot's objects (a and b of 4, Fair Sharing on): job 1 (a, 8 GPUs) borrows b's 4 at 0;
    // job 2 (b, 4) at 10 is within b's quota, so Kueue takes the 4 back, evicting job 1,
    // and admits job 2 at 10; job 1 (not resumable) starts again at 110: waits 0 and 100.
    let dir = repo(BUDGETS, TRACE, &[("cluster/queues.yaml", &dump(&[("a", 8), ("b", 0)]))]);
    let (allots, _) = figures(dir.path(), &["--policy", "kueue"]);
    assert_eq!(allots, json!({"preemptions": 1, "unplaceable": 0, "waits": [0, 100]}));
    // The cluster's own (a 8, b 0, Kueue's defaults: no Fair Sharing): job 1 runs on a's own
    // 8 GPUs, borrowing nothing, so nothing can be reclaimed from it; job 2 must borrow all
    // 4 and waits until job 1 ends at 1000: waits 0 and 990, no preemption. No --policy:
    // --kueue-objects implies kueue.
    let (own, stderr) = figures(dir.path(), &["--kueue-objects", "cluster"]);
    assert_eq!(own, json!({"preemptions": 0, "unplaceable": 0, "waits": [0, 990]}));
    assert_eq!(stderr, "", "every object is read, every budget has its ClusterQueue");
    // The same as the API server lists them in JSON (kind ClusterQueueList, items without
    // their kind), in two files, with the Cohort left implicit.
    let queue = |name: &str, quota: &str| {
        json!({"metadata": {"name": name}, "spec": {"cohortName": "pool",
            "preemption": {"reclaimWithinCohort": "Any"},
            "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "h100",
                "resources": [{"name": "nvidia.com/gpu", "nominalQuota": quota}]}]}]}})
    };
    let list = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueueList",
        "metadata": {"resourceVersion": "9"}, "items": [queue("a", "8"), queue("b", "0")]});
    let flavor = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
        "metadata": {"name": "h100"}});
    std::fs::create_dir(dir.path().join("json")).unwrap();
    std::fs::write(dir.path().join("json/clusterqueues.json"), serde_json::to_string_pretty(&list).unwrap())
        .unwrap();
    std::fs::write(dir.path().join("json/flavor.json"), flavor.to_string()).unwrap();
    let (own, _) = figures(dir.path(), &["--kueue-objects", "c=json"]);
    assert_eq!(own, json!({"preemptions": 0, "unplaceable": 0, "waits": [0, 990]}));
}

#[test]
fn the_objects_allot_writes_read_back_give_the_same_run() {
    let dir = repo(BUDGETS, TRACE, &[]);
    let (status, _, stderr) = allot(dir.path(), &["build", ".", "--out", "out"]);
    assert_eq!(status, 0, "{stderr}");
    let (allots, _) = figures(dir.path(), &[]);
    // The folder allot writes holds its Configuration too: passed over, with a note
    // pointing at --kueue-config; given there, it makes the very same run.
    let given = ["--kueue-objects", "out/kueue/c", "--kueue-config", "out/kueue/c/kueue-configuration.yaml"];
    let (own, stderr) = figures(dir.path(), &given);
    assert_eq!(own, allots);
    assert_eq!(own, json!({"preemptions": 1, "unplaceable": 0, "waits": [0, 100]}));
    assert_eq!(
        stderr,
        "note: --kueue-objects out/kueue/c: passed over 1 object the kueue policy does not read: \
         config.kueue.x-k8s.io/Configuration (Kueue's Configuration is read from --kueue-config FILE)\n"
    );
    // With --against, the objects are the cluster's: simulated for both revisions.
    git(dir.path(), &["init", "-q"]);
    git(dir.path(), &["add", "allot.kdl"]);
    git(dir.path(), &["commit", "-qm", "base"]);
    let (status, stdout, stderr) =
        simulate(dir.path(), &[&given[..], &["--against", "HEAD", "--format", "json"]].concat());
    assert_eq!(status, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let preemptions: Vec<&Value> =
        report["runs"].as_array().unwrap().iter().map(|r| &r["preemptions"]).collect();
    assert_eq!(preemptions, [&json!(1), &json!(1)]);
    assert_eq!(stderr.matches("note:").count(), 1, "each note said once: {stderr}");
}

#[test]
fn budgets_without_a_clusterqueue_of_their_name_are_said_and_their_jobs_unplaceable() {
    // b's ClusterQueue is there, a's is named team-a: job 1 (a) has no ClusterQueue and is
    // not replayed; job 2 (b, 4 GPUs) borrows team-a's idle GPUs (b has 0) at once.
    let dir = repo(
        BUDGETS,
        TRACE,
        &[("cluster/queues.yaml", &dump(&[("team-a", 8), ("b", 0)])), ("cluster/README.md", "dumped")],
    );
    std::fs::create_dir(dir.path().join("cluster/old")).unwrap();
    let (own, stderr) = figures(dir.path(), &["--kueue-objects", "cluster"]);
    assert_eq!(own, json!({"preemptions": 0, "unplaceable": 1, "waits": [0, 0]}));
    assert_eq!(
        stderr,
        "note: --kueue-objects cluster: passed over 1 file not named .yaml, .yml or .json: README.md\n\
         note: --kueue-objects cluster: passed over 1 folder (subfolders are not read): old/\n\
         note: --kueue-objects cluster: no ClusterQueue there for 1 budget of cluster c (a): their jobs \
         find their ClusterQueue only through the trace's `queue` column, or are counted unplaceable\n"
    );
    // None of allot's names: the one-line note, and no job of the trace can be placed.
    std::fs::write(dir.path().join("cluster/queues.yaml"), dump(&[("team-a", 8), ("team-b", 0)])).unwrap();
    let stderr = refused(dir.path(), &["--kueue-objects", "cluster"]);
    assert!(
        stderr.contains(
            "note: --kueue-objects cluster: no ClusterQueue there is named as allot names the budgets of \
             cluster c (a, b): jobs find their ClusterQueue only through the trace's `queue` column\n"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("error: trace.csv: no job of the trace could be used"), "{stderr}");
    // Jobs that name their queue find it: job 1 ClusterQueue team-a (8 GPUs), job 2 the
    // LocalQueue of team-b (0 GPUs, borrowing): as in the dump of other quotas, job 2 waits
    // for job 1 to end, 990 s.
    let local_queue = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata:\n  name: gpus\n  \
        namespace: team-b\nspec:\n  clusterQueue: team-b\n";
    std::fs::write(dir.path().join("cluster/localqueue.yaml"), local_queue).unwrap();
    let named = "id,project,gpus,submit,duration,queue\n1,a,8,0,1000,team-a\n2,b,4,10,100,team-b/gpus\n";
    std::fs::write(dir.path().join("trace.csv"), named).unwrap();
    let (own, _) = figures(dir.path(), &["--kueue-objects", "cluster"]);
    assert_eq!(own, json!({"preemptions": 0, "unplaceable": 0, "waits": [0, 990]}));
}

#[test]
fn a_configuration_turning_fair_sharing_on_changes_who_waits() {
    // a and b of 4 GPUs each. Job 1 (a, 8) borrows b's 4 at 0; job 2 (b, 6) at 10 needs 2
    // more than b's quota, so b would borrow too.
    let trace = "id,project,gpus,submit,duration\n1,a,8,0,1000\n2,b,6,10,100\n";
    let config_map = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kueue-manager-config\n  namespace: kueue-system\n\
         data:\n  controller_manager_config.yaml: |\n{}",
        FAIR_SHARING.lines().map(|l| format!("    {l}\n")).collect::<String>()
    );
    let dir = repo(
        BUDGETS,
        trace,
        &[
            ("cluster/queues.yaml", &dump(&[("a", 4), ("b", 4)])),
            ("fair-sharing.yaml", FAIR_SHARING),
            ("configmap.yaml", &config_map),
            ("bad.yaml", &FAIR_SHARING.replace("LessThanInitialShare]", "Sometimes]")),
            ("two.yaml", &format!("{FAIR_SHARING}---\n{FAIR_SHARING}")),
        ],
    );
    // Kueue's defaults (classical preemption): a preemptor that would borrow reclaims
    // nothing (borrowWithinCohort Never), so job 2 waits for job 1 to end: 990 s.
    let (classical, _) = figures(dir.path(), &["--kueue-objects", "cluster"]);
    assert_eq!(classical, json!({"preemptions": 0, "unplaceable": 0, "waits": [0, 990]}));
    // Fair Sharing: b's share with job 2 (borrowing 2) is below a's before (borrowing 4):
    // LessThanInitialShare evicts job 1 (LessThanOrEqualToFinalShare does not: a's share
    // after is 0), job 2 starts at 10, job 1 again at 110: waits 0 and 100.
    for config in ["fair-sharing.yaml", "configmap.yaml"] {
        let (fair, _) = figures(dir.path(), &["--kueue-objects", "cluster", "--kueue-config", config]);
        assert_eq!(fair, json!({"preemptions": 1, "unplaceable": 0, "waits": [0, 100]}), "{config}");
    }
    let stderr = refused(dir.path(), &["--kueue-objects", "cluster", "--kueue-config", "bad.yaml"]);
    assert_eq!(
        stderr,
        "error: --kueue-config bad.yaml: Configuration: fairSharing.preemptionStrategies: \"Sometimes\" is not Kueue's\n"
    );
    // Without --kueue-objects it replaces the Configuration allot writes.
    let stderr = refused(dir.path(), &["--kueue-config", "bad.yaml"]);
    assert!(stderr.starts_with("error: --kueue-config bad.yaml: Configuration: "), "{stderr}");
    let stderr = refused(dir.path(), &["--kueue-config", "two.yaml"]);
    assert_eq!(stderr, "error: --kueue-config two.yaml: 2 documents; one Configuration expected\n");
    let stderr = refused(dir.path(), &["--kueue-config", "cluster/queues.yaml"]);
    assert!(
        stderr.contains(
            "error: --kueue-config cluster/queues.yaml: Configuration: v1 List: not a Kueue Configuration"
        ),
        "{stderr}"
    );
    let stderr = refused(dir.path(), &["--kueue-config", "missing.yaml"]);
    assert_eq!(stderr, "error: --kueue-config missing.yaml: no such file\n");
}

#[test]
fn a_folder_that_cannot_be_read_is_refused_saying_why() {
    let dir = repo(BUDGETS, TRACE, &[("cluster/queues.yaml", &dump(&[("a", 4), ("b", 4)]))]);
    let path = dir.path();
    let error = |args: &[&str]| refused(path, args);
    assert_eq!(error(&["--kueue-objects", "missing"]), "error: --kueue-objects missing: no such folder\n");
    assert_eq!(
        error(&["--kueue-objects", "trace.csv"]),
        "error: --kueue-objects trace.csv: not a folder (give the folder that holds the files)\n"
    );
    std::fs::create_dir(path.join("empty")).unwrap();
    assert_eq!(
        error(&["--kueue-objects", "empty"]),
        "error: --kueue-objects empty: no .yaml, .yml or .json file in the folder\n"
    );
    // Files, but no Kueue object in them.
    std::fs::write(
        path.join("empty/ns.yaml"),
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-a\n",
    )
    .unwrap();
    assert_eq!(
        error(&["--kueue-objects", "empty"]),
        "error: --kueue-objects empty: no Kueue object in its files (passed over 1 object the kueue policy \
         does not read: Namespace)\n"
    );
    // YAML that does not parse: the file, the line and the column.
    std::fs::create_dir(path.join("broken")).unwrap();
    std::fs::write(path.join("broken/a.yaml"), "apiVersion: v1\nkind: List\nitems:\n- metadata: {name: [a\n")
        .unwrap();
    assert_eq!(
        error(&["--kueue-objects", "broken"]),
        "error: --kueue-objects broken: a.yaml: line 4, column 20: unclosed bracket '['\n"
    );
    std::fs::write(path.join("broken/a.yaml"), "kind: ClusterQueue\nkind: Cohort\n").unwrap();
    assert_eq!(
        error(&["--kueue-objects", "broken"]),
        "error: --kueue-objects broken: a.yaml: line 2, column 1: duplicate mapping key `kind` is not allowed here\n"
    );
    std::fs::write(path.join("broken/a.yaml"), "- 1\n- 2\n").unwrap();
    assert_eq!(
        error(&["--kueue-objects", "broken"]),
        "error: --kueue-objects broken: a.yaml: the document at line 1 is not an object (a mapping with \
         apiVersion and kind)\n"
    );
    // Nesting beyond the parser's budget is refused, not a stack overflow.
    std::fs::write(path.join("broken/a.yaml"), format!("a: {}{}\n", "[".repeat(5000), "]".repeat(5000)))
        .unwrap();
    assert_eq!(
        error(&["--kueue-objects", "broken"]),
        "error: --kueue-objects broken: a.yaml: line 1, column 259: recursion limit exceeded\n"
    );
    std::fs::write(path.join("broken/a.yaml"), format!("a: {}{}\n", "[".repeat(100), "]".repeat(100)))
        .unwrap();
    assert_eq!(
        error(&["--kueue-objects", "broken"]),
        "error: --kueue-objects broken: a.yaml: line 1, column 67: YAML document too large or too complex: \
         limits breached: Depth { depth: 65 }\n"
    );
    // A file beyond the limit of one file.
    std::fs::create_dir(path.join("large")).unwrap();
    let file = std::fs::File::create(path.join("large/big.yaml")).unwrap();
    file.set_len((32 << 20) + 1).unwrap();
    assert_eq!(
        error(&["--kueue-objects", "large"]),
        "error: --kueue-objects large: big.yaml: has 33554433 bytes; allot reads at most 32 MiB\n"
    );
    // Three files within it, beyond the limit of a folder.
    std::fs::remove_file(path.join("large/big.yaml")).unwrap();
    for name in ["a.yaml", "b.yaml", "c.yaml"] {
        std::fs::File::create(path.join("large").join(name)).unwrap().set_len(30 << 20).unwrap();
    }
    assert_eq!(
        error(&["--kueue-objects", "large"]),
        "error: --kueue-objects large: its files hold more than 64 MiB; allot reads at most that much from a folder\n"
    );
    // A symbolic link in the folder is refused, wherever it leads.
    #[cfg(unix)]
    {
        std::fs::create_dir(path.join("linked")).unwrap();
        std::fs::copy(path.join("cluster/queues.yaml"), path.join("linked/queues.yaml")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", path.join("linked/passwd.yaml")).unwrap();
        assert_eq!(
            error(&["--kueue-objects", "linked"]),
            "error: --kueue-objects linked: passwd.yaml: is a symbolic link; allot reads only the folder's \
             regular files (copy the file in)\n"
        );
    }
}

#[test]
fn objects_the_simulator_refuses_are_named() {
    // a's GPU quota in two flavors: the policy simulates one ResourceFlavor for GPUs.
    let two_flavors = dump(&[("a", 4), ("b", 4)]).replacen(
        "          nominalQuota: \"4\"\n",
        "          nominalQuota: \"4\"\n      - name: a100\n        resources:\n        - name: nvidia.com/gpu\n          nominalQuota: \"2\"\n",
        1,
    );
    let workload =
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata:\n  name: job-1\n  namespace: team-a\n";
    let dir = repo(
        BUDGETS,
        TRACE,
        &[("flavors/queues.yaml", &two_flavors), ("checks/queues.yaml", &dump(&[("a", 4), ("b", 4)]))],
    );
    assert_eq!(
        refused(dir.path(), &["--kueue-objects", "flavors"]),
        "error: --kueue-objects flavors: ClusterQueue \"a\": flavor \"a100\" has quota for \"nvidia.com/gpu\", and \
         so does flavor \"h100\" (in ClusterQueue \"a\"): the kueue policy simulates one ResourceFlavor for GPUs\n"
    );
    // A Workload in the dump is passed over (the jobs are the trace's); a Kueue kind the
    // policy does not simulate is refused, naming the object.
    std::fs::write(dir.path().join("checks/workload.yaml"), workload).unwrap();
    let (_, stderr) = figures(dir.path(), &["--kueue-objects", "checks"]);
    assert_eq!(
        stderr,
        "note: --kueue-objects checks: passed over 1 object the kueue policy does not read: \
         kueue.x-k8s.io/Workload (Workloads: the jobs come from the trace)\n"
    );
    std::fs::write(
        dir.path().join("checks/workload.yaml"),
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterProfile\nmetadata:\n  name: x\n",
    )
    .unwrap();
    let stderr = refused(dir.path(), &["--kueue-objects", "checks"]);
    assert_eq!(
        stderr,
        "error: --kueue-objects checks: ClusterProfile \"x\": the kueue policy cannot simulate a ClusterProfile\n"
    );
}

#[test]
fn the_cluster_and_the_policy_must_be_clear() {
    let two = "cluster c gpus=8 gpu-type=h100 gpus-per-node=8\ncluster d gpus=8 gpu-type=h100 gpus-per-node=8\n\
        contract batch min-runtime=\"0s\" default=#true\nproject a share=\"50%\"\nproject b share=\"50%\"\n";
    let trace = "id,project,cluster,gpus,submit,duration\n1,a,c,8,0,1000\n2,b,c,4,10,100\n";
    let dir = repo(two, trace, &[("cluster/queues.yaml", &dump(&[("a", 8), ("b", 0)]))]);
    let error = |args: &[&str]| refused(dir.path(), args);
    assert_eq!(
        error(&["--kueue-objects", "cluster"]),
        "error: --kueue-objects cluster: the budgets have several clusters (c, d): say which one the objects \
         are for, as CLUSTER=cluster\n"
    );
    assert_eq!(
        error(&["--kueue-objects", "x=cluster"]),
        "error: --kueue-objects x=cluster: the budgets have no cluster x (their clusters: c, d)\n"
    );
    assert_eq!(
        error(&["--kueue-objects", "c=cluster", "--kueue-objects", "c=cluster"]),
        "error: --kueue-objects c=cluster: cluster c is given objects twice\n"
    );
    // d is not bound to Kueue and given no objects: allot has none to simulate there.
    let stderr = error(&["--kueue-objects", "c=cluster"]);
    assert!(stderr.contains("cluster d is not bound to Kueue"), "{stderr}");
    assert!(stderr.contains("--kueue-objects d=DIR"), "{stderr}");
    // Given objects for both clusters (d's ClusterQueues the same), neither bound to Kueue:
    // GPUs are nvidia.com/gpu. The jobs run on c only: waits 0 and 990 as on one cluster.
    let (own, _) = figures(dir.path(), &["--kueue-objects", "c=cluster", "--kueue-objects", "d=cluster"]);
    assert_eq!(own, json!({"preemptions": 0, "unplaceable": 0, "waits": [0, 990]}));
    assert_eq!(
        error(&["--kueue-objects", "c=cluster", "--policy", "budget"]),
        "error: --kueue-objects is for the kueue policy, and --policy budget does not name it (add it: \
         --policy kueue,budget)\n"
    );
    assert_eq!(
        error(&["--kueue-config", "cluster/queues.yaml", "--policy", "slurm,priority"]),
        "error: --kueue-config is for the kueue policy, and --policy slurm,priority does not name it (add it: \
         --policy kueue,slurm,priority)\n"
    );
    // Side by side with another policy, as asked.
    let (status, stdout, stderr) = simulate(
        dir.path(),
        &[
            "--kueue-objects",
            "c=cluster",
            "--kueue-objects",
            "d=cluster",
            "--policy",
            "kueue,budget",
            "--format",
            "json",
        ],
    );
    assert_eq!(status, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let policies: Vec<&Value> = report["runs"].as_array().unwrap().iter().map(|r| &r["policy"]).collect();
    assert_eq!(policies, [&json!("Kueue as configured"), &json!("budget policy")]);
}
