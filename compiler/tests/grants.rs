//! Grants across their boundaries, worked by hand: the model at several moments, the
//! calendar, and the checks that depend on the moment.

use allot_compiler::calendar::{around, boundaries, calendar};
use allot_compiler::ir::{Model, Project};
use allot_compiler::units::{Instant, parse_instant};
use allot_compiler::{Code, Compilation, MemoryLoader, compile};

fn day(text: &str) -> Instant {
    parse_instant(text).unwrap()
}

fn compiled(text: &str, at: &str) -> Compilation {
    compile(&MemoryLoader::new([("allot.kdl", text)]), "allot.kdl", day(at))
}

fn model(text: &str, at: &str) -> Model {
    let c = compiled(text, at);
    c.model.unwrap_or_else(|| panic!("{:?}", c.diagnostics))
}

fn project<'m>(model: &'m Model, path: &str) -> &'m Project {
    model.projects_by_path()[path].0
}

/// Guaranteed GPUs of `path` on `cluster`.
fn gpus(model: &Model, path: &str, cluster: &str) -> u64 {
    project(model, path).clusters[cluster].guaranteed_gpus
}

fn unallocated(model: &Model, cluster: &str) -> u64 {
    model.clusters.iter().find(|c| c.name == cluster).unwrap().unallocated_gpus
}

const PERCENT: &str = r#"
cluster jupiter gpus=100 gpu-type=h100 gpus-per-node=4
cluster saturn gpus=40 gpu-type=a100 gpus-per-node=4
contract batch min-runtime="1h" default=#true
project nlp share="30%" {
    grant share="+10%" from="2027-01-10" until="2027-02-01" reason="ACL deadline"
}
project vision share="50%" {
    grant guaranteed-gpus=10 cluster=jupiter until="2027-01-20" reason="launch"
}
"#;

#[test]
fn percentages_gain_their_grants_points_from_the_unallocated_rest() {
    // Before nlp's grant, during vision's: vision holds 50% + 10 of jupiter's 100 GPUs.
    let m = model(PERCENT, "2027-01-01");
    assert_eq!(
        (gpus(&m, "nlp", "jupiter"), gpus(&m, "vision", "jupiter"), unallocated(&m, "jupiter")),
        (30, 60, 10)
    );
    assert_eq!(
        (gpus(&m, "nlp", "saturn"), gpus(&m, "vision", "saturn"), unallocated(&m, "saturn")),
        (12, 20, 8)
    );
    let vision = &project(&m, "vision").clusters;
    assert!((vision["jupiter"].effective_share - 0.6).abs() < 1e-12);
    assert!((vision["jupiter"].granted_share - 0.1).abs() < 1e-12);
    assert_eq!(vision["saturn"].granted_share, 0.0);

    // Both in force: nlp 40% everywhere, vision still 60 on jupiter, nothing left there.
    let m = model(PERCENT, "2027-01-15");
    assert_eq!(
        (gpus(&m, "nlp", "jupiter"), gpus(&m, "vision", "jupiter"), unallocated(&m, "jupiter")),
        (40, 60, 0)
    );
    assert_eq!(
        (gpus(&m, "nlp", "saturn"), gpus(&m, "vision", "saturn"), unallocated(&m, "saturn")),
        (16, 20, 4)
    );

    // vision's grant ended on the 20th (its `until` is the first moment without it).
    let m = model(PERCENT, "2027-01-20");
    assert_eq!(
        (gpus(&m, "nlp", "jupiter"), gpus(&m, "vision", "jupiter"), unallocated(&m, "jupiter")),
        (40, 50, 10)
    );

    // Both ended: the shares as written.
    let m = model(PERCENT, "2027-02-01");
    assert_eq!(
        (gpus(&m, "nlp", "jupiter"), gpus(&m, "vision", "jupiter"), unallocated(&m, "jupiter")),
        (30, 50, 20)
    );
    assert_eq!(project(&m, "nlp").grants.len(), 1, "the model keeps the grants as written");
}

