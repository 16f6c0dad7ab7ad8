//! The verifier's arithmetic against references: Fair Tree against real `sshare` output
//! (docs in /work/shared/reference/slurm.md) and Slurm's own Fair Tree test (test24.4), the
//! classic factor and decay against Slurm's documented numbers, and the entitlement
//! water-filling against hand-checked cases and its invariants.

use allot_compiler::replay::entitlement::{
    Change, EntitlementError, Event, Hierarchy, Ledger, Node, NodeId, integrate,
};
use allot_compiler::replay::fair_tree::{
    Association, Column, FairTree, FairTreeError, Shares, classic_effective_usage, classic_fair_share_factor,
    decayed_usage, slurm_decay_factor, slurm_decay_multiplier,
};
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------
// Fair Tree: the real Slurm 22.05 runs of slurm.md
// ---------------------------------------------------------------------------------------

/// slurm-example.cfg, as `sacctmgr load` stored it, with each user's raw usage.
fn example_tree(alice_vision: f64, bob: f64, carol: f64, dave: f64) -> Vec<Association> {
    vec![
        Association::user("root", "root", Shares::Count(1)),
        Association::account("eng", "root", Shares::Count(60)),
        Association::account("research", "root", Shares::Count(40)),
        Association::account("ml", "eng", Shares::Count(70)),
        Association::account("infra", "eng", Shares::Count(30)),
        Association::account("vision", "ml", Shares::Count(50)),
        Association::account("nlp", "ml", Shares::Count(50)),
        Association::user("carol", "infra", Shares::Count(1)).with_usage(carol),
        Association::account("physics", "research", Shares::Count(100)),
        Association::user("alice", "vision", Shares::Count(1)).with_usage(alice_vision),
        Association::user("bob", "nlp", Shares::Count(1)).with_usage(bob),
        Association::user("dave", "physics", Shares::Count(1)).with_usage(dave),
        // The dump writes Fairshare=parent as 2147483647.
        Association::user("alice", "physics", Shares::from_raw(2_147_483_647)),
    ]
}

/// `sshare -a -l -o account,user,rawshares,normshares,rawusage,normusage,effectvusage,fairshare,levelfs`
/// after four 30 s jobs, HALFLIFE=0 (slurm.md, verbatim).
const AFTER_FOUR_JOBS: &str = "\
Account        User      RawShares  NormShares    RawUsage   NormUsage  EffectvUsage  FairShare    LevelFS
root                                  0.000000         990                  1.000000
 root          root              1    0.009901           0    0.000000      0.000000   1.000000        inf
 eng                            60    0.594059         840    0.848485      0.848485              0.700141
  infra                         30    0.300000          60    0.060606      0.071429              4.200000
   infra       carol             1    1.000000          60    0.060606      1.000000   0.500000   1.000000
  ml                            70    0.700000         780    0.787879      0.928571              0.753846
   nlp                          50    0.500000         270    0.272727      0.346154              1.444444
    nlp        bob               1    1.000000         270    0.272727      1.000000   0.333333   1.000000
   vision                       50    0.500000         510    0.515152      0.653846              0.764706
    vision     alice             1    1.000000         510    0.515152      1.000000   0.166667   1.000000
 research                       40    0.396040         150    0.151515      0.151515              2.613861
  physics                      100    1.000000         150    0.151515      1.000000              1.000000
   physics     alice        parent    1.000000           0    0.000000      0.000000   0.833333
   physics     dave              1    1.000000         150    0.151515      1.000000   0.666667   1.000000
";

/// The same right after bring-up, without usage (slurm.md shows these lines of it).
const WITHOUT_USAGE: &str = "\
root                                  0.000000           0                  1.000000
 root          root              1    0.009901           0    0.000000      0.000000   1.000000        inf
 eng                            60    0.594059           0    0.000000      0.000000                   inf
  infra                         30    0.300000           0    0.000000      0.000000                   inf
   infra       carol             1    1.000000           0    0.000000      0.000000   1.000000        inf
   physics     alice        parent    1.000000           0    0.000000      0.000000   1.000000
";

/// Checks a fixed-width `sshare` line against one of ours (the [`Column::LONG`] columns):
/// the same indentation and the same fields where `sshare` printed any.
fn assert_line_matches(sshare_line: &str, parsable_row: &str) {
    let indentation = |s: &str| s.len() - s.trim_start().len();
    assert_eq!(indentation(sshare_line), indentation(parsable_row), "{sshare_line:?} vs {parsable_row:?}");
    let printed: Vec<&str> = sshare_line.split_whitespace().collect();
    let ours: Vec<&str> = parsable_row.split('|').map(str::trim).filter(|f| !f.is_empty()).collect();
    assert_eq!(ours, printed, "{parsable_row:?}");
}

#[test]
fn four_jobs_reproduce_the_real_sshare_table() {
    let tree = FairTree::compute(&example_tree(510.0, 270.0, 60.0, 150.0)).unwrap();
    let parsable = tree.to_parsable(&Column::LONG);
    let ours: Vec<&str> = parsable.lines().collect();
    let theirs: Vec<&str> = AFTER_FOUR_JOBS.lines().collect();
    assert_eq!(ours.len(), theirs.len());
    assert_eq!(ours[0].split('|').collect::<Vec<_>>(), theirs[0].split_whitespace().collect::<Vec<_>>());
    for (line, row) in theirs.iter().zip(&ours).skip(1) {
        assert_line_matches(line, row);
    }
    assert_eq!(tree.user_count(), 6);
}

