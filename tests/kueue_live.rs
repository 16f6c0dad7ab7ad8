//! `allot status --live kueue` and `allot explain --live kueue` against a real API server
//! (`scripts/k8s-apiserver.sh`, with Kueue's CRDs and allot's own schema of the Workload):
//! the objects `allot build` writes are created, one of them changed and one left over;
//! the status a Kueue controller would write is written through the status subresource,
//! and Workloads admitted and pending, in the shapes of Kueue's v1beta2 API. allot reads
//! them through a kubeconfig with its client certificate.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::common::Allot;
use crate::common::kube::ApiServer;
use serde_json::{Value, json};

const API: &str = "/apis/kueue.x-k8s.io/v1beta2";
const GPU: &str = "nvidia.com/gpu";

const BUDGETS: &str = r#"
cluster pool gpus=8 gpu-type=h100 gpus-per-node=8 {
    kubernetes kueue flavor=h100
}
contract batch min-runtime="10m" default=#true
contract short min-runtime="0s" max-runtime="1h"
project alpha share="60%" {
    namespaces team-alpha
}
project beta share="40%" {
    project tune share=1 {
        namespaces team-beta
    }
}
"#;

/// An instant as the API server writes it.
fn rfc3339(seconds: i64) -> String {
    allot_verify::render::time(seconds)
}

/// The collection an object is created in.
fn collection(object: &Value) -> String {
    let kind = object["kind"].as_str().unwrap().to_ascii_lowercase();
    let plural = if kind.ends_with('s') { format!("{kind}es") } else { format!("{kind}s") };
    match object["metadata"]["namespace"].as_str() {
        Some(namespace) => format!("{API}/namespaces/{namespace}/{plural}"),
        None => format!("{API}/{plural}"),
    }
}

/// A Workload of one pod set of `gpus` GPUs under contract `class` (priority `priority`).
fn workload(namespace: &str, name: &str, gpus: u64, class: &str, priority: i64, max: Option<i64>) -> Value {
    let mut w = json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": { "namespace": namespace, "name": name },
        "spec": {
            "queueName": if namespace == "team-beta" { "beta-tune" } else { "alpha" },
            "priorityClassRef": { "group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": class },
            "priority": priority,
            "podSets": [{ "name": "main", "count": 1, "template": { "spec": {
                "restartPolicy": "Never",
                "containers": [{ "name": "train", "image": "trainer", "resources": { "requests": { GPU: gpus.to_string(), "cpu": "4" } } }],
            } } }],
        },
    });
    if let Some(max) = max {
        w["spec"]["maximumExecutionTimeSeconds"] = json!(max);
    }
    w
}

fn condition(kind: &str, status: bool, reason: &str, message: &str, at: i64) -> Value {
    json!({ "type": kind, "status": if status { "True" } else { "False" }, "reason": reason, "message": message, "lastTransitionTime": rfc3339(at) })
}

fn usage(total: u64, borrowed: u64) -> Value {
    json!([{ "name": "h100", "resources": [{ "name": GPU, "total": total.to_string(), "borrowed": borrowed.to_string() }] }])
}

