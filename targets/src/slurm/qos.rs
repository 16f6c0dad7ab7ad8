//! The QOS allot manages on a Slurm: one per contract, plus [`PREEMPTIBLE_QOS`] for work
//! beyond a budget, with the settings allot writes (priority, preemption mode, the
//! contract's protected minimum runtime as `PreemptExemptTime`, its maximum runtime as
//! `MaxWall`, its GPUs per job as `MaxTRESPerJob=gres/gpu=N`, and the QOS it may preempt);
//! and one per budget's floor and per contract's reserve ([`partition_cap`]: its cap as
//! `GrpTRES=gres/gpu=N`).
//! The live side is read from `sacctmgr show qos` in [`SHOW_FORMAT`]; the wanted side is
//! written in the same format, so that a saved plan holds both as text. A QOS allot does not
//! want is left as it is: allot never deletes one.

use allot_compiler::ir::{Contract, Location, Model};
use allot_compiler::names::PREEMPTIBLE_QOS;

use super::slurm_duration;
use super::slurm_name_problem;

/// The fields `sacctmgr -n -P show qos format=...` is asked for, in the order of its columns.
pub const SHOW_FORMAT: &str =
    "Name,Priority,PreemptMode,PreemptExemptTime,MaxWall,MaxTRESPerJob,GrpTRES,Preempt";

/// The most QOS a `show qos` answer is read with (Slurm's own limit is far lower in practice).
pub const MAX_QOS: usize = 10_000;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Qos {
    pub name: String,
    pub priority: u64,
    /// As `sacctmgr` shows it, lower case: `cancel`, `requeue`, `cluster`, ...
    pub preempt_mode: String,
    /// `PreemptExemptTime`, in seconds (none: the cluster's own).
    pub preempt_exempt: Option<u64>,
    /// `MaxWall`, in minutes.
    pub max_wall: Option<u64>,
    /// The `gres/gpu` entry of `MaxTRESPerJob` (other entries are not allot's).
    pub max_gpus: Option<u64>,
    /// The `gres/gpu` entry of `GrpTRES`: a floor's cap.
    pub grp_gpus: Option<u64>,
    /// The QOS it may preempt, sorted.
    pub preempt: Vec<String>,
    /// The contract it stands for, when wanted.
    pub source: Option<Location>,
}