#[test]
fn four_jobs_as_sshare_parsable() {
    let tree = FairTree::compute(&example_tree(510.0, 270.0, 60.0, 150.0)).unwrap();
    let expected = "\
Account|User|RawShares|NormShares|RawUsage|EffectvUsage|FairShare|LevelFS
root|||0.000000|990|1.000000||
 root|root|1|0.009901|0|0.000000|1.000000|inf
 eng||60|0.594059|840|0.848485||0.700141
  infra||30|0.300000|60|0.071429||4.200000
   infra|carol|1|1.000000|60|1.000000|0.500000|1.000000
  ml||70|0.700000|780|0.928571||0.753846
   nlp||50|0.500000|270|0.346154||1.444444
    nlp|bob|1|1.000000|270|1.000000|0.333333|1.000000
   vision||50|0.500000|510|0.653846||0.764706
    vision|alice|1|1.000000|510|1.000000|0.166667|1.000000
 research||40|0.396040|150|0.151515||2.613861
  physics||100|1.000000|150|1.000000||1.000000
   physics|alice|parent|1.000000|0|0.000000|0.833333|
   physics|dave|1|1.000000|150|1.000000|0.666667|1.000000
";
    assert_eq!(tree.to_sshare_parsable(), expected);
}

#[test]
fn without_usage_every_user_ties_at_the_top() {
    let tree = FairTree::compute(&example_tree(0.0, 0.0, 0.0, 0.0)).unwrap();
    let parsable = tree.to_parsable(&Column::LONG);
    let rows: Vec<&str> = parsable.lines().skip(1).collect();
    let shown: Vec<&str> = WITHOUT_USAGE.lines().collect();
    // slurm.md shows the first five lines and the last one.
    for (line, row) in shown.iter().take(5).zip(&rows) {
        assert_line_matches(line, row);
    }
    assert_line_matches(shown[5], rows[rows.len() - 2]);
    assert!(tree.rows().iter().filter_map(|r| r.fair_share).all(|f| f == 1.0));
}

#[test]
fn sprio_order_of_the_four_jobs() {
    // slurm.md's sprio: FAIRSHARE 16667 alice@vision, 33333 bob, 50000 carol, 66667 dave,
    // 83333 alice@physics (PriorityWeightFairshare=100000).
    let tree = FairTree::compute(&example_tree(510.0, 270.0, 60.0, 150.0)).unwrap();
    let fairshare = |account: &str, user: &str| {
        (tree.row(account, Some(user)).unwrap().fair_share.unwrap() * 100_000.0).round() as u32
    };
    assert_eq!(fairshare("vision", "alice"), 16_667);
    assert_eq!(fairshare("nlp", "bob"), 33_333);
    assert_eq!(fairshare("infra", "carol"), 50_000);
    assert_eq!(fairshare("physics", "dave"), 66_667);
    assert_eq!(fairshare("physics", "alice"), 83_333);
}

// ---------------------------------------------------------------------------------------
// Fair Tree: Slurm's own check, testsuite/expect/test24.4 (Fairshare=parent and ties)
// ---------------------------------------------------------------------------------------

/// test24.4.prog.c's tree. Slurm resets the accounts' own usage when it links the tree
/// (`assoc_mgr_update_assocs`), so only the users' usage is given here.
fn test24_4_tree() -> Vec<Association> {
    let count = Shares::Count;
    vec![
        Association::account("aA", "root", count(40)),
        Association::account("aAA", "aA", count(30)),
        Association::user("uAA1", "aAA", count(1)).with_usage(20.0),
        Association::account("aAB", "aA", count(10)),
        Association::user("uAB1", "aAB", count(1)).with_usage(25.0),
        Association::user("uAB2", "aAB", count(1)),
        Association::account("aB", "root", count(60)),
        Association::account("aBA", "aB", count(25)),
        Association::user("uBA1", "aBA", count(1)).with_usage(25.0),
        Association::account("aBB", "aB", count(35)),
        Association::user("uBB1", "aBB", count(1)),
        Association::account("aC", "root", count(0)),
        Association::user("uC1", "aC", count(0)).with_usage(30.0),
        Association::account("aD", "root", count(50)),
        Association::account("aDA", "aD", Shares::Parent),
        Association::user("uDA1", "aDA", Shares::Parent).with_usage(10.0),
        Association::user("uDA2", "aDA", count(30)).with_usage(10.0),
        Association::user("uDA3", "aDA", count(50)).with_usage(25.0),
        Association::user("uD1", "aD", Shares::Parent).with_usage(20.0),
        Association::user("uD2", "aD", count(40)).with_usage(20.0),
        Association::user("uD3", "aD", count(50)).with_usage(25.0),
        Association::account("aE", "root", count(10)),
        Association::user("aE1", "aE", count(10)),
        Association::user("aE2", "aE", count(10)),
        Association::user("u1", "root", count(10)),
        Association::account("aF", "root", count(20)),
        Association::user("uF1", "aF", count(10)),
        Association::user("uF2", "aF", count(20)),
        Association::account("aG", "root", count(8)),
        Association::user("uG1", "aG", count(10)).with_usage(10.0),
        Association::account("aGA", "aG", count(10)),
        Association::user("uGA1", "aGA", count(20)).with_usage(4.0),
        Association::user("uGA2", "aGA", count(20)).with_usage(6.0),
        Association::user("u2", "root", count(10)).with_usage(10.0),
    ]
}

