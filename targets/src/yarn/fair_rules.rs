//! The Fair Scheduler's load-time rules for `fair-scheduler.xml` (the allocation file),
//! as its allocation-file parser applies them: run on the elements of every file allot
//! emits, before it is written, and tested on Hadoop's own fixtures.

use super::xml::Element;

const MAX_DEPTH: usize = 64;

/// Every rule the allocation file `root` breaks.
pub fn validate(root: &Element) -> Vec<String> {
    if root.name != "allocations" {
        return vec!["Bad fair scheduler config file: top-level element not <allocations>".into()];
    }
    let mut problems = Vec::new();
    let default_policy = root.child_text("defaultQueueSchedulingPolicy").map(str::trim);
    if default_policy == Some("fifo") {
        problems.push("defaultQueueSchedulingPolicy may not be fifo".into());
    }
    let top_queues: Vec<&Element> = root.children.iter().filter(|c| is_queue(c)).collect();
    if top_queues.iter().any(|q| queue_name(q) == Some("root")) && top_queues.len() > 1 {
        problems.push("If configuring root queue, no other queues can be placed alongside it.".into());
    }
    for element in &root.children {
        match element.name.as_str() {
            "queue" | "pool" => {
                check_queue(element, default_policy.unwrap_or("fair"), None, 0, &mut problems)
            }
            "queueMaxResourcesDefault" => resource(&element.text, "queueMaxResourcesDefault", &mut problems),
            "queuePlacementPolicy" => check_placement(element, &mut problems),
            "defaultFairSharePreemptionTimeout"
            | "defaultMinSharePreemptionTimeout"
            | "queueMaxAppsDefault"
            | "userMaxAppsDefault" => number::<i64>(&element.text, &element.name, &mut problems),
            "defaultFairSharePreemptionThreshold" | "queueMaxAMShareDefault" => {
                number::<f64>(&element.text, &element.name, &mut problems)
            }
            _ => {}
        }
    }
    problems
}

fn is_queue(element: &Element) -> bool {
    element.name == "queue" || element.name == "pool"
}

fn queue_name(element: &Element) -> Option<&str> {
    element.get_attribute("name").map(str::trim)
}

fn check_queue(
    queue: &Element,
    default_policy: &str,
    parent_policy: Option<&str>,
    depth: usize,
    problems: &mut Vec<String>,
) {
    let name = queue_name(queue).unwrap_or("");
    if name.is_empty() {
        problems.push("queue name shouldn't be empty or consist only of whitespace.".into());
    }
    if name.contains('.') {
        problems.push(format!("queue name ({name}) shouldn't contain period."));
    }
    if depth >= MAX_DEPTH {
        problems.push(format!("queue {name}: nested deeper than {MAX_DEPTH} levels"));
        return;
    }
    let children: Vec<&Element> = queue.children.iter().filter(|c| is_queue(c)).collect();
    let parent = !children.is_empty() || queue.get_attribute("type") == Some("parent");
    let policy = queue.child_text("schedulingPolicy").or(queue.child_text("schedulingMode")).map(str::trim);
    let policy = policy.unwrap_or(default_policy);
    if policy == "fifo" && parent {
        problems.push(format!("queue {name}: the fifo policy is only allowed on leaf queues"));
    }
    if !matches!(policy, "fair" | "drf" | "fifo") && !policy.contains('.') {
        problems.push(format!("queue {name}: unknown scheduling policy `{policy}`"));
    }
    if parent_policy == Some("fair") && policy == "drf" {
        problems.push(format!("queue {name}: a fair parent may not have a drf child"));
    }
    for element in &queue.children {
        let text = element.text.as_str();
        match element.name.as_str() {
            "minResources" | "maxResources" | "maxChildResources" | "maxContainerAllocation" => {
                resource(text, &format!("queue {name}: {}", element.name), problems)
            }
            "reservation" if parent => problems.push(format!(
                "The configuration settings for {name} are invalid. A queue element that contains child queue elements or that has the type='parent' attribute cannot also include a reservation element."
            )),
            "maxRunningApps" | "minSharePreemptionTimeout" | "fairSharePreemptionTimeout" => {
                number::<i64>(text, &format!("queue {name}: {}", element.name), problems)
            }
            "weight" | "maxAMShare" | "fairSharePreemptionThreshold" => {
                number::<f64>(text, &format!("queue {name}: {}", element.name), problems)
            }
            "allowPreemptionFrom" if !matches!(text.trim(), "true" | "false") => {
                problems.push(format!("queue {name}: allowPreemptionFrom `{}` is not true or false", text.trim()))
            }
            _ => {}
        }
    }
    if let Some(weight) = queue.child_text("weight").and_then(|w| w.trim().parse::<f64>().ok())
        && weight < 0.0
    {
        problems.push(format!("queue {name}: weight {weight} is negative"));
    }
    for child in children {
        check_queue(child, default_policy, Some(policy), depth + 1, problems);
    }
}

