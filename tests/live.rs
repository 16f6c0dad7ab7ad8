//! `allot status --live slurm` and `allot explain --live slurm` with allot's floors, against
//! stand-ins for Slurm's client commands (scripts first on PATH that print a queue, a dump,
//! the QOS and the usage written by the test): the GPUs of each budget's floor in use and
//! beyond it, the tier a running job runs in and from when it is preemptible, and whether a
//! pending job's floor has room and when the protection of the work it would preempt ends.
//! tests/slurm_live.rs and tests/slurm_floors_real.rs run against a real Slurm.

use crate::common::SlurmStandIns;
use crate::common::scripts::{SACCT, SACCTMGR, SCONTROL_PARTITIONS, SINFO, SQUEUE, SSHARE};

/// 8 GPUs bound to partition gpu of Slurm cluster s; a and b guarantee 4 each: a floor of 4
/// each (`gpu-floor-a`, `gpu-floor-b`). Jobs under batch are protected for an hour.
const BUDGETS: &str = r#"
cluster main gpus=8 gpu-type=h100 gpus-per-node=8 {
    slurm cluster=s partition=gpu
}
contract batch min-runtime="1h" default=#true
project a share="50%" {
    users alma
}
project b share="50%" {
    users bert
}
"#;

/// The live associations, as `allot build` writes them for these budgets.
const DUMP: &str = "Cluster - 's'\nParent - 'root'\n\
    Account - 'a':Description='a':Organization='allot':Fairshare=50:QOS='batch,preemptible':DefaultQOS='batch'\n\
    Account - 'b':Description='b':Organization='allot':Fairshare=50:QOS='batch,preemptible':DefaultQOS='batch'\n\
    Parent - 'a'\nUser - 'alma':DefaultAccount='a':Fairshare=1\n\
    Parent - 'b'\nUser - 'bert':DefaultAccount='b':Fairshare=1\n";

/// The live QOS: batch protects an hour (`PreemptExemptTime`); the floors' partition QOS.
const QOS: &str = "normal|0|cluster|||||\npreemptible|0|requeue|||||\n\
    batch|0|cancel|01:00:00||||preemptible\n\
    gpu-floor-a|0|cluster||||gres/gpu=4|\ngpu-floor-b|0|cluster||||gres/gpu=4|\n";

/// The live partitions, as `scontrol --oneliner show partition` prints them: the bound
/// partition and the floors allot writes.
const PARTITIONS: &str = "PartitionName=gpu AllowGroups=ALL AllowAccounts=ALL Default=YES PriorityTier=1 PreemptMode=REQUEUE State=UP TotalNodes=1\n\
    PartitionName=gpu-floor-a AllowGroups=ALL AllowAccounts=a Default=NO PriorityTier=2 PreemptMode=OFF QoS=gpu-floor-a State=UP TotalNodes=1\n\
    PartitionName=gpu-floor-b AllowGroups=ALL AllowAccounts=b Default=NO PriorityTier=2 PreemptMode=OFF QoS=gpu-floor-b State=UP TotalNodes=1\n";

const SSHARE_TXT: &str = "root||0\na||0\na|alma|0\nb||100\nb|bert|100\n";

/// 2026-01-01T00:00:00Z: every job's submission, and the start of b's jobs in its floor
/// (their protection long over).
const T0: i64 = 1_767_225_600;
/// 2099-12-31T23:00:00Z: the start of b's job in gpu, so that its protection (an hour) ends
/// at 2100-01-01T00:00:00Z, after the test's clock whenever it runs.
const LATE: i64 = 4_102_441_200;

/// The queue, as `squeue -O` prints it: b runs 3 + 1 GPUs in its floor and 2 in gpu; a
/// waits for 4 in its floor or gpu (Slurm's reason: the nodes are kept for a higher tier;
/// its backfill's estimate a year away); b waits for 1 more.
fn squeue() -> String {
    let nodes = "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions";
    let year = T0 + 365 * 86_400;
    [
        format!("1|bert|b|batch|gpu-floor-b|RUNNING|{T0}|{T0}|{T0}|UNLIMITED|cpu=1,gres/gpu=3|100|None"),
        format!(
            "2|bert|b|batch|gpu-floor-b|RUNNING|{T0}|{T0}|{}|UNLIMITED|cpu=1,gres/gpu=1|100|None",
            T0 + 100
        ),
        format!("3|bert|b|batch|gpu|RUNNING|{T0}|{T0}|{LATE}|1-00:00:00|cpu=1,gres/gpu=2|100|None"),
        format!(
            "4|alma|a|batch|gpu,gpu-floor-a|PENDING|{T0}|{T0}|{year}|1-00:00:00|cpu=1,gres/gpu=4|200|{nodes}"
        ),
        format!(
            "5|bert|b|batch|gpu-floor-b,gpu|PENDING|{T0}|{T0}|N/A|1-00:00:00|cpu=1,gres/gpu=1|50|Priority"
        ),
    ]
    .iter()
    .map(|line| format!("{line}\n"))
    .collect()
}

