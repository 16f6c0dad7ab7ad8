//! Kueue's objects as allot reads them, for the `kueue` policy ([`setup`](super::setup)) and
//! for the live views of a running Kueue (`allot-live`): one reader of a ClusterQueue's and
//! a Cohort's fields, and the error that names the object it could not read.

/// Why an object cannot be read, naming it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{object}: {problem}")]
pub struct ObjectError {
    pub object: String,
    pub problem: String,
}
