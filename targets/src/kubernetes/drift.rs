//! How far live Kubernetes objects are from the objects allot writes: each object allot
//! would write that is missing, each whose fields differ, and each that carries allot's
//! label but that the budgets no longer have. Fields the API server or a controller adds
//! (defaults, `status`, metadata of its own) are not differences: only the fields allot
//! writes are compared, quantities by their value (`"2000"` is `"2k"`). A field a webhook
//! rewrote to another value is a difference.

use allot_compiler::units::parse_quantity;
use serde_json::{Value, json};

/// What differs of one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// allot would write it; the live system has none.
    Missing,
    /// These fields (`spec.fairSharing.weight`) hold other values than allot writes.
    Differs(Vec<String>),
    /// It carries allot's label, and allot would no longer write it.
    Extra,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Drift {
    pub kind: String,
    /// Namespaced objects only.
    pub namespace: Option<String>,
    pub name: String,
    pub change: Change,
}

impl Drift {
    /// `ClusterQueue physics`, `LocalQueue team-a/physics`.
    pub fn object(&self) -> String {
        match &self.namespace {
            Some(namespace) => format!("{} {namespace}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }

    /// What differs, in words: `differs in spec.fairSharing.weight`.
    pub fn change(&self) -> String {
        match &self.change {
            Change::Missing => "missing".into(),
            Change::Differs(fields) => format!("differs in {}", fields.join(", ")),
            Change::Extra => "no longer in the budgets".into(),
        }
    }
}

/// An object's kind, namespace and name.
fn identity(object: &Value) -> (&str, Option<&str>, &str) {
    let metadata = &object["metadata"];
    (
        object["kind"].as_str().unwrap_or_default(),
        metadata["namespace"].as_str(),
        metadata["name"].as_str().unwrap_or_default(),
    )
}

fn managed_by_allot(object: &Value) -> bool {
    object["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "allot"
}

/// The drift of the `live` objects (of the kinds allot writes) from the `desired` ones,
/// in the order of `desired`, then the extra objects in the order of `live`.
pub fn drift(desired: &[Value], live: &[Value]) -> Vec<Drift> {
    let found = |id: (&str, Option<&str>, &str)| live.iter().find(|l| identity(l) == id);
    let drift = |object: &Value, change: Change| {
        let (kind, namespace, name) = identity(object);
        Drift { kind: kind.into(), namespace: namespace.map(str::to_string), name: name.into(), change }
    };
    let mut out = Vec::new();
    for wanted in desired {
        match found(identity(wanted)) {
            None => out.push(drift(wanted, Change::Missing)),
            Some(live) => {
                let mut fields = Vec::new();
                differences(wanted, live, "", &mut fields);
                if !fields.is_empty() {
                    out.push(drift(wanted, Change::Differs(fields)));
                }
            }
        }
    }
    for extra in live.iter().filter(|l| managed_by_allot(l)) {
        if !desired.iter().any(|d| identity(d) == identity(extra)) {
            out.push(drift(extra, Change::Extra));
        }
    }
    out
}

/// The fields of `wanted` that `live` does not hold as they are, by their paths: an object's
/// keys one by one (the keys only `live` has are not compared), a list as a whole.
fn differences(wanted: &Value, live: &Value, path: &str, out: &mut Vec<String>) {
    match (wanted, live) {
        (Value::Object(wanted), Value::Object(live)) => {
            for (key, value) in wanted {
                let at = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                differences(value, live.get(key).unwrap_or(&Value::Null), &at, out);
            }
        }
        (Value::Array(wanted), Value::Array(live)) if wanted.len() == live.len() => {
            let before = out.len();
            for (w, l) in wanted.iter().zip(live) {
                differences(w, l, path, out);
            }
            // A list differs as one field.
            if out.len() > before {
                out.truncate(before);
                out.push(path.to_string());
            }
        }
        _ if wanted == live => {}
        (Value::String(w), Value::String(l))
            if parse_quantity(w).is_some_and(|q| parse_quantity(l) == Some(q)) => {}
        _ => out.push(path.to_string()),
    }
}

/// `2 objects missing, 1 different, 1 no longer in the budgets`; empty when none differs.
pub fn summary(drift: &[Drift]) -> String {
    let count = |f: fn(&Change) -> bool| drift.iter().filter(|d| f(&d.change)).count();
    let parts = [
        (count(|c| matches!(c, Change::Missing)), "missing"),
        (count(|c| matches!(c, Change::Differs(_))), "different"),
        (count(|c| matches!(c, Change::Extra)), "no longer in the budgets"),
    ];
    let listed: Vec<String> =
        parts.iter().filter(|(n, _)| *n > 0).map(|(n, what)| format!("{n} {what}")).collect();
    if listed.is_empty() { String::new() } else { format!("objects {}", listed.join(", ")) }
}

/// For programs: `[{kind, namespace, name, change, fields}]`.
pub fn json(drift: &[Drift]) -> Value {
    drift
        .iter()
        .map(|d| {
            let (change, fields) = match &d.change {
                Change::Missing => ("missing", Vec::new()),
                Change::Differs(fields) => ("different", fields.clone()),
                Change::Extra => ("extra", Vec::new()),
            };
            json!({ "kind": d.kind, "namespace": d.namespace, "name": d.name, "change": change, "fields": fields })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(name: &str, weight: &str) -> Value {
        json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": { "name": name, "labels": { "app.kubernetes.io/managed-by": "allot" } },
            "spec": { "cohortName": "root", "fairSharing": { "weight": weight },
                      "resourceGroups": [{ "coveredResources": ["nvidia.com/gpu"] }] },
        })
    }

    #[test]
    fn only_the_fields_allot_writes_are_compared() {
        let desired = [queue("a", "60"), queue("b", "40"), queue("c", "1")];
        // a: as written, with what the server adds (defaults, status, metadata of its own).
        let mut a = queue("a", "60");
        a["metadata"]["uid"] = json!("1234");
        a["spec"]["stopPolicy"] = json!("None");
        a["status"] = json!({ "pendingWorkloads": 3 });
        // b: its weight changed by hand, and its covered resources.
        let mut b = queue("b", "50");
        // The weight of a, written back as another form of the same quantity.
        a["spec"]["fairSharing"]["weight"] = json!("60000m");
        b["spec"]["resourceGroups"][0]["coveredResources"] = json!(["nvidia.com/gpu", "cpu"]);
        // old: allot wrote it once; unlabelled: someone else's.
        let old = queue("old", "1");
        let mut theirs = queue("theirs", "1");
        theirs["metadata"]["labels"] = json!({});
        let drift = drift(&desired, &[a, b, old, theirs]);
        let changes: Vec<(String, &Change)> = drift.iter().map(|d| (d.object(), &d.change)).collect();
        assert_eq!(
            changes,
            [
                (
                    "ClusterQueue b".to_string(),
                    &Change::Differs(vec!["spec.fairSharing.weight".into(), "spec.resourceGroups".into()])
                ),
                ("ClusterQueue c".to_string(), &Change::Missing),
                ("ClusterQueue old".to_string(), &Change::Extra),
            ]
        );
        assert_eq!(summary(&drift), "objects 1 missing, 1 different, 1 no longer in the budgets");
        assert_eq!(drift[0].change(), "differs in spec.fairSharing.weight, spec.resourceGroups");
        assert_eq!(json(&drift)[0]["fields"][0], "spec.fairSharing.weight");
        assert_eq!(summary(&[]), "");
    }
}