/// The nodes: n1 drained by allot, running job 3; n2 in service.
const SINFO_TXT: &str = "CLUSTER: s\nn1|mixed+drain|allot drain: fan noise\nn2|idle|none\n";

/// Job 3 on n1, as `squeue --nodelist -O` (allot drain's format) prints it.
fn node_jobs() -> String {
    format!("CLUSTER: s\n3|bert|batch|RUNNING|{LATE}|1-00:00:00|1|\n")
}

/// The stand-ins with the state above.
fn stand_ins() -> SlurmStandIns {
    stand_ins_for(BUDGETS)
}

/// The stand-ins with the state above, for `budgets`.
fn stand_ins_for(budgets: &str) -> SlurmStandIns {
    let programs = [
        ("squeue", SQUEUE),
        ("sinfo", SINFO),
        ("scontrol", SCONTROL_PARTITIONS),
        ("sshare", SSHARE),
        ("sacct", SACCT),
        ("sacctmgr", SACCTMGR),
    ];
    let (queue, on_n1) = (squeue(), node_jobs());
    let state = [
        ("sinfo.txt", SINFO_TXT),
        ("nodejobs.txt", on_n1.as_str()),
        ("dump.cfg", DUMP),
        ("qos.txt", QOS),
        ("sshare.txt", SSHARE_TXT),
        ("partitions.txt", PARTITIONS),
        ("squeue.txt", queue.as_str()),
    ];
    SlurmStandIns::new(&programs, &state, budgets)
}

#[test]
fn status_says_when_shares_change_next_and_when_the_live_configuration_is_behind_a_grant() {
    // a holds 40% and, with a grant from 2099-01-10 until 2099-02-01, 50%: the live
    // configuration (Fairshare 50 and 50, floors of 4 and 4) is that of the grant's time.
    let granted = BUDGETS.replace(
        "project a share=\"50%\" {\n",
        "project a share=\"40%\" {\n    grant share=\"+10%\" from=\"2099-01-10\" until=\"2099-02-01\" reason=\"deadline\"\n",
    );
    let fake = stand_ins_for(&granted);
    let status = |at: &str| {
        let json = fake.json(&["status", "--live", "slurm", "--at", at]);
        (
            json["drift"]["changes"].as_array().map_or(0, Vec::len),
            json["behind_since"].clone(),
            json["next_share_change"].clone(),
        )
    };
    // Before the grant: Fairshare 40 and floor 3 are due, and the grant starts next; the
    // live configuration is ahead, not behind.
    let (drift, behind, next) = status("2099-01-05");
    assert!(drift > 0);
    assert_eq!((behind, next), (serde_json::Value::Null, "2099-01-10".into()));
    // During it: the live configuration matches; the grant ends next.
    assert_eq!(status("2099-01-15"), (0, serde_json::Value::Null, "2099-02-01".into()));
    // After it: the live configuration is still the grant's: behind since it ended.
    let (drift, behind, next) = status("2099-02-05");
    assert!(drift > 0);
    assert_eq!((behind, next), ("2099-02-01".into(), serde_json::Value::Null));
    let (code, text, stderr) = fake.run(&["status", "--live", "slurm", "--at", "2099-02-05"]);
    assert_eq!(code, 0, "{stderr}");
    contains(
        &text,
        &[
            "It is the budgets' configuration of before 2099-02-01, when grants changed the shares: it is behind them",
        ],
    );
    let (_, text, _) = fake.run(&["status", "--live", "slurm", "--at", "2099-01-15"]);
    contains(&text, &["match the budgets.\nShares change next on 2099-02-01 (`allot grants`).\n"]);
}