/// test24.4's 35 expected lines, without their GrpTRESMins and TRESRunMins fields.
const TEST24_4: &str = "\
root|||0.000000|240||1.000000||
root|u1|10|0.048077|0|0.000000|0.000000|1.000000|inf
root|u2|10|0.048077|10|0.041667|0.041667|0.666667|1.153846
aA||40|0.192308|45|0.187500|0.187500||1.025641
aAA||30|0.750000|20|0.083333|0.444444||1.687500
aAA|uAA1|1|1.000000|20|0.083333|1.000000|0.619048|1.000000
aAB||10|0.250000|25|0.104167|0.555556||0.450000
aAB|uAB1|1|0.500000|25|0.104167|1.000000|0.523810|0.500000
aAB|uAB2|1|0.500000|0|0.000000|0.000000|0.571429|inf
aB||60|0.288462|25|0.104167|0.104167||2.769231
aBA||25|0.416667|25|0.104167|1.000000||0.416667
aBA|uBA1|1|1.000000|25|0.104167|1.000000|0.714286|1.000000
aBB||35|0.583333|0|0.000000|0.000000||inf
aBB|uBB1|1|1.000000|0|0.000000|0.000000|0.761905|inf
aC||0|0.000000|30|0.125000|0.125000||0.000000
aC|uC1|0|0.000000|30|0.125000|1.000000|0.047619|0.000000
aD||50|0.240385|110|0.458333|0.458333||0.524476
aD|uD1|parent|0.240385|20|0.083333|0.181818|0.476190|
aD|uD2|40|0.235294|20|0.083333|0.181818|0.238095|1.294118
aD|uD3|50|0.294118|25|0.104167|0.227273|0.333333|1.294118
aDA||parent|0.240385|45|0.187500|0.409091||
aDA|uDA1|parent|0.240385|10|0.041667|0.090909|0.476190|
aDA|uDA2|30|0.176471|10|0.041667|0.090909|0.380952|1.941176
aDA|uDA3|50|0.294118|25|0.104167|0.227273|0.333333|1.294118
aE||10|0.048077|0|0.000000|0.000000||inf
aE|aE1|10|0.500000|0|0.000000|0.000000|1.000000|inf
aE|aE2|10|0.500000|0|0.000000|0.000000|1.000000|inf
aF||20|0.096154|0|0.000000|0.000000||inf
aF|uF1|10|0.333333|0|0.000000|0.000000|1.000000|inf
aF|uF2|20|0.666667|0|0.000000|0.000000|1.000000|inf
aG||8|0.038462|20|0.083333|0.083333||0.461538
aG|uG1|10|0.500000|10|0.041667|0.500000|0.190476|1.000000
aGA||10|0.500000|10|0.041667|0.500000||1.000000
aGA|uGA1|20|0.500000|4|0.016667|0.400000|0.190476|1.250000
aGA|uGA2|20|0.500000|6|0.025000|0.600000|0.095238|0.833333
";

#[test]
fn slurms_own_fair_tree_test_24_4() {
    let tree = FairTree::compute(&test24_4_tree()).unwrap();
    assert_eq!(tree.user_count(), 21);
    // test24.4 matches each line anywhere in the output (indentation aside); Slurm stores
    // the names lower case, the test's program injects them as written.
    let ours: Vec<String> =
        tree.to_parsable(&Column::LONG).lines().skip(1).map(|l| l.trim_start().to_owned()).collect();
    for expected in TEST24_4.lines() {
        assert!(ours.contains(&expected.to_lowercase()), "missing {expected}\nours:\n{}", ours.join("\n"));
    }
    assert_eq!(ours.len(), TEST24_4.lines().count());
}

// ---------------------------------------------------------------------------------------
// Fair Tree: x87 arithmetic, edge cases, errors
// ---------------------------------------------------------------------------------------

/// Three users of one account; LF(a) and LF(b) are mathematically equal.
fn three_users(a: (u32, f64), b: (u32, f64), c: (u32, f64)) -> FairTree {
    let user =
        |name, (shares, usage)| Association::user(name, "acct", Shares::Count(shares)).with_usage(usage);
    let associations = vec![
        Association::account("acct", "root", Shares::Count(1)),
        user("a", a),
        user("b", b),
        user("c", c),
    ];
    FairTree::compute(&associations).unwrap()
}

#[test]
fn equal_level_fs_splits_as_slurms_long_double_does() {
    // LF(a) = (1/5)/(1/7), LF(b) = (3/5)/(3/7): equal in f64, apart in x87 long double,
    // where a ranks above b.
    let tree = three_users((1, 1.0), (3, 3.0), (1, 3.0));
    let rank = |user| tree.row("acct", Some(user)).unwrap().rank.unwrap();
    assert_eq!((rank("a"), rank("b"), rank("c")), (3, 2, 1));
}

