//! The Capacity Scheduler's load-time rules, as the ResourceManager applies them when it
//! reads `capacity-scheduler.xml` (rule numbers as in the project's YARN reference): run on
//! the properties of every file allot emits, before it is written, and tested on Hadoop's
//! own fixtures ([`read`]).

use std::collections::{BTreeMap, BTreeSet};

use super::xml;

const PREFIX: &str = "yarn.scheduler.capacity.";
/// The ResourceManager's tolerance on a sum of percentages, on the 0-100 scale.
const TOLERANCE: f64 = 0.05;
const MAX_DEPTH: usize = 64;

/// How a queue's capacity is written.
#[derive(Clone, Debug, PartialEq)]
enum Capacity {
    Percent(f64),
    Weight(f64),
    Absolute(BTreeMap<String, u64>),
}

impl Capacity {
    fn mode(&self) -> &'static str {
        match self {
            Capacity::Percent(_) => "percentage",
            Capacity::Weight(_) => "weight",
            Capacity::Absolute(_) => "absolute",
        }
    }
}

/// A queue as the file describes it.
#[derive(Clone, Debug)]
pub struct ParsedQueue {
    pub path: String,
    pub capacity: Option<String>,
    pub maximum_capacity: Option<String>,
    pub children: Vec<ParsedQueue>,
}

/// The properties of a capacity-scheduler.xml, last value winning as in Hadoop.
pub fn read(text: &str) -> Result<BTreeMap<String, String>, xml::Error> {
    let root = xml::parse(text)?;
    Ok(xml::properties(&root)?.into_iter().collect())
}

/// The queue hierarchy under `root`.
pub fn hierarchy(properties: &BTreeMap<String, String>) -> ParsedQueue {
    fn go(properties: &BTreeMap<String, String>, path: &str, depth: usize) -> ParsedQueue {
        let get = |key: &str| properties.get(&format!("{PREFIX}{path}.{key}")).map(|v| v.trim().to_string());
        let children = if depth >= MAX_DEPTH {
            Vec::new()
        } else {
            child_names(properties, path)
                .iter()
                .map(|c| go(properties, &format!("{path}.{c}"), depth + 1))
                .collect()
        };
        ParsedQueue {
            path: path.to_string(),
            capacity: get("capacity"),
            maximum_capacity: get("maximum-capacity"),
            children,
        }
    }
    go(properties, "root", 0)
}

fn child_names(properties: &BTreeMap<String, String>, path: &str) -> Vec<String> {
    properties
        .get(&format!("{PREFIX}{path}.queues"))
        .map(|v| v.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect())
        .unwrap_or_default()
}

/// Every rule the properties of a file break. `unique_leaf_names`: also apply the rule of
/// older ResourceManagers that leaf names be unique across the tree.
pub fn validate(properties: &BTreeMap<String, String>, unique_leaf_names: bool) -> Vec<String> {
    let mut problems = Vec::new();
    let flag = |path: &str, key: &str| {
        properties
            .get(&format!("{PREFIX}{path}.{key}"))
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
    };
    let root_auto_create =
        flag("root", "auto-create-child-queue.enabled") || flag("root", "auto-queue-creation-v2.enabled");
    if child_names(properties, "root").is_empty() && !root_auto_create {
        problems.push("R1: Queue configuration missing child queue names for root".into());
    }
    let mut leaves: BTreeMap<String, String> = BTreeMap::new();
    check_queue(properties, "root", 0, &mut problems, &mut leaves, unique_leaf_names);
    problems
}