#[test]
fn among_weights_the_siblings_without_a_grant_make_room() {
    let text = r#"
cluster c gpus=120 gpu-type=h100 gpus-per-node=4
contract batch min-runtime="1h" default=#true
project a share=1 {
    grant share="+10%" from="2027-01-10" until="2027-02-01" reason="deadline"
}
project b share=1
project d share=2
project ml share=2 {
    project x share=1
    project y share=1 {
        grant guaranteed-gpus=6 until="2027-02-01" reason="launch"
    }
}
"#;
    // Without the grant: weights 1, 1, 2, 2 of 120 GPUs: 20, 20, 40, 40; ml's 40 split 20/20
    // plus y's 6 GPUs: y holds 1/2 + 6/40 = 65% of ml, 26; x the rest, 14.
    let m = model(text, "2027-01-01");
    assert_eq!(
        [gpus(&m, "a", "c"), gpus(&m, "b", "c"), gpus(&m, "d", "c"), gpus(&m, "ml", "c")],
        [20, 20, 40, 40]
    );
    assert_eq!([gpus(&m, "ml/x", "c"), gpus(&m, "ml/y", "c")], [14, 26]);
    // With it: a holds 1/6 + 10% = 26.667%, 32 GPUs; b, d and ml share 73.333% by 1:2:2:
    // 14.667% (17.6 GPUs), 29.333% (35.2), 29.333% (35.2); largest remainders: 18, 35, 35.
    let m = model(text, "2027-01-15");
    let a = &project(&m, "a").clusters["c"];
    assert!((a.normalized_share - (1.0 / 6.0 + 0.1)).abs() < 1e-12, "{}", a.normalized_share);
    assert_eq!(
        [gpus(&m, "a", "c"), gpus(&m, "b", "c"), gpus(&m, "d", "c"), gpus(&m, "ml", "c")],
        [32, 18, 35, 35]
    );
    // ml's 35: y 1/2 + 6/35 = 67.14%, 23.5 GPUs; x 32.86%, 11.5; the tie goes to x, the
    // earlier sibling: 12 and 23.
    assert_eq!([gpus(&m, "ml/x", "c"), gpus(&m, "ml/y", "c")], [12, 23]);
}

#[test]
fn grants_that_meet_end_to_end_fit_and_overlapping_ones_are_an_error_at_their_first_moment() {
    let text = |second_from: &str| {
        format!(
            r#"
cluster c gpus=64 gpu-type=h100 gpus-per-node=8
contract batch min-runtime="1h" default=#true
project nlp share="50%" {{
    grant share="+10%" from="2027-01-10" until="2027-02-01" reason="ACL"
}}
project vision share="40%" {{
    grant share="+10%" from="{second_from}" until="2027-03-01" reason="CVPR"
}}
"#
        )
    };
    // vision's grant starts when nlp's ends: 60% + 40%, then 50% + 50%.
    let c = compiled(&text("2027-02-01"), "2027-01-01");
    assert!(c.diagnostics.is_empty(), "{:?}", c.diagnostics);
    // One day of overlap: 110% on 2027-01-31, reported once, with both grants marked.
    let c = compiled(&text("2027-01-31"), "2027-01-01");
    assert!(c.model.is_none());
    let overcommit: Vec<_> = c.diagnostics.iter().filter(|d| d.code == Code::GrantOvercommit).collect();
    assert_eq!(overcommit.len(), 1, "{:?}", c.diagnostics);
    assert_eq!(
        overcommit[0].message,
        "from 2027-01-31, the top-level projects claim 110% of `c` with their grants"
    );
    assert_eq!(overcommit[0].labels.len(), 2);
    // A grant in force from the start is checked at the moment compiled.
    let now = "cluster c gpus=64 gpu-type=h100 gpus-per-node=8\ncontract batch min-runtime=\"1h\" default=#true\n\
        project nlp share=\"60%\" {\n    grant share=\"+50%\" until=\"2099-01-01\" reason=\"r\"\n}\n";
    let c = compiled(now, "2027-01-01");
    let messages: Vec<&str> = c.diagnostics.iter().map(|d| d.message.as_str()).collect();
    assert_eq!(messages, ["from 2027-01-01, the top-level projects claim 110% of `c` with their grants"]);
    // A GPU grant below a grant that ends: the parent's GPUs shrink, the child's grant is
    // more of them. ml holds 50% + 25% of 64 GPUs (48) until 2027-02-01, then 32; x and y
    // hold weights 1 and 1 and y 24 GPUs more: 50% + 50% of 48 fits, 50% + 75% of 32 does not.
    let shrinking = "cluster c gpus=64 gpu-type=h100 gpus-per-node=8\ncontract batch min-runtime=\"1h\" default=#true\n\
        project ml share=\"50%\" {\n    grant share=\"+25%\" until=\"2027-02-01\" reason=\"r\"\n    project x share=1\n    project y share=1 {\n        grant guaranteed-gpus=24 until=\"2027-03-01\" reason=\"r\"\n    }\n}\n";
    let c = compiled(shrinking, "2027-01-01");
    let messages: Vec<&str> = c.diagnostics.iter().map(|d| d.message.as_str()).collect();
    assert_eq!(messages, ["from 2027-02-01, the children of `ml` claim 125% of `c` with their grants"]);
    // Checked after the overlap has passed, nothing is wrong any more.
    let c = compiled(&text("2027-01-31"), "2027-02-01");
    assert!(!c.has_errors(), "{:?}", c.diagnostics);
}