#[test]
fn status_and_explain_read_a_live_kueue() {
    let Some(server) = ApiServer::start(27443) else { return };
    let kubeconfig = server.kubeconfig();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("allot.kdl"), BUDGETS).unwrap();
    let repo = dir.path().to_str().unwrap();
    // Before the Workload CRD: a server without Kueue's Workloads is named.
    let (code, _, err) = Allot::new(["status", repo, "--live", "kueue"]).env("KUBECONFIG", kubeconfig).run();
    assert!(
        code != 0
            && err.contains(
                "serves no workloads.kueue.x-k8s.io/v1beta2: is Kueue (with its v1beta2 API) installed there?"
            ),
        "{err}"
    );
    server.create_workload_crd();

    // The budgets, and the objects `allot build` writes for them.
    let out = dir.path().join("out");
    let (code, _, err) = crate::common::allot(&["build", repo, "--out", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let mut created = 0;
    for file in ["resourceflavors", "cohorts", "clusterqueues", "localqueues", "workloadpriorityclasses"] {
        let text = std::fs::read_to_string(out.join("kueue/pool").join(format!("{file}.yaml"))).unwrap();
        let objects: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
        for mut object in objects {
            // beta/tune's weight changed by hand: drift.
            if object["kind"] == "ClusterQueue" && object["metadata"]["name"] == "beta-tune" {
                object["spec"]["fairSharing"]["weight"] = json!("50");
            }
            server.create(&collection(&object), &object);
            created += 1;
        }
    }
    assert_eq!(
        created, 10,
        "a flavor, 2 Cohorts (root, beta), 3 ClusterQueues (root-unbudgeted too), 2 LocalQueues, 2 classes"
    );
    // A ClusterQueue allot once wrote, for a project the budgets no longer have.
    let mut old = server.get(&format!("{API}/clusterqueues/alpha"));
    old["metadata"] = json!({ "name": "gamma", "labels": { "app.kubernetes.io/managed-by": "allot" } });
    old.as_object_mut().unwrap().remove("status");
    server.create(&format!("{API}/clusterqueues"), &old);

    // What a Kueue controller would write. beta/tune runs two workloads of 4 GPUs (its quota
    // is 3 of 8: 5 borrowed); alpha waits for two of 4 and one of 16 that can never fit.
    let clock = || SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64;
    let mut admitted = 0;
    for name in ["b1", "b2"] {
        let w = server.create(
            &format!("{API}/namespaces/team-beta/workloads"),
            &workload("team-beta", name, 4, "batch", 10, Some(600)),
        );
        admitted = clock();
        assert_eq!(
            w["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"][GPU],
            "4"
        );
        server.patch_status(
            &format!("{API}/namespaces/team-beta/workloads/{name}"),
            &json!({ "status": {
                "admission": { "clusterQueue": "beta-tune", "podSetAssignments": [
                    { "name": "main", "count": 1, "flavors": { GPU: "h100" }, "resourceUsage": { GPU: "4" } },
                ] },
                "conditions": [
                    condition("QuotaReserved", true, "QuotaReserved", "Quota reserved in ClusterQueue beta-tune", admitted),
                    condition("Admitted", true, "Admitted", "The workload is admitted", admitted),
                ],
            } }),
        );
    }
    let waiting = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, 4 more needed";
    // A message that tries to forge lines of allot's output, and to move the cursor.
    let forged = format!("{waiting}\nWhen it may be admitted:\n  allot: now\x1b[2J");
    let too_big = "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor h100, previously considered podsets requests (0) + current podset request (16) > maximum capacity (8)";
    // z-first is created a second before a-second: Kueue orders them by time, not by name.
    for (name, gpus, message) in
        [("z-first", 4, forged.as_str()), ("a-second", 4, waiting), ("a-huge", 16, too_big)]
    {
        server.create(
            &format!("{API}/namespaces/team-alpha/workloads"),
            &workload("team-alpha", name, gpus, "batch", 10, None),
        );
        server.patch_status(
            &format!("{API}/namespaces/team-alpha/workloads/{name}"),
            &json!({ "status": { "conditions": [condition("QuotaReserved", false, "Pending", message, clock())] } }),
        );
        std::thread::sleep(std::time::Duration::from_millis(1100));
    }
    server.patch_status(
        &format!("{API}/cohorts/beta"),
        &json!({ "status": { "fairSharing": { "weightedShare": 1042 } } }),
    );
    server.patch_status(
        &format!("{API}/clusterqueues/beta-tune"),
        &json!({ "status": { "flavorsReservation": usage(8, 5), "flavorsUsage": usage(8, 5), "admittedWorkloads": 2, "reservingWorkloads": 2, "fairSharing": { "weightedShare": 1042 } } }),
    );
    server.patch_status(
        &format!("{API}/clusterqueues/alpha"),
        &json!({ "status": { "flavorsReservation": usage(0, 0), "pendingWorkloads": 3, "fairSharing": { "weightedShare": 0 } } }),
    );

    // status: the budgets now, from the workloads and the ClusterQueues.
    let status = Allot::new(["status", repo, "--live", "kueue", "--format", "json"])
        .env("KUBECONFIG", kubeconfig)
        .json();
    let budgets = status["clusters"][0]["budgets"].as_array().unwrap();
    let by = |path: &str| {
        budgets.iter().find(|b| b["budget"] == path).unwrap_or_else(|| panic!("{path}: {status}"))
    };
    let (alpha, beta, tune) = (by("alpha"), by("beta"), by("beta/tune"));
    assert_eq!(budgets.len(), 3, "{status}");
    assert_eq!(status["clusters"][0]["cluster"], "pool");
    // Demand 8 each (the 16-GPU workload can never fit, and asks for nothing): 60:40 of 8.
    assert_eq!(
        (alpha["running_gpus"].as_u64(), alpha["pending_gpus"].as_u64(), alpha["pending_jobs"].as_u64()),
        (Some(0), Some(8), Some(2))
    );
    assert_eq!((beta["running_gpus"].as_u64(), beta["running_jobs"].as_u64()), (Some(8), Some(2)));
    assert!((alpha["entitled_gpus"].as_f64().unwrap() - 4.8).abs() < 1e-9, "{alpha}");
    assert!((beta["entitled_gpus"].as_f64().unwrap() - 3.2).abs() < 1e-9, "{beta}");
    assert!((tune["entitled_gpus"].as_f64().unwrap() - 3.2).abs() < 1e-9, "{tune}");
    assert_eq!((tune["running_gpus"].as_u64(), tune["depth"].as_u64()), (Some(8), Some(1)));
    assert_eq!((alpha["standing"].as_str(), beta["standing"].as_str()), (Some("under"), Some("over")));
    // Guaranteed: 60% and 40% of 8 by largest remainder (4.8, 3.2): 5 and 3.
    assert_eq!((alpha["guaranteed_gpus"].as_u64(), beta["guaranteed_gpus"].as_u64()), (Some(5), Some(3)));
    // batch protects 10 minutes from admission.
    assert_eq!(
        (beta["protected_gpus"].as_u64(), beta["protected_until"].as_i64()),
        (Some(8), Some(admitted + 600))
    );
    // Kueue's own figures, as the controller wrote them: the ClusterQueue's for beta/tune,
    // the Cohort's weighted share (and no reservation) for beta.
    assert_eq!(
        (tune["reserved_gpus"].as_u64(), tune["borrowed_gpus"].as_u64(), tune["weighted_share"].as_u64()),
        (Some(8), Some(5), Some(1042))
    );
    assert_eq!((&beta["reserved_gpus"], beta["weighted_share"].as_u64()), (&Value::Null, Some(1042)));
    assert_eq!(alpha["weighted_share"].as_u64(), Some(0));
    // The drift: beta's weight, and the leftover gamma.
    let drift: Vec<(String, String, Value)> = status["drift"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                format!("{} {}", d["kind"].as_str().unwrap(), d["name"].as_str().unwrap()),
                d["change"].as_str().unwrap().to_string(),
                d["fields"].clone(),
            )
        })
        .collect();
    assert_eq!(
        drift,
        [
            ("ClusterQueue beta-tune".into(), "different".into(), json!(["spec.fairSharing.weight"])),
            ("ClusterQueue gamma".into(), "extra".into(), json!([])),
        ]
    );
    let (code, human, err) =
        Allot::new(["status", repo, "--live", "kueue"]).env("KUBECONFIG", kubeconfig).run();
    assert_eq!(code, 0, "{err}");
    for needed in [
        "WEIGHTED SHARE",
        "cluster pool: 8 GPUs, 8 running, 8 pending",
        "ClusterQueue beta-tune: differs in spec.fairSharing.weight",
        "ClusterQueue gamma: no longer in the budgets",
    ] {
        assert!(human.contains(needed), "{needed:?} not in:\n{human}");
    }
    println!("{human}");

    // explain: a pending workload behind another, with beta's borrowed GPUs to reclaim.
    let explain = Allot::new(["explain", "team-alpha/a-second", "--live", "kueue", repo, "--format", "json"])
        .env("KUBECONFIG", kubeconfig)
        .json();
    assert_eq!(
        (explain["state"].as_str(), explain["budget"].as_str(), explain["cluster_queue"].as_str()),
        (Some("pending"), Some("alpha"), Some("alpha"))
    );
    assert!(
        explain["reason_explained"].as_str().unwrap().starts_with("its ClusterQueue's quota"),
        "{explain}"
    );
    assert_eq!(explain["ahead"], json!([{ "workload": "team-alpha/z-first", "gpus": 4, "priority": 10 }]));
    let preemptible: Vec<(&str, &str)> = explain["preemptible"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["workload"].as_str().unwrap(), p["why"].as_str().unwrap()))
        .collect();
    assert_eq!(preemptible.len(), 2, "{explain}");
    assert!(preemptible.iter().all(|(w, why)| w.starts_with("team-beta/") && *why == "reclaim"), "{explain}");
    // Simulated on the live objects: the stale ClusterQueue gamma adds quota to the cohort
    // beyond the pool's 8 GPUs, so z-first fits the quota (no reclaim) but not the GPUs
    // until beta's workloads end at their maximum execution time; z-first takes 4 then,
    // a-second the rest.
    assert_eq!(explain["estimated_start"].as_i64(), Some(admitted + 600));
    assert_eq!(
        (&explain["estimated_by"], &explain["estimate_not_simulated"]),
        (&json!("simulated"), &Value::Null)
    );
    assert_eq!(explain["position"], Value::Null, "the test server serves no visibility API");
    // Its place in its cohort: alpha borrows nothing, beta's Cohort the most.
    let members: Vec<(&str, &Value)> = explain["cohort"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["name"].as_str().unwrap(), &m["weighted_share"]))
        .collect();
    assert_eq!(explain["cohort"]["name"], "root");
    assert_eq!(members[..2], [("alpha", &json!(0)), ("cohort beta", &json!(1042))], "{explain}");
    let (code, text, err) = Allot::new(["explain", "team-alpha/a-second", "--live", "kueue", repo])
        .env("KUBECONFIG", kubeconfig)
        .run();
    assert_eq!(code, 0, "{err}");
    for needed in [
        "Why: its ClusterQueue's quota",
        "Ahead of it in ClusterQueue alpha: 1 workloads waiting for 4 GPUs",
        "Admitted workloads Kueue may preempt for it: 2",
        "In cohort root, by weighted share: alpha 0, cohort beta 1042, ",
        "Kueue: gives no estimate",
    ] {
        assert!(text.contains(needed), "{needed:?} not in:\n{text}");
    }
    println!("{text}");
    // What the server says is shown on its line, its controls visible: no line is forged.
    let (code, text, err) = Allot::new(["explain", "team-alpha/z-first", "--live", "kueue", repo])
        .env("KUBECONFIG", kubeconfig)
        .run();
    assert_eq!(code, 0, "{err}");
    assert_eq!(text.lines().filter(|l| *l == "When it may be admitted:").count(), 1, "{text}");
    assert!(!text.lines().any(|l| l == "  allot: now"), "{text}");
    assert!(!text.contains('\x1b') && text.contains("4 more needed\\nWhen it may be admitted:"), "{text}");
    // One that can never fit, one admitted, one that does not exist, one misnamed.
    let huge = Allot::new(["explain", "team-alpha/a-huge", "--live", "kueue", repo, "--format", "json"])
        .env("KUBECONFIG", kubeconfig)
        .json();
    assert!(huge["reason_explained"].as_str().unwrap().contains("will not start as it is"), "{huge}");
    assert_eq!(huge["estimated_start"], Value::Null);
    let (code, text, err) =
        Allot::new(["explain", "team-beta/b1", "--live", "kueue", repo]).env("KUBECONFIG", kubeconfig).run();
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("admitted at") && text.contains("its maximum execution time ends it at"), "{text}");
    let (code, _, err) = Allot::new(["explain", "team-alpha/nope", "--live", "kueue", repo])
        .env("KUBECONFIG", kubeconfig)
        .run();
    assert_eq!((code, err.trim()), (1, "error: Kueue holds no workload team-alpha/nope on cluster pool"));
    let (code, _, err) =
        Allot::new(["explain", "123", "--live", "kueue", repo]).env("KUBECONFIG", kubeconfig).run();
    assert!(code != 0 && err.contains("is not a Kueue workload: name it NAMESPACE/NAME"), "{err}");

    // The kubeconfig's contexts: the one named, or a name it does not have.
    let (code, _, err) = Allot::new(["status", repo, "--live", "kueue", "--context", "allot"])
        .env("KUBECONFIG", kubeconfig)
        .run();
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = Allot::new(["status", repo, "--live", "kueue", "--context", "nope"])
        .env("KUBECONFIG", kubeconfig)
        .run();
    assert!(code != 0 && err.contains("has no context `nope` (it has: allot)"), "{err}");
    // Markdown: the drift as a list.
    let (code, markdown, err) = Allot::new(["status", repo, "--live", "kueue", "--format", "markdown"])
        .env("KUBECONFIG", kubeconfig)
        .run();
    assert_eq!(code, 0, "{err}");
    assert!(markdown.contains("\n- ClusterQueue gamma: no longer in the budgets"), "{markdown}");

    // Credentials the server does not take.
    let stranger = dir.path().join("stranger.kubeconfig");
    let text: Vec<String> = std::fs::read_to_string(kubeconfig)
        .unwrap()
        .lines()
        .filter(|l| !l.contains("client-key"))
        .map(|l| {
            if l.contains("client-certificate") {
                "    token: not-a-token".to_string()
            } else {
                l.to_string()
            }
        })
        .collect();
    std::fs::write(&stranger, text.join("\n")).unwrap();
    let (code, _, err) = Allot::new(["status", repo, "--live", "kueue"]).env("KUBECONFIG", &stranger).run();
    assert!(code != 0 && err.contains("did not accept this kubeconfig's credentials"), "{err}");

    // A server that does not answer is named.
    let elsewhere = dir.path().join("elsewhere.kubeconfig");
    let text = std::fs::read_to_string(kubeconfig).unwrap().replace(":27443", ":27440");
    std::fs::write(&elsewhere, text).unwrap();
    let (code, _, err) = Allot::new(["status", repo, "--live", "kueue"]).env("KUBECONFIG", &elsewhere).run();
    assert!(code != 0 && err.contains("cannot reach the API server at https://127.0.0.1:27440/"), "{err}");

    // A grant: the drift mended (beta-tune's weight as built, gamma deleted), the live
    // objects are the budgets' with alpha at 60%. Budgets where alpha has 50% and +10%
    // through January 2099 match them during the grant, and after it the live objects
    // are behind its end.
    let built = std::fs::read_to_string(out.join("kueue/pool/clusterqueues.yaml")).unwrap();
    let built: Vec<Value> = serde_saphyr::from_multiple(&built).unwrap();
    let tune = built.iter().find(|o| o["metadata"]["name"] == "beta-tune").unwrap();
    let weight = &tune["spec"]["fairSharing"]["weight"];
    server.patch(
        &format!("{API}/clusterqueues/beta-tune"),
        &json!({ "spec": { "fairSharing": { "weight": weight } } }),
    );
    server.delete(&format!("{API}/clusterqueues/gamma"));
    let granted = BUDGETS.replace(
        "project alpha share=\"60%\" {",
        "project alpha share=\"50%\" {\n    grant share=\"+10%\" from=\"2099-01-10\" until=\"2099-02-01\" reason=\"launch\"",
    );
    std::fs::write(dir.path().join("allot.kdl"), granted).unwrap();
    let status_at = |at: &str| {
        let status = Allot::new(["status", repo, "--live", "kueue", "--at", at, "--format", "json"])
            .env("KUBECONFIG", kubeconfig)
            .json();
        let drifted: Vec<String> = status["drift"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| format!("{} {}", d["kind"].as_str().unwrap(), d["name"].as_str().unwrap()))
            .collect();
        (drifted, status["behind_since"].clone(), status["next_share_change"].clone())
    };
    assert_eq!(status_at("2099-01-15"), (vec![], Value::Null, json!("2099-02-01")));
    let (drifted, behind, next) = status_at("2099-02-05");
    assert!(drifted.contains(&"ClusterQueue alpha".to_string()), "{drifted:?}");
    assert_eq!((behind, next), (json!("2099-02-01"), Value::Null));
    let (code, human, err) = Allot::new(["status", repo, "--live", "kueue", "--at", "2099-02-05"])
        .env("KUBECONFIG", kubeconfig)
        .run();
    assert_eq!(code, 0, "{err}");
    assert!(human.contains("It is the budgets' configuration of before 2099-02-01"), "{human}");
}