fn check_queue(
    properties: &BTreeMap<String, String>,
    path: &str,
    depth: usize,
    problems: &mut Vec<String>,
    leaves: &mut BTreeMap<String, String>,
    unique_leaf_names: bool,
) {
    let get =
        |p: &str, key: &str| properties.get(&format!("{PREFIX}{p}.{key}")).map(|v| v.trim().to_string());
    let is_true = |p: &str, key: &str| get(p, key).is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let children = child_names(properties, path);
    let leaf = children.is_empty();
    let name = path.rsplit('.').next().unwrap_or(path);

    if depth >= MAX_DEPTH {
        problems.push(format!("{path}: the hierarchy is deeper than {MAX_DEPTH} levels"));
        return;
    }
    if let Some(state) = get(path, "state")
        && !matches!(state.to_ascii_uppercase().as_str(), "RUNNING" | "STOPPED")
    {
        problems.push(format!("R10: {path}: state `{state}` is neither RUNNING nor STOPPED"));
    }
    if is_true(path, "reservable") && !leaf {
        problems.push(format!("R14: Only Leaf Queues can be reservable for {path}"));
    }
    if let Some(policy) = get(path, "ordering-policy") {
        let known: &[&str] = if leaf {
            &["fifo", "fair", "fifo-with-partitions", "fifo-for-pending-apps"]
        } else {
            &["utilization", "priority-utilization"]
        };
        if !known.contains(&policy.as_str()) && !policy.contains('.') {
            problems.push(format!("{path}: unknown ordering-policy `{policy}`"));
        }
    }
    let lifetime = |key: &str| get(path, key).map(|v| (v.parse::<i64>(), v));
    if let (Some((Ok(max), _)), Some((Ok(default), _))) =
        (lifetime("maximum-application-lifetime"), lifetime("default-application-lifetime"))
        && max > 0
        && default > max
    {
        problems.push(format!(
            "{path}: default-application-lifetime {default} exceeds maximum-application-lifetime {max}"
        ));
    }
    for key in ["maximum-application-lifetime", "default-application-lifetime"] {
        if let Some((Err(_), v)) = lifetime(key) {
            problems.push(format!("{path}: {key} `{v}` is not a whole number of seconds"));
        }
    }
    if leaf && path != "root" {
        // A leaf with legacy auto-creation becomes a managed parent, which needs a template.
        if is_true(path, "auto-create-child-queue.enabled")
            && get(path, "leaf-queue-template.capacity").is_none()
        {
            problems.push(format!(
                "{path}: auto-create-child-queue.enabled makes this leaf a managed parent queue, which needs {PREFIX}{path}.leaf-queue-template.capacity"
            ));
        }
        if let Some(first) = leaves.get(name) {
            if unique_leaf_names {
                problems.push(format!("R11: Two leaf queues were named {name} ({first} and {path}). Leaf queue names must be distinct"));
            }
        } else {
            leaves.insert(name.to_string(), path.to_string());
        }
        return;
    }

    // The children: names, capacities, modes, sums.
    let mut seen = BTreeSet::new();
    let mut capacities = Vec::new();
    for child in &children {
        let child_path = format!("{path}.{child}");
        if !seen.insert(child.as_str()) {
            problems.push(format!("{path}: child queue `{child}` is listed twice"));
            continue;
        }
        if child == "root" {
            problems.push(format!("R12: {child_path}: `root` is reserved"));
        }
        if child.contains(['.', ' ', '\t']) {
            problems.push(format!("R12: {path}: child queue name `{child}` contains `.` or a blank"));
        }
        match get(&child_path, "capacity").map(|v| parse_capacity(&v)) {
            Some(Ok(capacity)) => capacities.push((child_path.clone(), capacity)),
            Some(Err(e)) => problems.push(format!("{child_path}.capacity: {e}")),
            None => capacities.push((child_path.clone(), Capacity::Percent(0.0))),
        }
        check_maximum(
            &child_path,
            get(&child_path, "capacity"),
            get(&child_path, "maximum-capacity"),
            problems,
        );
    }
    let modes: BTreeSet<&str> = capacities.iter().map(|(_, c)| c.mode()).collect();
    if modes.len() > 1 {
        problems.push(format!(
            "R4: Parent queue '{path}' have children queue used mixed of weight mode, percentage and absolute mode, it is not allowed"
        ));
    } else if modes.contains("percentage") {
        let sum: f64 =
            capacities.iter().map(|(_, c)| if let Capacity::Percent(p) = c { *p } else { 0.0 }).sum();
        let parent_percent = parse_capacity(&get(path, "capacity").unwrap_or_else(|| "100".into()));
        let parent_weight = matches!(parent_percent, Ok(Capacity::Weight(_)));
        let parent_zero = matches!(parent_percent, Ok(Capacity::Percent(p)) if p == 0.0) && path != "root";
        let allow_zero = is_true(path, "allow-zero-capacity-sum");
        if sum.abs() <= TOLERANCE / 100.0 {
            if !(parent_weight || parent_zero || allow_zero) {
                problems.push(format!("R7: Illegal capacity sum of 0 for children of queue {path}: it is set to 0, but parent percent != 0"));
            }
        } else if (sum - 100.0).abs() > TOLERANCE {
            problems.push(format!(
                "R6: Illegal capacity sum of {sum} for children of queue {path}. It should be either 0 or 100"
            ));
        } else if parent_zero && !allow_zero {
            problems.push(format!(
                "R7: queue {path} has zero capacity, but child queues have positive capacities"
            ));
        }
    } else if modes.contains("absolute") {
        let parent = get(path, "capacity").map(|v| parse_capacity(&v));
        match parent {
            Some(Ok(Capacity::Absolute(parent))) => {
                for (resource, total) in &parent {
                    let sum: u64 = capacities
                        .iter()
                        .filter_map(|(_, c)| if let Capacity::Absolute(v) = c { v.get(resource) } else { None })
                        .sum();
                    if sum > *total {
                        problems.push(format!("R5: Parent={path}: children's {resource} sum {sum} is more than the parent's {total}"));
                    }
                }
            }
            _ if path == "root" => {}
            _ => problems.push(format!(
                "R5: Parent={path}: When absolute minResource is used, we must make sure both parent and child all use absolute minResource"
            )),
        }
    }
    let mut visited = BTreeSet::new();
    for child in children.iter().filter(|c| visited.insert(c.as_str())) {
        check_queue(properties, &format!("{path}.{child}"), depth + 1, problems, leaves, unique_leaf_names);
    }
}