#[test]
fn declared_overcommit_scales_granted_shares_down_instead() {
    let text = r#"
cluster c gpus=100 gpu-type=h100 gpus-per-node=4
policy overcommit=#true
contract batch min-runtime="1h" default=#true
project nlp share="60%" {
    grant share="+20%" until="2027-02-01" reason="deadline"
}
project vision share="40%"
"#;
    // 80% + 40% = 120%, scaled by 100/120: 66.667% and 33.333%.
    let m = model(text, "2027-01-01");
    assert_eq!((gpus(&m, "nlp", "c"), gpus(&m, "vision", "c")), (67, 33));
}

#[test]
fn an_ended_grant_is_a_warning_only_once_it_has_ended() {
    let c = compiled(PERCENT, "2027-01-25");
    let expired: Vec<_> = c.diagnostics.iter().filter(|d| d.code == Code::GrantExpired).collect();
    assert_eq!(expired.len(), 1, "{:?}", c.diagnostics);
    assert_eq!(expired[0].message, "this grant to `vision` ended on 2027-01-20");
    assert!(c.model.is_some(), "a warning keeps the model");
    assert!(compiled(PERCENT, "2027-01-19").diagnostics.is_empty());
}

#[test]
fn the_policy_bounds_a_grant_from_its_start_or_from_the_moment_checked() {
    let text = |from: &str| {
        format!(
            r#"
cluster c gpus=64 gpu-type=h100 gpus-per-node=8
policy max-grant="30d"
contract batch min-runtime="1h" default=#true
project nlp share="50%" {{
    grant share="+10%" {from} until="2027-03-01" reason="ACL"
}}
"#
        )
    };
    let too_long = |c: &Compilation| c.diagnostics.iter().any(|d| d.code == Code::GrantTooLong);
    // From 2027-02-01 to 2027-03-01: 28 days.
    assert!(!too_long(&compiled(&text(r#"from="2027-02-01""#), "2027-01-01")));
    // From 2027-01-01: 59 days.
    assert!(too_long(&compiled(&text(r#"from="2027-01-01""#), "2027-01-01")));
    // Without `from`, from the moment checked: 59 days on Jan 1, 19 days on Feb 10.
    assert!(too_long(&compiled(&text(""), "2027-01-01")));
    assert!(!too_long(&compiled(&text(""), "2027-02-10")));
}

#[test]
fn the_calendar_lists_each_boundary_with_what_starts_ends_and_moves() {
    let c = compiled(PERCENT, "2027-01-01");
    assert_eq!(boundaries(&c.budget), vec![day("2027-01-10"), day("2027-01-20"), day("2027-02-01")]);
    let days = calendar(&c.budget, &c.sources, day("2027-01-01"));
    assert_eq!(
        days.iter().map(|b| b.at).collect::<Vec<_>>(),
        vec![day("2027-01-10"), day("2027-01-20"), day("2027-02-01")]
    );
    let first = &days[0];
    assert_eq!(first.starting.len(), 1);
    assert_eq!(first.starting[0].0, "nlp");
    assert!(first.ending.is_empty());
    // nlp gains 10 GPUs on jupiter and 4 on saturn; nothing else moves.
    let moves: Vec<(String, String, u64, u64)> = first
        .moves
        .iter()
        .map(|m| {
            (
                m.project.clone(),
                m.cluster.clone(),
                m.before.unwrap().guaranteed_gpus,
                m.after.unwrap().guaranteed_gpus,
            )
        })
        .collect();
    assert_eq!(
        moves,
        vec![("nlp".into(), "jupiter".into(), 30, 40), ("nlp".into(), "saturn".into(), 12, 16)]
    );
    let second = &days[1];
    assert_eq!((second.starting.len(), second.ending.len()), (0, 1));
    assert_eq!(second.moves.len(), 1, "vision on jupiter only");
    assert_eq!(
        (second.moves[0].before.unwrap().guaranteed_gpus, second.moves[0].after.unwrap().guaranteed_gpus),
        (60, 50)
    );
    // From a later moment, only the boundaries after it.
    assert_eq!(calendar(&c.budget, &c.sources, day("2027-01-20")).len(), 1);
}

#[test]
fn a_live_view_gets_the_last_boundary_with_the_shares_before_it_and_the_next() {
    let c = compiled(PERCENT, "2027-01-01");
    let gpus_of = |m: &Model| (gpus(m, "nlp", "jupiter"), gpus(m, "vision", "jupiter"));
    // Before every boundary: no last one; the next is nlp's start.
    let a = around(&c.budget, &c.sources, day("2027-01-01"));
    assert!(a.last.is_none());
    assert_eq!(a.next, Some(day("2027-01-10")));
    // On the 15th: the last is nlp's start, with the shares of before it (30 and 60, as on
    // the 1st); the next is vision's end.
    let a = around(&c.budget, &c.sources, day("2027-01-15"));
    let (last, before) = a.last.unwrap();
    assert_eq!((last, gpus_of(&before)), (day("2027-01-10"), (30, 60)));
    assert_eq!(a.next, Some(day("2027-01-20")));
    // At a boundary itself, it is the last: at the 20th, the shares of before it (40 and 60).
    let a = around(&c.budget, &c.sources, day("2027-01-20"));
    let (last, before) = a.last.unwrap();
    assert_eq!((last, gpus_of(&before)), (day("2027-01-20"), (40, 60)));
    assert_eq!(a.next, Some(day("2027-02-01")));
    // After the last: no next.
    let a = around(&c.budget, &c.sources, day("2027-03-01"));
    assert_eq!((a.last.map(|(t, _)| t), a.next), (Some(day("2027-02-01")), None));
}

#[test]
fn dates_are_days_in_utc_or_times_with_their_offset() {
    assert_eq!(parse_instant("1970-01-02"), Some(86_400));
    assert_eq!(parse_instant("2027-01-10T09:00:00+01:00"), Some(day("2027-01-10") + 8 * 3600));
    assert_eq!(parse_instant("2027-01-10T08:00:00Z"), Some(day("2027-01-10") + 8 * 3600));
    for bad in ["2027-01-10T09:00:00", "01/02/2027", "2027-13-01", "1969-12-31", "", "tomorrow"] {
        assert_eq!(parse_instant(bad), None, "{bad}");
    }
    assert_eq!(allot_compiler::units::format_instant(day("2027-01-10")), "2027-01-10");
    assert_eq!(allot_compiler::units::format_instant(day("2027-01-10") + 90), "2027-01-10T00:01:30Z");
}