#[test]
fn a_slurm_command_that_does_not_answer_is_stopped_at_the_bound() {
    // squeue hangs (as it does while slurmctld is stopped): status ends with an error naming
    // it and the bound, well before the stand-in would have ended.
    let fake = stand_ins();
    crate::common::stand_ins(fake.dir.path(), &[("squeue", "#!/bin/sh\nexec sleep 60\n")]);
    let started = std::time::Instant::now();
    let (code, stdout, stderr) = fake.run(&["status", "--live", "slurm", "--timeout", "1s"]);
    let took = started.elapsed();
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    contains(
        &stderr,
        &["error: squeue did not finish within 1 s: allot stopped it", "scontrol ping", "--timeout"],
    );
    assert!(took < std::time::Duration::from_secs(20), "took {took:?}");
    // A bound that is no duration is refused before anything runs.
    let (code, _, stderr) = fake.run(&["status", "--live", "slurm", "--timeout", "soon"]);
    assert_eq!(code, 1);
    contains(&stderr, &["--timeout soon: not a duration of a second or more"]);
}

fn contains(text: &str, wanted: &[&str]) {
    for line in wanted {
        assert!(text.contains(line), "no {line:?} in\n{text}");
    }
}

#[test]
fn status_shows_each_budgets_floor_in_use_and_its_gpus_beyond_it() {
    let fake = stand_ins();
    let (code, text, stderr) = fake.run(&["status", "--live", "slurm"]);
    assert_eq!(code, 0, "{text}\n{stderr}");
    // b: 4 of its floor's 4 GPUs in use (jobs 1 and 2), 2 beyond it in gpu (job 3); a: none
    // of its 4 in use, 4 pending (job 4; Slurm's higher-tier reason counts as waiting for
    // GPUs). b waits for 1 more (job 5).
    contains(
        &text,
        &[
            "cluster main: 8 GPUs, 6 running, 5 pending; 1 budget over their entitlement, 1 budget under\n",
            "  BUDGET SHARE GUARANTEED RUNNING PENDING ENTITLED               STANDING PROTECTED UNTIL                 FLOOR BEYOND USAGE/SHARE\n",
            "  a      50.0%          4       0       4      4.0  ░░░░░░░░░░░░ under            0 -                    0 of 4      0",
            "  b      50.0%          4       6       1      4.0  ████████▒▒▒▒ over             2 2100-01-01T00:00:00Z 4 of 4      2",
            "FLOOR: GPUs running in the budget's floors",
            "BEYOND: GPUs of its jobs in the bound partition, beyond the floors",
            // The node allot drains, empty when job 3 ends: batch is not resumable here, so
            // it runs to its time limit, a day from its start.
            "\nNodes allot drains:\n  n1 (fan noise): 1 job left, empty at 2100-01-01T23:00:00Z\n",
        ],
    );
    let status = fake.json(&["status", "--live", "slurm"]);
    assert_eq!(
        status["draining"],
        serde_json::json!([{ "node": "n1", "reason": "fan noise", "jobs": 1, "empty_at": LATE + 86_400 }])
    );
    let row = |name: &str| {
        let rows = status["clusters"][0]["budgets"].as_array().unwrap();
        rows.iter().find(|r| r["budget"] == name).unwrap().clone()
    };
    let floor = |name: &str| {
        let row = row(name);
        ["floor_gpus", "in_floor_gpus", "over_gpus"].map(|key| row[key].as_u64().unwrap())
    };
    assert_eq!((floor("a"), floor("b")), ([4, 0, 0], [4, 4, 2]));
    assert_eq!(
        (row("b")["protected_gpus"].as_u64(), row("b")["protected_until"].as_i64()),
        (Some(2), Some(LATE + 3_600))
    );
    let (code, markdown, _) = fake.run(&["status", "--live", "slurm", "--format", "markdown"]);
    assert_eq!(code, 0);
    contains(
        &markdown,
        &["| floor GPUs in use | GPUs beyond the floor |", "| 4 of 4 | 2 |", "- n1 (fan noise): 1 job left"],
    );
}