/// R9: maximum-capacity in range and not below capacity (same mode).
fn check_maximum(path: &str, capacity: Option<String>, maximum: Option<String>, problems: &mut Vec<String>) {
    let Some(maximum) = maximum else { return };
    let Ok(max) = parse_capacity(&maximum) else {
        problems.push(format!("{path}.maximum-capacity: `{maximum}` is not a capacity"));
        return;
    };
    match (capacity.map(|c| parse_capacity(&c)), max) {
        (_, Capacity::Weight(_)) => {
            problems.push(format!("{path}.maximum-capacity: a weight is not allowed here"))
        }
        (Some(Ok(Capacity::Percent(c))), Capacity::Percent(m)) if m != -1.0 && m < c => {
            problems.push(format!(
                "R9: Illegal call to setMaxCapacity. Queue {path}: maximum-capacity {m} is below capacity {c}"
            ))
        }
        (Some(Ok(Capacity::Absolute(c))), Capacity::Absolute(m)) => {
            for (resource, value) in &c {
                if m.get(resource).is_some_and(|max| max < value) {
                    problems.push(format!("R9: {path}: maximum-capacity {resource} is below its capacity"));
                }
            }
        }
        _ => {}
    }
}

/// Why a capacity is refused, in the ResourceManager's words where it has them.
#[derive(Debug, thiserror::Error)]
enum CapacityError {
    #[error("`{0}` is not an absolute resource vector")]
    NotAVector(String),
    #[error("`{0}` is not name=value")]
    NotAPair(String),
    #[error("`{0}` is not a whole number")]
    NotWhole(String),
    #[error("R8: `{0}`: absolute capacities must give memory")]
    NoMemory(String),
    #[error("`{0}` is not a weight")]
    NotAWeight(String),
    #[error("R3: Illegal weight={0}. Acceptable values: [0, 10000]")]
    WeightOutOfRange(f64),
    #[error("`{0}` is not a capacity")]
    NotACapacity(String),
    #[error("R2: Illegal capacity of {0}")]
    PercentOutOfRange(f64),
}

/// `12.5` (percent), `2.0w` (weight), `[memory=1024,vcores=2,yarn.io/gpu=1]` (absolute).
fn parse_capacity(text: &str) -> Result<Capacity, CapacityError> {
    let text = text.trim();
    if let Some(inner) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
        let ok_chars = inner.chars().all(|c| c.is_alphanumeric() || "._,-= /".contains(c));
        if inner.is_empty() || !ok_chars {
            return Err(CapacityError::NotAVector(text.to_string()));
        }
        let mut values = BTreeMap::new();
        for pair in inner.split(',') {
            let (key, value) =
                pair.split_once('=').ok_or_else(|| CapacityError::NotAPair(pair.to_string()))?;
            let value: u64 = value.trim().parse().map_err(|_| CapacityError::NotWhole(value.to_string()))?;
            values.insert(key.trim().to_string(), value);
        }
        if !values.contains_key("memory") && !values.contains_key("memory-mb") {
            return Err(CapacityError::NoMemory(text.to_string()));
        }
        return Ok(Capacity::Absolute(values));
    }
    if let Some(weight) = text.strip_suffix('w') {
        let w: f64 = weight.parse().map_err(|_| CapacityError::NotAWeight(text.to_string()))?;
        return if (0.0..=10000.0).contains(&w) || w == -1.0 {
            Ok(Capacity::Weight(w))
        } else {
            Err(CapacityError::WeightOutOfRange(w))
        };
    }
    let p: f64 = text.parse().map_err(|_| CapacityError::NotACapacity(text.to_string()))?;
    if (0.0..=100.0).contains(&p) || p == -1.0 {
        Ok(Capacity::Percent(p))
    } else {
        Err(CapacityError::PercentOutOfRange(p))
    }
}