#[test]
fn equal_level_fs_ties_as_slurms_long_double_does() {
    // LF(a) = (1/4)/(5/23), LF(b) = (3/4)/(15/23): apart in f64, equal in long double,
    // so a and b share the top rank; c has no shares (LF 0).
    let tree = three_users((1, 5.0), (3, 15.0), (0, 3.0));
    let rank = |user| tree.row("acct", Some(user)).unwrap().rank.unwrap();
    assert_eq!((rank("a"), rank("b"), rank("c")), (3, 3, 1));
}

#[test]
fn an_account_keeps_its_own_usage_and_rolls_it_up() {
    let mut associations = example_tree(510.0, 270.0, 60.0, 150.0);
    associations[3] = Association::account("ml", "eng", Shares::Count(70)).with_usage(100.0);
    let tree = FairTree::compute(&associations).unwrap();
    let raw = |account| tree.row(account, None).unwrap().raw_usage;
    assert_eq!((raw("ml"), raw("eng"), raw("root")), (880.0, 940.0, 1090.0));
}

#[test]
fn names_are_stored_lower_case() {
    let associations = vec![
        Association::account("BigTeam", "ROOT", Shares::Count(3)),
        Association::user("Alice", "bigteam", Shares::Count(1)).with_usage(5.0),
    ];
    let tree = FairTree::compute(&associations).unwrap();
    assert_eq!(tree.rows()[2].account, "bigteam");
    assert_eq!(tree.rows()[2].user.as_deref(), Some("alice"));
    assert!(tree.row("BIGTEAM", Some("ALICE")).is_some());
}

#[test]
fn impossible_trees_are_refused() {
    let compute = |associations: Vec<Association>| FairTree::compute(&associations).unwrap_err();
    assert_eq!(
        compute(vec![Association::user("a", "nowhere", Shares::Count(1))]),
        FairTreeError::UnknownParent { name: "a".into(), parent: "nowhere".into() }
    );
    assert_eq!(
        compute(vec![Association::account("x", "root", Shares::Count(1)); 2]),
        FairTreeError::DuplicateAccount("x".into())
    );
    assert_eq!(
        compute(vec![Association::user("a", "root", Shares::Count(1)); 2]),
        FairTreeError::DuplicateUser { user: "a".into(), account: "root".into() }
    );
    assert_eq!(
        compute(vec![Association::account("root", "root", Shares::Count(1))]),
        FairTreeError::RootRedefined
    );
    assert_eq!(
        compute(vec![
            Association::account("x", "y", Shares::Count(1)),
            Association::account("y", "x", Shares::Count(1)),
        ]),
        FairTreeError::NotUnderRoot("x".into())
    );
    assert!(matches!(
        compute(vec![Association::user("a", "root", Shares::Count(1)).with_usage(f64::NAN)]),
        FairTreeError::InvalidUsage { .. }
    ));
}

#[test]
fn an_empty_tree_is_root_alone() {
    let tree = FairTree::compute(&[]).unwrap();
    assert_eq!(
        tree.to_sshare_parsable(),
        "Account|User|RawShares|NormShares|RawUsage|EffectvUsage|FairShare|LevelFS\nroot|||0.000000|0|1.000000||\n"
    );
}

/// Random trees: accounts below root or earlier accounts, users below any account, shares
/// 0-4 (users sometimes `parent`), usage zero, whole or fractional.
fn random_tree(with_parent_accounts: bool) -> impl Strategy<Value = Vec<Association>> {
    let usage = prop_oneof![Just(0.0), (0u32..60).prop_map(f64::from), 0.0..1000.0f64];
    let shares = prop_oneof![4 => (0u32..5).prop_map(Shares::Count), 1 => Just(Shares::Parent)];
    let accounts = prop::collection::vec((any::<usize>(), shares.clone(), usage.clone()), 0..7);
    let users = prop::collection::vec((any::<usize>(), shares, usage), 1..12);
    (accounts, users).prop_map(move |(accounts, users)| {
        let account_name = |seed: usize, count: usize| match seed % (count + 1) {
            0 => "root".to_owned(),
            k => format!("a{}", k - 1),
        };
        let mut associations = Vec::new();
        for (i, (seed, shares, usage)) in accounts.iter().enumerate() {
            let shares = if with_parent_accounts || !shares.is_parent() { *shares } else { Shares::Count(1) };
            let parent = account_name(*seed, i);
            associations.push(Association::account(&format!("a{i}"), &parent, shares).with_usage(*usage));
        }
        for (j, (seed, shares, usage)) in users.iter().enumerate() {
            let account = account_name(*seed, accounts.len());
            associations.push(Association::user(&format!("u{j}"), &account, *shares).with_usage(*usage));
        }
        associations
    })
}

