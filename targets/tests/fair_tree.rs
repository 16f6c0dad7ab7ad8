//! Slurm's Fair Tree arithmetic against references: real `sshare` output (the Slurm
//! reference of the project's shared design notes) and Slurm's own Fair Tree test
//! (test24.4), and the classic factor and decay against Slurm's documented numbers.

use allot_targets::slurm::fair_tree::{
    Association, Column, FairTree, FairTreeError, Shares, SiblingOrder, classic_effective_usage,
    classic_fair_share_factor, decayed_usage, slurm_decay_factor, slurm_decay_multiplier,
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
fn tied_accounts_are_visited_in_the_order_of_the_slurm_version() {
    // `a` and `a-b` have equal shares and equal usage (30 each): tied Level FS. Their users
    // x (10) and y (20) in `a`, z (10) and w (20) in `a-b`. Four users: ranks 4 down to 1.
    // Slurm 22.05 visits `a` first (by name): x 4, y 3; then `a-b`, tied with `a`, so its
    // first user z ties with y at 3; w gets 1 (the rank without ties).
    // Slurm 23.11 visits `/root/a-b/` first (`-` sorts before `/`): z 4, w 3; x ties at 3;
    // y gets 1.
    let associations = vec![
        Association::account("a", "root", Shares::Count(1)),
        Association::account("a-b", "root", Shares::Count(1)),
        Association::user("x", "a", Shares::Count(1)).with_usage(10.0),
        Association::user("y", "a", Shares::Count(1)).with_usage(20.0),
        Association::user("z", "a-b", Shares::Count(1)).with_usage(10.0),
        Association::user("w", "a-b", Shares::Count(1)).with_usage(20.0),
    ];
    let ranks = |order| {
        let tree = FairTree::compute_in(&associations, order).unwrap();
        let rank = |account, user| tree.row(account, Some(user)).unwrap().rank.unwrap();
        [rank("a", "x"), rank("a", "y"), rank("a-b", "z"), rank("a-b", "w")]
    };
    assert_eq!(ranks(SiblingOrder::Slurm22), [4, 3, 3, 1]);
    assert_eq!(ranks(SiblingOrder::Slurm23), [3, 1, 4, 3]);
    assert_eq!(
        FairTree::compute(&associations).unwrap(),
        FairTree::compute_in(&associations, SiblingOrder::Slurm22).unwrap()
    );
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