impl Qos {
    /// The settings allot manages, by the names `sacctmgr` takes, each as `sacctmgr show`
    /// would read it back, `-` when unset. The preemption list comes last: it is set only
    /// when every QOS exists.
    pub fn fields(&self) -> [(&'static str, String); 7] {
        let unset = || "-".to_string();
        [
            ("priority", self.priority.to_string()),
            ("preemptmode", self.preempt_mode.clone()),
            ("preemptexempttime", self.preempt_exempt.map_or_else(unset, slurm_duration)),
            ("maxwall", self.max_wall.map_or_else(unset, |m| slurm_duration(m * 60))),
            ("maxtresperjob", self.max_gpus.map_or_else(unset, |g| format!("gres/gpu={g}"))),
            ("grptres", self.grp_gpus.map_or_else(unset, |g| format!("gres/gpu={g}"))),
            ("preempt", if self.preempt.is_empty() { unset() } else { self.preempt.join(",") }),
        ]
    }

    /// A managed setting as `sacctmgr modify qos ... set` takes it (`-1` clears a limit).
    pub fn setting(&self, field: &str) -> String {
        match field {
            "priority" => self.priority.to_string(),
            "preemptmode" => self.preempt_mode.clone(),
            "preemptexempttime" => self.preempt_exempt.map_or("-1".into(), slurm_duration),
            "maxwall" => self.max_wall.map_or("-1".into(), |m| m.to_string()),
            "maxtresperjob" => format!("gres/gpu={}", self.max_gpus.map_or("-1".into(), |g| g.to_string())),
            "grptres" => format!("gres/gpu={}", self.grp_gpus.map_or("-1".into(), |g| g.to_string())),
            "preempt" => self.preempt.join(","),
            _ => unreachable!("not a managed QOS setting: {field}"),
        }
    }
}

/// The QOS the budgets want: [`PREEMPTIBLE_QOS`] (priority 0, requeued, no protection, no
/// limits, preempting nothing), then one per contract (its protection, limits and
/// preemption mode; it may preempt [`PREEMPTIBLE_QOS`]).
pub fn wanted(model: &Model) -> Vec<Qos> {
    let preemptible = Qos { name: PREEMPTIBLE_QOS.into(), preempt_mode: "requeue".into(), ..Qos::default() };
    std::iter::once(preemptible).chain(model.contracts.iter().map(of_contract)).collect()
}

/// The partition QOS of a budget's floor or a contract's reserve: its cap, and nothing else
/// of its own (a partition QOS's `PreemptExemptTime` would override every contract's).
pub fn partition_cap(name: &str, gpus: u64, source: &Location) -> Qos {
    Qos {
        name: name.to_string(),
        preempt_mode: "cluster".into(),
        grp_gpus: Some(gpus),
        source: Some(source.clone()),
        ..Qos::default()
    }
}

fn of_contract(c: &Contract) -> Qos {
    Qos {
        name: c.name.clone(),
        priority: 0,
        preempt_mode: if c.resumable { "requeue" } else { "cancel" }.into(),
        preempt_exempt: Some(c.min_runtime_seconds),
        max_wall: c.max_runtime_seconds.map(|s| s.div_ceil(60)),
        max_gpus: c.max_gpus,
        grp_gpus: None,
        preempt: vec![PREEMPTIBLE_QOS.into()],
        source: Some(c.source.clone()),
    }
}

/// QOS as `sacctmgr -n -P show qos format=`[`SHOW_FORMAT`] prints them, one per line.
pub fn show(qos: &[Qos]) -> String {
    qos.iter()
        .map(|q| {
            let fields = q.fields().map(|(_, v)| if v == "-" { String::new() } else { v });
            format!("{}|{}\n", q.name, fields.join("|"))
        })
        .collect()
}

/// Reads what [`show`] writes and `sacctmgr` prints: names lower-cased as Slurm keeps them;
/// a line Slurm could not have written (a name no command can carry, a duration or number
/// that does not read, a QOS twice, more than [`MAX_QOS`]) is refused with its number.
pub fn parse(text: &str) -> Result<Vec<Qos>, String> {
    let mut out: Vec<Qos> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let fail = |why: String| format!("line {}: {why}", i + 1);
        let columns: Vec<&str> = line.split('|').collect();
        let [name, priority, mode, exempt, wall, tres, grp, preempt] = columns[..] else {
            return Err(fail(format!("{} columns, not the 8 of {SHOW_FORMAT}", columns.len())));
        };
        let name = name.to_lowercase();
        let preempt: Vec<String> = if preempt.is_empty() {
            Vec::new()
        } else {
            let mut list: Vec<String> = preempt.split(',').map(str::to_lowercase).collect();
            list.sort();
            list
        };
        for n in std::iter::once(&name).chain(&preempt) {
            if let Some(why) = slurm_name_problem(n) {
                return Err(fail(format!("QOS name {n:?}: {why}")));
            }
        }
        if !seen.insert(name.clone()) {
            return Err(fail(format!("QOS {name} is listed twice")));
        }
        if out.len() == MAX_QOS {
            return Err(fail(format!("more than {MAX_QOS} QOS")));
        }
        let mode = mode.to_lowercase();
        if !mode.bytes().all(|b| b.is_ascii_lowercase() || b == b',') {
            return Err(fail(format!("preemption mode {mode:?} is not one Slurm has")));
        }
        out.push(Qos {
            priority: priority.parse().map_err(|_| fail(format!("priority {priority:?} is not a number")))?,
            preempt_mode: mode,
            preempt_exempt: duration(exempt).map_err(&fail)?,
            max_wall: duration(wall).map_err(&fail)?.map(|s| s.div_ceil(60)),
            max_gpus: gpus(tres).map_err(&fail)?,
            grp_gpus: gpus(grp).map_err(&fail)?,
            preempt,
            name,
            source: None,
        });
    }
    Ok(out)
}