#[test]
fn explain_says_which_tier_a_job_runs_in_and_whether_a_floor_has_room() {
    let fake = stand_ins();
    // Job 1 runs in b's floor: never preempted.
    let (code, text, stderr) = fake.run(&["explain", "1", "--live", "slurm"]);
    assert_eq!(code, 0, "{text}\n{stderr}");
    contains(&text, &["  runs in the floor gpu-floor-b of budget b (4 GPUs): never preempted\n"]);
    assert!(!text.contains("QOS"), "{text}");
    // Job 3 runs in gpu: preemptible once its hour of protection has passed.
    let (_, text, _) = fake.run(&["explain", "3", "--live", "slurm"]);
    contains(
        &text,
        &[
            "  runs in gpu, beyond the budgets' floors: preemptible from 2100-01-01T00:00:00Z (its start plus its contract's protection) by any budget under its floor; the youngest jobs go first\n",
        ],
    );
    let running = fake.json(&["explain", "3", "--live", "slurm"]);
    assert_eq!(
        running["tier"],
        serde_json::json!({ "partition": "gpu", "floor": false, "preemptible_from": LATE + 3_600 })
    );

    // Job 4 of a: its floor has room (0 of 4 in use); 2 of its 4 GPUs are free, the other 2
    // are job 3's, protected until 2100-01-01T00:00:00Z: it preempts job 3 then, in place of
    // Slurm's reason and its estimate a year away.
    let (_, text, _) = fake.run(&["explain", "4", "--live", "slurm"]);
    contains(
        &text,
        &[
            "Why: its floor gpu-floor-a has room for it (floor 4 GPUs, 0 in use); of the 4 GPUs it asks for, 2 are free, and the rest are held by jobs in gpu still protected by their contracts: it preempts them (the youngest first) once their protection ends, at 2100-01-01T00:00:00Z (Slurm: `Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions`)\n",
            "Running jobs it may preempt (from its floor gpu-floor-a, the jobs in gpu once past their protection, the youngest first): 1\n",
            "  job 3 of bert (b, 2 GPUs, QOS batch): protected until 2100-01-01T00:00:00Z\n",
            "  allot: 2100-01-01T00:00:00Z (from its floor it preempts jobs in gpu once their protection ends; Slurm's main scheduler does so at its next pass)\n",
            "  Slurm (backfill's plan, as `squeue --start` shows it, which counts no preemption): 2027-01-01T00:00:00Z\n",
            "Ahead of it in partition gpu: 0 jobs",
        ],
    );
    let pending = fake.json(&["explain", "4", "--live", "slurm"]);
    assert_eq!(
        pending["floor"],
        serde_json::json!({
            "floors": [{ "partition": "gpu-floor-a", "budget": "a", "gpus": 4, "in_use": 0 }],
            "room": "gpu-floor-a",
            "over": "gpu",
            "free_gpus": 2,
            "preemptible_from": LATE + 3_600,
        })
    );
    assert_eq!(pending["estimated_start"], LATE + 3_600);
    assert_eq!(pending["preemptible"][0]["job"], "3");
    assert!(pending["tier"].is_null());

    // Job 5 of b: its floor is full (4 of 4): it waits in gpu, behind job 4, and preempts
    // nothing.
    let (_, text, _) = fake.run(&["explain", "5", "--live", "slurm"]);
    contains(
        &text,
        &[
            "Why: its floor gpu-floor-b (floor 4 GPUs, 4 in use) is too full for its 1 GPU: it waits in gpu, beyond its floor, for GPUs to free up, and preempts nothing (Slurm: `Priority`)\n",
            "Running jobs it may preempt (its floors are full, and in gpu, beyond them, no job preempts another): 0\n",
            "Ahead of it in partition gpu: 1 jobs waiting for 4 GPUs",
        ],
    );
}

#[test]
fn without_the_floor_partitions_slurm_runs_no_floors() {
    // The budgets have floors, but Slurm runs only the bound partition (its jobs there): no
    // floor columns, and a running job is explained by its QOS.
    let fake = stand_ins();
    std::fs::write(fake.path("partitions.txt"), PARTITIONS.lines().next().unwrap()).unwrap();
    let plain = squeue()
        .replace("gpu,gpu-floor-a", "gpu")
        .replace("gpu-floor-b,gpu", "gpu")
        .replace("gpu-floor-b", "gpu");
    std::fs::write(fake.path("squeue.txt"), plain).unwrap();
    let (code, text, stderr) = fake.run(&["status", "--live", "slurm"]);
    assert_eq!(code, 0, "{text}\n{stderr}");
    assert!(!text.contains("FLOOR") && !text.contains("BEYOND"), "{text}");
    let status = fake.json(&["status", "--live", "slurm"]);
    assert!(status["clusters"][0]["budgets"][0].get("floor_gpus").is_none(), "{status}");
    let (_, text, _) = fake.run(&["explain", "3", "--live", "slurm"]);
    contains(&text, &["  no QOS may preempt it (its QOS is in no QOS's Preempt list)\n"]);
    let pending = fake.json(&["explain", "4", "--live", "slurm"]);
    assert!(pending["floor"].is_null() && pending["tier"].is_null(), "{pending}");
    assert!(
        pending["reason_explained"]
            .as_str()
            .unwrap()
            .starts_with("the nodes it could use are taken by, or kept for,"),
        "{pending}"
    );
}