#[test]
fn an_api_server_that_does_not_answer_is_given_up_at_the_bound() {
    // A server that takes connections and never answers (nor finishes the TLS handshake).
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            held.push(stream);
        }
    });
    gives_up_at_the_bound(
        &format!("https://127.0.0.1:{port}"),
        "    insecure-skip-tls-verify: true\n",
        "token: t",
    );
}

/// `status --live kueue --timeout 1s` against the server at `url` (with `cluster` lines
/// added to the kubeconfig's cluster, and the user `user`): it ends with an error naming the
/// server and the first request, well within the bound.
fn gives_up_at_the_bound(url: &str, cluster: &str, user: &str) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("allot.kdl"), BUDGETS).unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {url}\n{cluster}users:\n- name: u\n  user:\n    {user}\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n"
        ),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let (code, _, err) =
        Allot::new(["status", dir.path().to_str().unwrap(), "--live", "kueue", "--timeout", "1s"])
            .env("KUBECONFIG", &kubeconfig)
            .run();
    let took = started.elapsed();
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!(
            "the API server at {url}/ did not answer the request for clusterqueues within 1 s"
        )),
        "{err}"
    );
    assert!(took < std::time::Duration::from_secs(20), "took {took:?}");
}

#[test]
fn an_api_server_that_stops_answering_in_the_middle_of_a_list_is_given_up_at_the_bound() {
    // A server that answers every request with the start of a list, then says no more.
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"apiVersion\":\"kueue.x-k8s.io/v1beta2\",\"kind\":\"ClusterQueueList\",\"items\":[",
            );
            let _ = stream.flush();
            held.push(stream);
        }
    });
    gives_up_at_the_bound(&format!("http://127.0.0.1:{port}"), "", "{}");
}