/// The longest duration read, in days (Slurm's 32-bit minutes).
const MAX_DAYS: u64 = u32::MAX as u64 / 1440;

/// A Slurm duration as `sacctmgr` shows it (`[D-]HH:MM:SS`, or nothing: unset), in seconds.
fn duration(text: &str) -> Result<Option<u64>, String> {
    if text.is_empty() {
        return Ok(None);
    }
    let bad = || format!("duration {text:?} is not [D-]HH:MM:SS");
    let (days, clock) = text.split_once('-').unwrap_or(("0", text));
    let mut parts = clock.split(':').map(|p| p.parse::<u64>().map_err(|_| bad()));
    let (Some(h), Some(m), Some(s), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return Err(bad());
    };
    let days: u64 = days.parse().map_err(|_| bad())?;
    let (h, m, s) = (h?, m?, s?);
    // Slurm keeps durations in 32 bits of minutes: anything longer is not Slurm's.
    if days > MAX_DAYS || h > 23 || m > 59 || s > 59 {
        return Err(bad());
    }
    Ok(Some(days * 86_400 + h * 3600 + m * 60 + s))
}

/// The `gres/gpu=N` entry of a TRES list, if it has one.
fn gpus(tres: &str) -> Result<Option<u64>, String> {
    tres.split(',')
        .find_map(|entry| entry.strip_prefix("gres/gpu="))
        .map(|n| n.parse().map_err(|_| format!("GPU count {n:?} is not a number")))
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_sacctmgr_shows_reads_back_as_allot_writes_it() {
        // Lines as Slurm 22.05 printed them for the QOS of the university example, and one
        // set by hand with a CPU limit beside the GPU one.
        let shown = "normal|0|cluster|||||\npreemptible|0|requeue|||||\n\
                     short|0|cancel|00:00:00|04:00:00|gres/gpu=4||preemptible\n\
                     long|0|cancel|12:00:00|7-00:00:00|cpu=4,gres/gpu=16||preemptible\n\
                     gpu-floor-a|0|cluster||||gres/gpu=19|\n";
        let qos = parse(shown).unwrap();
        assert_eq!(qos.len(), 5);
        assert_eq!((qos[4].grp_gpus, qos[4].max_gpus), (Some(19), None));
        assert_eq!(qos[4].setting("grptres"), "gres/gpu=19");
        assert_eq!(qos[2].max_wall, Some(240));
        assert_eq!(qos[2].preempt_exempt, Some(0));
        assert_eq!(
            (qos[3].preempt_exempt, qos[3].max_wall, qos[3].max_gpus),
            (Some(43_200), Some(10_080), Some(16))
        );
        assert_eq!(qos[1].preempt, Vec::<String>::new());
        assert_eq!(parse(&show(&qos)).unwrap(), qos);
        assert_eq!(qos[3].fields()[3].1, "7-00:00:00");
        assert_eq!(qos[1].setting("maxtresperjob"), "gres/gpu=-1");
    }

    #[test]
    fn a_line_slurm_could_not_have_written_is_refused_with_its_number() {
        for (text, why) in [
            ("a|0|cancel|||||\nb|x|cancel|||||\n", "line 2: priority"),
            ("a|0|cancel|1:2||||\n", "line 1: duration"),
            ("a|0|cancel|||||b,c d\n", "line 1: QOS name"),
            ("a|0|cancel||||\n", "line 1: 7 columns"),
            ("a|0|cancel|||||\nA|0|cancel|||||\n", "line 2: QOS a is listed twice"),
            ("a|0|can;cel|||||\n", "line 1: preemption mode"),
            ("a|0|cancel|||gres/gpu=x||\n", "line 1: GPU count"),
            ("a|0|cluster||||gres/gpu=y|\n", "line 1: GPU count"),
        ] {
            let error = parse(text).unwrap_err();
            assert!(error.starts_with(why), "{text:?}: {error}");
        }
    }
}
