//! The usage file of `allot fairshare`: CSV `account,user,raw_usage`, one association's raw
//! usage a line (`user` empty for an account's own usage), given to the associations of a
//! Slurm [`Tree`] for [`FairTree`](super::fair_tree::FairTree). Names are trimmed and lower
//! case, as Slurm stores them; a header line is allowed, blank lines are skipped, and the
//! usages of a repeated association add up.

use std::collections::BTreeMap;

use super::fair_tree::{Association, Shares};
use super::tree::Tree;

/// Raw usage by account, then by user (the empty user: the account's own usage).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Usage(BTreeMap<String, BTreeMap<String, f64>>);

/// A line of the usage file that is not a usage, with its number (from 1).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("line {line}: {problem}")]
pub struct UsageError {
    pub line: u64,
    pub problem: UsageProblem,
}

/// What is wrong with a line of the usage file.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum UsageProblem {
    #[error("expected account,user,raw_usage")]
    Fields,
    #[error("`{0}` is not a number")]
    NotANumber(String),
    /// What the CSV reader said.
    #[error("{0}")]
    Unreadable(String),
}

impl Usage {
    /// Reads a usage file's text.
    pub fn parse(text: &str) -> Result<Usage, UsageError> {
        // Slurm's names need no quoting, so commas always separate; a line ends at `\n` (a
        // `\r` before it is trimmed with the last field).
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .quoting(false)
            .terminator(csv::Terminator::Any(b'\n'))
            .from_reader(text.as_bytes());
        let mut usage = Usage::default();
        let mut record = csv::StringRecord::new();
        loop {
            match reader.read_record(&mut record) {
                Ok(true) => {}
                Ok(false) => return Ok(usage),
                Err(e) => {
                    let line = e.position().map_or(0, |p| p.line());
                    return Err(UsageError { line, problem: UsageProblem::Unreadable(e.to_string()) });
                }
            }
            let line = line_of(&record, text);
            let mut fields = record.iter().map(str::trim);
            let (account, user, raw) = (fields.next(), fields.next(), fields.next());
            // A line of blanks is one empty field (with a comma it is a row of empty fields).
            let blank = record.len() == 1 && account == Some("");
            if blank || (line == 1 && account == Some("account")) {
                continue;
            }
            let (Some(account), Some(user), Some(raw)) = (account, user, raw) else {
                return Err(UsageError { line, problem: UsageProblem::Fields });
            };
            let raw: f64 = raw
                .parse()
                .map_err(|_| UsageError { line, problem: UsageProblem::NotANumber(raw.to_owned()) })?;
            *usage.0.entry(account.to_lowercase()).or_default().entry(user.to_lowercase()).or_default() +=
                raw;
        }
    }

    /// The associations of `tree`, its accounts then its users, each with its raw usage.
    pub fn associations(&self, tree: &Tree) -> Vec<Association> {
        let shares = |fairshare: u64| Shares::from_raw(u32::try_from(fairshare).unwrap_or(u32::MAX));
        let accounts = tree.accounts.iter().map(|a| {
            Association::account(&a.name, &a.parent, shares(a.fairshare)).with_usage(self.of(&a.name, ""))
        });
        let users = tree.users.iter().map(|u| {
            Association::user(&u.name, &u.account, shares(u.fairshare))
                .with_usage(self.of(&u.account, &u.name))
        });
        accounts.chain(users).collect()
    }

    /// The raw usage of `user`'s association with `account` (no user: the account's own).
    fn of(&self, account: &str, user: &str) -> f64 {
        self.0.get(account).and_then(|users| users.get(user)).copied().unwrap_or(0.0)
    }
}

/// The line a record is on. The CSV reader gives the position where it started looking,
/// before the empty lines it passes over: those are counted here.
fn line_of(record: &csv::StringRecord, text: &str) -> u64 {
    let Some(start) = record.position() else { return 0 };
    let passed = usize::try_from(start.byte())
        .ok()
        .and_then(|byte| text.as_bytes().get(byte..))
        .map_or(0, |rest| rest.iter().take_while(|&&b| b == b'\n').count());
    start.line() + passed as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slurm::tree::{Account, User};

    #[test]
    fn reads_usage_with_or_without_a_header() {
        let usage = Usage::parse(
            "account,user,raw_usage\nVision, Alice ,510\n\n  \nvision,alice,90\r\nml,,7,extra\n",
        )
        .unwrap();
        assert_eq!(
            (usage.of("vision", "alice"), usage.of("ml", ""), usage.of("ml", "bob")),
            (600.0, 7.0, 0.0)
        );
        assert_eq!(Usage::parse("nlp,bob,1e3\n").unwrap().of("nlp", "bob"), 1000.0);
        assert_eq!(Usage::parse(""), Ok(Usage::default()));
    }

    #[test]
    fn bad_lines_are_named() {
        let error = |text: &str| Usage::parse(text).unwrap_err().to_string();
        assert_eq!(
            error("account,user,raw_usage\n\nvision,alice\n"),
            "line 3: expected account,user,raw_usage"
        );
        assert_eq!(error("vision,alice,lots\n"), "line 1: `lots` is not a number");
        assert_eq!(error("a,b,1\naccount,user,raw_usage\n"), "line 2: `raw_usage` is not a number");
        assert_eq!(error(" , , \n"), "line 1: `` is not a number");
    }

    #[test]
    fn associations_carry_their_usage() {
        let tree = Tree {
            cluster: "c".into(),
            accounts: vec![Account {
                name: "ml".into(),
                parent: "root".into(),
                fairshare: 3,
                ..Account::default()
            }],
            users: vec![User { name: "alice".into(), account: "ml".into(), fairshare: 1, ..User::default() }],
            ..Tree::default()
        };
        let usage = Usage::parse("ml,,5\nml,alice,20\n").unwrap();
        assert_eq!(
            usage.associations(&tree),
            [
                Association::account("ml", "root", Shares::Count(3)).with_usage(5.0),
                Association::user("alice", "ml", Shares::Count(1)).with_usage(20.0),
            ]
        );
    }
}