fn number<T: std::str::FromStr>(text: &str, what: &str, problems: &mut Vec<String>) {
    if text.trim().parse::<T>().is_err() {
        problems.push(format!("{what}: `{}` is not a number", text.trim()));
    }
}

/// A resource string: `memory-mb=4096, vcores=4, yarn.io/gpu=2`, all percentages
/// (`memory-mb=50%, vcores=50%`), or the old forms (`1024 mb, 2 vcores`, `50%`).
fn resource(text: &str, what: &str, problems: &mut Vec<String>) {
    if let Err(e) = parse_resource(text) {
        problems.push(format!("{what}: Error reading resource config: {e}"));
    }
}

/// Why a resource string is refused.
#[derive(Debug, thiserror::Error)]
enum ResourceError {
    #[error("empty")]
    Empty,
    #[error("`{0}` is not an amount")]
    NotAnAmount(String),
    #[error("`{0}` is negative")]
    Negative(String),
    #[error("`{0}` is not name=value")]
    NotAPair(String),
    #[error("`{0}` has no resource name")]
    Unnamed(String),
    #[error("percentages and amounts are mixed")]
    Mixed,
    #[error("`{0}` names no resource")]
    NoResource(String),
}

fn parse_resource(text: &str) -> Result<(), ResourceError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(ResourceError::Empty);
    }
    let amount = |value: &str| -> Result<bool, ResourceError> {
        let value = value.trim();
        let (number, percent) = match value.strip_suffix('%') {
            Some(n) => (n.trim(), true),
            None => (value.trim_end_matches(|c: char| c.is_ascii_alphabetic()).trim(), false),
        };
        let n: f64 = number.parse().map_err(|_| ResourceError::NotAnAmount(value.to_string()))?;
        if n < 0.0 {
            return Err(ResourceError::Negative(value.to_string()));
        }
        Ok(percent)
    };
    if text.contains('=') {
        let mut kinds = Vec::new();
        for pair in text.split(',') {
            let (name, value) =
                pair.split_once('=').ok_or_else(|| ResourceError::NotAPair(pair.to_string()))?;
            if name.trim().is_empty() {
                return Err(ResourceError::Unnamed(pair.to_string()));
            }
            kinds.push(amount(value)?);
        }
        if kinds.contains(&true) && kinds.contains(&false) {
            return Err(ResourceError::Mixed);
        }
        return Ok(());
    }
    for part in text.split(',') {
        let part = part.trim();
        let known = ["mb", "vcores", "cpu", "memory"].iter().any(|u| part.ends_with(u));
        if !known && !part.ends_with('%') {
            return Err(ResourceError::NoResource(part.to_string()));
        }
        let number = part.trim_end_matches(|c: char| c.is_ascii_alphabetic()).trim();
        amount(number)?;
    }
    Ok(())
}

/// The last rule of the placement policy must always place (or reject) an application.
fn check_placement(policy: &Element, problems: &mut Vec<String>) {
    let rules: Vec<&Element> = policy.children.iter().filter(|c| c.name == "rule").collect();
    let Some(last) = rules.last() else {
        problems.push("queuePlacementPolicy has no rule".into());
        return;
    };
    let name = last.get_attribute("name").unwrap_or("");
    let creates = last.get_attribute("create") != Some("false");
    let terminal = match name {
        "default" | "reject" => true,
        "specified" | "user" | "primaryGroup" | "nestedUserQueue" => creates,
        _ => false,
    };
    if !terminal {
        problems
            .push(format!("queuePlacementPolicy: the last rule `{name}` may not place every application"));
    }
}
