//! Kueue's objects as allot reads them, for the `kueue` policy ([`setup`](super::setup)) and
//! for the live views of a running Kueue (`allot-live`): the one reader of what a
//! ClusterQueue and a Cohort say of GPUs (their parent in the quota tree, their quota in
//! each flavor), of Kubernetes quantities of GPUs, and of JSON fields, with the error that
//! names the object it could not read. The policy checks more of the objects on top of this
//! (Kueue's webhooks); the live views take them as the API server holds them.

use allot_compiler::escape;
use allot_compiler::units::parse_quantity;
use serde_json::Value;

/// The API versions of Kueue's objects read: v1beta2 (Kueue 0.15 on), and v1beta1 where the
/// fields read are the same but for a ClusterQueue's cohort ([`cohort_of`]).
pub const V1BETA2: &str = "kueue.x-k8s.io/v1beta2";
pub const V1BETA1: &str = "kueue.x-k8s.io/v1beta1";

/// The largest GPU quantity read (10^12): far beyond any cluster, and small enough that the
/// quota tree's sums over [`MAX_OBJECTS`](super::setup::MAX_OBJECTS) nodes stay exact in 64
/// bits.
pub const MAX_GPUS: u64 = 1_000_000_000_000;

/// Why an object cannot be read, naming it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{object}: {problem}")]
pub struct ObjectError {
    pub object: String,
    pub problem: String,
}

/// A ClusterQueue's or a Cohort's quota of GPUs in one flavor: the GPU resource's entry in
/// `spec.resourceGroups[].flavors[].resources[]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlavorQuota<'o> {
    pub flavor: &'o str,
    pub nominal: u64,
    /// `None`: as far as its parent lends.
    pub borrowing_limit: Option<u64>,
    /// `None`: all of its quota.
    pub lending_limit: Option<u64>,
}

/// The GPU quotas (of `resource`, such as `nvidia.com/gpu`) in a ClusterQueue's or a
/// Cohort's `spec`, flavor by flavor in the order of its resource groups; a quantity that is
/// not a whole number of GPUs is an error saying where it stands.
pub fn gpu_quotas<'o>(spec: &'o Value, resource: &str) -> Result<Vec<FlavorQuota<'o>>, String> {
    let mut quotas = Vec::new();
    for group in list(spec, "resourceGroups")? {
        for flavor in list(group, "flavors")? {
            let name = text(flavor, "name")?.unwrap_or_default();
            for r in list(flavor, "resources")?.iter().filter(|r| r["name"] == resource) {
                let at = |field: &str| format!("{field} of {resource:?} in flavor {name:?}");
                quotas.push(FlavorQuota {
                    flavor: name,
                    nominal: gpus(&r["nominalQuota"], &at("nominalQuota"))?.unwrap_or(0),
                    borrowing_limit: gpus(&r["borrowingLimit"], &at("borrowingLimit"))?,
                    lending_limit: gpus(&r["lendingLimit"], &at("lendingLimit"))?,
                });
            }
        }
    }
    Ok(quotas)
}

/// A ClusterQueue's cohort: `spec.cohortName` (v1beta2), or `spec.cohort` when the object is
/// v1beta1 (Kueue: apis/kueue/v1beta1/clusterqueue_conversion.go,
/// Convert_v1beta1_ClusterQueueSpec_To_v1beta2_ClusterQueueSpec); `None` when empty.
pub fn cohort_of(cluster_queue: &Value) -> Result<Option<&str>, String> {
    let field = if cluster_queue["apiVersion"] == V1BETA1 { "cohort" } else { "cohortName" };
    Ok(text(&cluster_queue["spec"], field)?.filter(|c| !c.is_empty()))
}

/// A Cohort's parent: `spec.parentName`; `None` when empty.
pub fn parent_of(spec: &Value) -> Result<Option<&str>, String> {
    Ok(text(spec, "parentName")?.filter(|p| !p.is_empty()))
}

/// A GPU quantity at `at` as Kubernetes writes quantities (`8`, `"8"`, `"8000m"`, `"2k"`),
/// whole and not negative; `None` when not set. Kueue would round a fractional GPU quantity
/// up (`Quantity.Value`); a fractional GPU is refused here instead.
pub fn gpus(v: &Value, at: &str) -> Result<Option<u64>, String> {
    let nanos = match v {
        Value::Null => return Ok(None),
        Value::Number(n) => match (n.as_u64(), n.as_f64()) {
            (Some(whole), _) => i128::from(whole) * 1_000_000_000,
            (None, Some(f)) if f.is_finite() && f.abs() < 1e18 => (f * 1e9).round() as i128,
            _ => return Err(format!("{at}: {n} is not a GPU quantity")),
        },
        Value::String(s) => {
            parse_quantity(s).ok_or_else(|| format!("{at}: {s:?} is not a Kubernetes quantity"))?
        }
        other => return Err(format!("{at}: {} is not a quantity", shown(other))),
    };
    if nanos < 0 {
        return Err(format!("{at}: {v} is negative"));
    }
    if nanos % 1_000_000_000 != 0 {
        return Err(format!("{at}: {v} is a fractional GPU quantity; GPUs are whole"));
    }
    let whole = nanos / 1_000_000_000;
    match u64::try_from(whole) {
        Ok(whole) if whole <= MAX_GPUS => Ok(Some(whole)),
        _ => Err(format!("{at}: {v} is more than the {MAX_GPUS} GPUs the policy counts")),
    }
}

/// The text at `field` of `v`; `None` when not set; an error when it is not text.
pub fn text<'v>(v: &'v Value, field: &str) -> Result<Option<&'v str>, String> {
    match &v[field] {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s)),
        other => Err(format!("{field} {} is not text", shown(other))),
    }
}

/// The list at `field` of `v`; empty when not set; an error when it is not a list.
pub fn list<'v>(v: &'v Value, field: &str) -> Result<&'v [Value], String> {
    match &v[field] {
        Value::Null => Ok(&[]),
        Value::Array(items) => Ok(items),
        other => Err(format!("{field} {} is not a list", shown(other))),
    }
}

/// A value from the objects as an error shows it: its JSON, control characters made
/// visible, cut after [`SHOWN_CHARS`] characters (a value of any size may stand there).
pub fn shown(v: &Value) -> String {
    let text = v.to_string();
    let cut = match text.char_indices().nth(SHOWN_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    };
    escape::line(&cut)
}

/// The most characters of a value an error shows.
const SHOWN_CHARS: usize = 80;