/// The FairShare values of the users in the subtree of sshare row `index`.
fn subtree_fair_shares(tree: &FairTree, index: usize) -> Vec<f64> {
    let rows = tree.rows();
    let depth = rows[index].depth;
    let end = rows[index + 1..].iter().position(|r| r.depth <= depth).map_or(rows.len(), |p| index + 1 + p);
    rows[index..end].iter().filter_map(|r| r.fair_share).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn fair_share_is_a_rank_in_0_1(associations in random_tree(true)) {
        let tree = FairTree::compute(&associations).unwrap();
        let users = tree.user_count();
        prop_assert_eq!(tree.rows().len(), associations.len() + 1);
        for row in tree.rows() {
            prop_assert_eq!(row.fair_share.is_some(), row.user.is_some());
            if let (Some(fair_share), Some(rank)) = (row.fair_share, row.rank) {
                prop_assert!(fair_share > 0.0 && fair_share <= 1.0, "{row:?}");
                prop_assert!((1..=users).contains(&rank));
                prop_assert_eq!(fair_share, f64::from(rank) / f64::from(users));
            }
        }
        let highest = tree.rows().iter().filter_map(|r| r.fair_share).fold(0.0, f64::max);
        prop_assert_eq!(highest, 1.0);
    }

    #[test]
    fn level_fs_orders_siblings_subtrees(associations in random_tree(false)) {
        let tree = FairTree::compute(&associations).unwrap();
        let rows = tree.rows();
        // Without `parent` accounts, the Fair Tree levels are the sshare levels. A `parent`
        // user ranks as if its Level FS were infinite.
        let level_fs = |i: usize| rows[i].level_fs.unwrap_or(f64::INFINITY);
        let parent_of = |i: usize| (0..i).rev().find(|&p| rows[p].depth < rows[i].depth && rows[p].user.is_none());
        for x in 1..rows.len() {
            for y in 1..rows.len() {
                if parent_of(x) != parent_of(y) || level_fs(x) <= level_fs(y) {
                    continue;
                }
                let higher = subtree_fair_shares(&tree, x);
                let lower = subtree_fair_shares(&tree, y);
                if let (Some(min), Some(max)) = (higher.iter().copied().reduce(f64::min), lower.iter().copied().reduce(f64::max)) {
                    prop_assert!(min >= max, "{:?} above {:?}", rows[x], rows[y]);
                }
            }
        }
    }

    #[test]
    fn level_fs_is_norm_shares_over_effective_usage(associations in random_tree(true)) {
        let tree = FairTree::compute(&associations).unwrap();
        for row in tree.rows() {
            let Some(level_fs) = row.level_fs else { continue };
            if row.norm_shares == 0.0 {
                prop_assert_eq!(level_fs, 0.0);
            } else if row.effective_usage == 0.0 {
                prop_assert_eq!(level_fs, f64::INFINITY);
            } else {
                let quotient = row.norm_shares / row.effective_usage;
                prop_assert!((level_fs - quotient).abs() <= 1e-12 * quotient, "{row:?}");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Classic fair share and decay: fair-share.md sections 2.2 and 2.3
// ---------------------------------------------------------------------------------------

#[test]
fn classic_worked_example_of_the_docs_and_test24_1() {
    // A 40 (B 30: User1; C 10: User2, User3), D 60 (E 25: User4; F 35: User5), G 0;
    // usage User1 20, User2 25, User4 25, G 30 of 100. Normalised shares multiply the
    // levels' ratios; effective usage: actual + (parent's - actual) * shares / siblings'.
    let a = (0.4, 0.45, 0.45);
    let b = (a.0 * 30.0 / 40.0, 0.2, classic_effective_usage(0.2, a.2, 30.0, 40.0));
    let user1 = (b.0, 0.2, classic_effective_usage(0.2, b.2, 1.0, 1.0));
    let c = (a.0 * 10.0 / 40.0, 0.25, classic_effective_usage(0.25, a.2, 10.0, 40.0));
    let user2 = (c.0 / 2.0, 0.25, classic_effective_usage(0.25, c.2, 1.0, 2.0));
    let user3 = (c.0 / 2.0, 0.0, classic_effective_usage(0.0, c.2, 1.0, 2.0));
    let d = (0.6, 0.25, 0.25);
    let e = (d.0 * 25.0 / 60.0, 0.25, classic_effective_usage(0.25, d.2, 25.0, 60.0));
    let user4 = (e.0, 0.25, classic_effective_usage(0.25, e.2, 1.0, 1.0));
    let f = (d.0 * 35.0 / 60.0, 0.0, classic_effective_usage(0.0, d.2, 35.0, 60.0));
    let user5 = (f.0, 0.0, classic_effective_usage(0.0, f.2, 1.0, 1.0));
    let g = (0.0, 0.3, 0.3);
    let table = [
        (a, "0.400000 0.450000 0.450000 0.458502"),
        (b, "0.300000 0.200000 0.387500 0.408479"),
        (user1, "0.300000 0.200000 0.387500 0.408479"),
        (c, "0.100000 0.250000 0.300000 0.125000"),
        (user2, "0.050000 0.250000 0.275000 0.022097"),
        (user3, "0.050000 0.000000 0.150000 0.125000"),
        (d, "0.600000 0.250000 0.250000 0.749154"),
        (e, "0.250000 0.250000 0.250000 0.500000"),
        (user4, "0.250000 0.250000 0.250000 0.500000"),
        (f, "0.350000 0.000000 0.145833 0.749154"),
        (user5, "0.350000 0.000000 0.145833 0.749154"),
        (g, "0.000000 0.300000 0.300000 0.000000"),
    ];
    for ((norm_shares, norm_usage, effective_usage), expected) in table {
        let factor = classic_fair_share_factor(effective_usage, norm_shares);
        let shown = format!("{norm_shares:.6} {norm_usage:.6} {effective_usage:.6} {factor:.6}");
        assert_eq!(shown, expected);
    }
}

#[test]
fn decay_numbers_of_a_seven_day_half_life() {
    let week = 604_800.0;
    assert_eq!(slurm_decay_factor(week), 0.999_998_854_166_666_7);
    assert_eq!(slurm_decay_multiplier(300.0, week), 0.999_656_308_878_391_4);
    assert_eq!(decayed_usage(1.0, 300.0, week), 0.999_656_236_094_126_1);
    assert_eq!(slurm_decay_multiplier(week, week), 0.500_073_397_152_737_6);
    assert_eq!(slurm_decay_multiplier(2.0 * week, week), 0.250_073_402_539_879_6);
    assert_eq!(decayed_usage(414.0, week, week), 207.0);
    assert_eq!(decayed_usage(414.0, week, 0.0), 414.0);
    assert_eq!(slurm_decay_multiplier(1e12, week), f64::MIN_POSITIVE);
}

// ---------------------------------------------------------------------------------------
// Entitlement: hand-checked cases
// ---------------------------------------------------------------------------------------

fn allocate(nodes: Vec<Node>, capacity: f64, demand: &[f64]) -> Vec<f64> {
    Hierarchy::new(nodes).unwrap().allocate(capacity, demand).unwrap().allocations().to_vec()
}

fn assert_close(actual: &[f64], expected: &[f64]) {
    assert_eq!(actual.len(), expected.len());
    for (a, e) in actual.iter().zip(expected) {
        assert!((a - e).abs() <= 1e-9 * e.abs().max(1.0), "{actual:?} vs {expected:?}");
    }
}

#[test]
fn a_small_demand_is_met_and_the_rest_shared_by_weight() {
    // 100 GPUs; A (0.5) wants 80, B (0.3) 10, C (0.2) 50. By demand/weight: B 33, A 160,
    // C 250. B's fair share 100 * 0.3 = 30 covers its 10; the other 90 go to A and C by
    // 0.5 : 0.2, i.e. 64.29 and 25.71, both below their demands.
    let nodes = vec![Node::new("a", None, 0.5), Node::new("b", None, 0.3), Node::new("c", None, 0.2)];
    assert_close(&allocate(nodes, 100.0, &[80.0, 10.0, 50.0]), &[90.0 * 5.0 / 7.0, 10.0, 90.0 * 2.0 / 7.0]);
}

#[test]
fn caps_and_subtrees() {
    // 64 GPUs; X (weight 3, cap 40) with X1 and X2 (weight 1 each, 30 each); Y (weight 1) 64.
    // X can use min(60, 40) = 40; its fair share 64 * 3/4 = 48 covers it; Y gets 24.
    // X's 40 go to X1 and X2 equally: 20 each.
    let x = NodeId(0);
    let nodes = vec![
        Node::new("x", None, 3.0).with_cap(40.0),
        Node::new("x1", Some(x), 1.0),
        Node::new("x2", Some(x), 1.0),
        Node::new("y", None, 1.0),
    ];
    let hierarchy = Hierarchy::new(nodes).unwrap();
    let entitlement = hierarchy.allocate(64.0, &[0.0, 30.0, 30.0, 64.0]).unwrap();
    assert_eq!(entitlement.allocations(), &[40.0, 20.0, 20.0, 24.0]);
    assert_eq!(entitlement.capped_demand(x), 40.0);
    assert_eq!(entitlement.unallocated(), 0.0);
}

#[test]
fn without_enough_demand_gpus_stay_unallocated() {
    // 10 GPUs, demands 3 and 4: both met, 3 left over.
    let nodes = vec![Node::new("a", None, 1.0), Node::new("b", None, 9.0)];
    let entitlement = Hierarchy::new(nodes).unwrap().allocate(10.0, &[3.0, 4.0]).unwrap();
    assert_eq!(entitlement.allocations(), &[3.0, 4.0]);
    assert_eq!(entitlement.unallocated(), 3.0);
}

#[test]
fn a_budget_without_demand_neither_gets_nor_dilutes() {
    // 12 GPUs; A (1) and C (2) want 100, B (1) nothing: A 4, C 8.
    let nodes = vec![Node::new("a", None, 1.0), Node::new("b", None, 1.0), Node::new("c", None, 2.0)];
    assert_eq!(allocate(nodes, 12.0, &[100.0, 0.0, 100.0]), vec![4.0, 0.0, 8.0]);
}

#[test]
fn a_capped_parent_passes_its_surplus_up_to_its_siblings() {
    // 30 GPUs; P (1, cap 5) with leaf L wanting 100; Q (1) wanting 100: P 5, L 5, Q 25.
    let p = NodeId(0);
    let nodes = vec![
        Node::new("p", None, 1.0).with_cap(5.0),
        Node::new("l", Some(p), 1.0),
        Node::new("q", None, 1.0),
    ];
    assert_eq!(allocate(nodes, 30.0, &[0.0, 100.0, 100.0]), vec![5.0, 5.0, 25.0]);
}

#[test]
fn bad_trees_and_demands_are_refused() {
    let err = |nodes: Vec<Node>| Hierarchy::new(nodes).unwrap_err();
    assert!(matches!(err(vec![Node::new("a", None, 0.0)]), EntitlementError::InvalidWeight { .. }));
    assert!(matches!(
        err(vec![Node::new("a", None, 1.0).with_cap(-1.0)]),
        EntitlementError::InvalidCap { .. }
    ));
    assert!(matches!(
        err(vec![Node::new("a", Some(NodeId(5)), 1.0)]),
        EntitlementError::UnknownParent { .. }
    ));
    assert_eq!(
        err(vec![Node::new("a", Some(NodeId(1)), 1.0), Node::new("b", Some(NodeId(0)), 1.0)]),
        EntitlementError::NotUnderRoot("a".into())
    );
    let hierarchy =
        Hierarchy::new(vec![Node::new("p", None, 1.0), Node::new("l", Some(NodeId(0)), 1.0)]).unwrap();
    assert_eq!(hierarchy.allocate(8.0, &[1.0, 0.0]).unwrap_err(), EntitlementError::NotALeaf("p".into()));
    assert!(matches!(hierarchy.allocate(8.0, &[0.0, -1.0]), Err(EntitlementError::InvalidDemand { .. })));
    assert!(matches!(hierarchy.allocate(8.0, &[0.0]), Err(EntitlementError::DemandCount { .. })));
    assert!(matches!(hierarchy.allocate(f64::NAN, &[0.0, 0.0]), Err(EntitlementError::InvalidCapacity(_))));
}

// ---------------------------------------------------------------------------------------
// Entitlement over time
// ---------------------------------------------------------------------------------------

#[test]
fn entitled_and_delivered_gpu_hours_between_events() {
    // 8 GPUs, A and B weighted equally. A wants and uses 8 from 0 h to 3 h; B wants 8 from
    // 1 h and uses 4 from 2 h. Allocations: 0-1 h A 8; 1-3 h A 4, B 4; 3-4 h B 8.
    // Entitled: A 8 + 4 + 4 = 16, B 4 + 4 + 8 = 16. Delivered (min(use, allocation)):
    // A 8 + 4 + 4 = 16, B 0 + 4 + 4 = 8.
    let (a, b) = (NodeId(0), NodeId(1));
    let hierarchy = Hierarchy::new(vec![Node::new("a", None, 1.0), Node::new("b", None, 1.0)]).unwrap();
    let hour = 3600.0;
    let at = |hours: f64, change| Event { at: hours * hour, change };
    let events = [
        at(0.0, Change::Demand { node: a, gpus: 8.0 }),
        at(0.0, Change::Use { node: a, gpus: 8.0 }),
        at(1.0, Change::Demand { node: b, gpus: 8.0 }),
        at(2.0, Change::Use { node: b, gpus: 4.0 }),
        at(3.0, Change::Demand { node: a, gpus: -8.0 }),
        at(3.0, Change::Use { node: a, gpus: -8.0 }),
    ];
    let ledger = integrate(&hierarchy, 8.0, &events, 4.0 * hour).unwrap();
    assert_eq!((ledger.entitled_gpu_hours(a), ledger.entitled_gpu_hours(b)), (16.0, 16.0));
    assert_eq!((ledger.delivered_gpu_hours(a), ledger.delivered_gpu_hours(b)), (16.0, 8.0));
}

#[test]
fn an_inner_budget_is_delivered_its_subtrees_use() {
    // 4 GPUs for P (leaves L1, L2) alone. L1 wants 4 and uses 1, L2 wants nothing and uses
    // 3 (borrowed): P is entitled 4 and used 4; L1 is entitled 4, delivered 1; L2 0.
    let p = NodeId(0);
    let hierarchy = Hierarchy::new(vec![
        Node::new("p", None, 1.0),
        Node::new("l1", Some(p), 1.0),
        Node::new("l2", Some(p), 1.0),
    ])
    .unwrap();
    let mut ledger = Ledger::new(&hierarchy, 4.0).unwrap();
    ledger.apply(&Event { at: 0.0, change: Change::Demand { node: NodeId(1), gpus: 4.0 } }).unwrap();
    ledger.apply(&Event { at: 0.0, change: Change::Use { node: NodeId(1), gpus: 1.0 } }).unwrap();
    ledger.apply(&Event { at: 0.0, change: Change::Use { node: NodeId(2), gpus: 3.0 } }).unwrap();
    ledger.advance_to(3600.0).unwrap();
    assert_eq!((ledger.entitled_gpu_hours(p), ledger.delivered_gpu_hours(p)), (4.0, 4.0));
    assert_eq!((ledger.entitled_gpu_hours(NodeId(1)), ledger.delivered_gpu_hours(NodeId(1))), (4.0, 1.0));
    assert_eq!((ledger.entitled_gpu_hours(NodeId(2)), ledger.delivered_gpu_hours(NodeId(2))), (0.0, 0.0));
    assert_eq!(ledger.advance_to(10.0).unwrap_err(), EntitlementError::OutOfOrder { at: 10.0, now: 3600.0 });
}

#[test]
fn capacity_changes_and_bad_events() {
    let hierarchy = Hierarchy::new(vec![Node::new("a", None, 1.0)]).unwrap();
    let a = NodeId(0);
    let events = [
        Event { at: 0.0, change: Change::Demand { node: a, gpus: 10.0 } },
        Event { at: 1800.0, change: Change::Capacity { gpus: 2.0 } },
    ];
    // Half an hour at 8 GPUs, then an hour at 2.
    let ledger = integrate(&hierarchy, 8.0, &events, 5400.0).unwrap();
    assert_eq!(ledger.entitled_gpu_hours(a), 6.0);
    let mut ledger = Ledger::new(&hierarchy, 8.0).unwrap();
    let below_zero = Event { at: 0.0, change: Change::Demand { node: a, gpus: -1.0 } };
    assert!(matches!(ledger.apply(&below_zero), Err(EntitlementError::InvalidDemand { .. })));
    let unknown = Event { at: 0.0, change: Change::Use { node: NodeId(7), gpus: 1.0 } };
    assert_eq!(ledger.apply(&unknown).unwrap_err(), EntitlementError::UnknownNode(7));
    assert!(matches!(ledger.advance_to(f64::NAN), Err(EntitlementError::InvalidTime(_))));
}

// ---------------------------------------------------------------------------------------
// Entitlement: invariants
// ---------------------------------------------------------------------------------------

/// A random tree (each node below an earlier one or at the top), weights, caps, the leaves'
/// demands and a capacity.
fn random_division() -> impl Strategy<Value = (Vec<Node>, Vec<f64>, f64)> {
    let node = (
        any::<usize>(),
        0.1..10.0f64,
        prop::option::weighted(0.3, 0.0..60.0f64),
        0.0..50.0f64,
        any::<bool>(),
    );
    (prop::collection::vec(node, 1..14), 0.0..300.0f64).prop_map(|(specs, capacity)| {
        let mut nodes = Vec::new();
        for (i, (seed, weight, cap, _, _)) in specs.iter().enumerate() {
            let parent = (i > 0 && seed % 3 != 0).then(|| NodeId(seed % i));
            let mut node = Node::new(&format!("n{i}"), parent, *weight);
            node.cap = *cap;
            nodes.push(node);
        }
        let has_children: Vec<bool> =
            (0..nodes.len()).map(|i| nodes.iter().any(|n| n.parent == Some(NodeId(i)))).collect();
        let demand = specs
            .iter()
            .zip(&has_children)
            .map(|((_, _, _, gpus, wants), &inner)| if inner || !wants { 0.0 } else { *gpus })
            .collect();
        (nodes, demand, capacity)
    })
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn divisions_respect_demand_caps_capacity_and_parents((nodes, demand, capacity) in random_division()) {
        let hierarchy = Hierarchy::new(nodes.clone()).unwrap();
        let entitlement = hierarchy.allocate(capacity, &demand).unwrap();
        let allocation = entitlement.allocations();
        for (i, node) in nodes.iter().enumerate() {
            let id = NodeId(i);
            prop_assert!(allocation[i] >= 0.0);
            prop_assert!(allocation[i] <= entitlement.capped_demand(id));
            prop_assert!(allocation[i] <= node.cap.unwrap_or(f64::INFINITY));
            if hierarchy.is_leaf(id) {
                prop_assert!(allocation[i] <= demand[i]);
            } else {
                let children: f64 = hierarchy.children(id).iter().map(|c| allocation[c.0]).sum();
                prop_assert!(close(children, allocation[i]), "children {children} vs {}", allocation[i]);
            }
        }
        let total_demand: f64 = hierarchy.roots().iter().map(|&r| entitlement.capped_demand(r)).sum();
        let allocated: f64 = hierarchy.roots().iter().map(|r| allocation[r.0]).sum();
        prop_assert!(close(allocated, capacity.min(total_demand)), "{allocated} vs {capacity} / {total_demand}");
        prop_assert!(close(entitlement.unallocated(), capacity - allocated));
    }

    #[test]
    fn divisions_are_max_min_fair((nodes, demand, capacity) in random_division()) {
        // Among siblings, one that gets less than it can use is not behind any other in
        // allocation per weight.
        let hierarchy = Hierarchy::new(nodes.clone()).unwrap();
        let entitlement = hierarchy.allocate(capacity, &demand).unwrap();
        let per_weight = |id: NodeId| entitlement.allocation(id) / nodes[id.0].weight;
        let mut levels: Vec<Vec<NodeId>> = vec![hierarchy.roots().to_vec()];
        levels.extend((0..nodes.len()).map(|i| hierarchy.children(NodeId(i)).to_vec()));
        for siblings in levels {
            for &short in siblings.iter().filter(|&&s| !close(entitlement.allocation(s), entitlement.capped_demand(s))) {
                for &other in &siblings {
                    prop_assert!(per_weight(short) >= per_weight(other) - 1e-9 * capacity.max(1.0));
                }
            }
        }
    }

    #[test]
    fn a_heavier_leaf_never_gets_less((nodes, demand, capacity) in random_division(), pick in any::<usize>(), factor in 1.0..10.0f64) {
        let hierarchy = Hierarchy::new(nodes.clone()).unwrap();
        let leaves: Vec<usize> = (0..nodes.len()).filter(|&i| hierarchy.is_leaf(NodeId(i))).collect();
        let leaf = leaves[pick % leaves.len()];
        let before = hierarchy.allocate(capacity, &demand).unwrap().allocation(NodeId(leaf));
        let mut heavier = nodes;
        heavier[leaf].weight *= factor;
        let after = Hierarchy::new(heavier).unwrap().allocate(capacity, &demand).unwrap().allocation(NodeId(leaf));
        prop_assert!(after >= before - 1e-9 * capacity.max(1.0), "{before} -> {after}");
    }
}
