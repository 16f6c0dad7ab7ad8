//! A live Kueue, read from the Kubernetes API server a kubeconfig names (`KUBECONFIG`,
//! `~/.kube/config`, or the service account inside a pod; its current context, or the one
//! named): the objects of `kueue.x-k8s.io/v1beta2` listed page by page within a bound, and
//! Kueue's visibility API for the pending workloads' positions when the server serves it.
//! Nothing is ever written.

use std::time::Duration;

use allot_compiler::ir::{Cluster, KubernetesBinding, KubernetesScheduler, Model};
use allot_targets::kubernetes;
use allot_verify::workloads::MAX_OBJECTS;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::Value;

use crate::exit::Error;

const GROUP: &str = "kueue.x-k8s.io";
const VERSION: &str = "v1beta2";

/// A kind of Kueue object allot reads.
#[derive(Clone, Copy, Debug)]
struct Kind {
    kind: &'static str,
    plural: &'static str,
}

const CLUSTER_QUEUES: Kind = Kind { kind: "ClusterQueue", plural: "clusterqueues" };
const COHORTS: Kind = Kind { kind: "Cohort", plural: "cohorts" };
const LOCAL_QUEUES: Kind = Kind { kind: "LocalQueue", plural: "localqueues" };
const WORKLOADS: Kind = Kind { kind: "Workload", plural: "workloads" };
const RESOURCE_FLAVORS: Kind = Kind { kind: "ResourceFlavor", plural: "resourceflavors" };
const PRIORITY_CLASSES: Kind = Kind { kind: "WorkloadPriorityClass", plural: "workloadpriorityclasses" };

/// The objects listed per request.
const PAGE: u32 = 500;

/// The allot cluster bound to Kueue whose live state to read: the one named, or the
/// budgets' only one.
pub fn live_cluster<'m>(
    model: &'m Model,
    named: Option<&str>,
) -> Result<(&'m Cluster, &'m KubernetesBinding), Error> {
    let bound = kubernetes::bound(model, KubernetesScheduler::Kueue);
    let names: Vec<&str> = bound.iter().map(|(c, _)| c.name.as_str()).collect();
    match (named, &bound[..]) {
        (Some(name), _) => bound.iter().find(|(c, _)| c.name == name).copied().ok_or_else(|| {
            Error::failed(format!(
                "the budgets bind no cluster `{name}` to Kueue (they bind: {})",
                if names.is_empty() { "none".to_string() } else { names.join(", ") }
            ))
        }),
        (None, [only]) => Ok(*only),
        (None, []) => Err(Error::failed("the budgets bind no cluster to Kueue: nothing to read")),
        (None, _) => Err(Error::failed(format!(
            "the budgets bind several clusters to Kueue ({}): name one with --cluster",
            names.join(", ")
        ))),
    }
}

/// A connection to one API server.
pub struct Connection {
    runtime: tokio::runtime::Runtime,
    client: kube::Client,
    /// Its address, for messages.
    server: String,
}

impl Connection {
    /// To the API server of the kubeconfig's current `context`, or of the one named.
    pub fn open(context: Option<&str>) -> Result<Connection, Error> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::failed(format!("cannot start the Kubernetes client: {e}")))?;
        let mut config = runtime
            .block_on(async {
                match context {
                    None => kube::Config::infer().await.map_err(|e| e.to_string()),
                    Some(context) => {
                        let options =
                            KubeConfigOptions { context: Some(context.to_string()), ..Default::default() };
                        let kubeconfig = Kubeconfig::read().map_err(|e| e.to_string())?;
                        kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                            .await
                            .map_err(|e| e.to_string())
                    }
                }
            })
            .map_err(|e| {
                Error::failed(format!(
                    "no Kubernetes API server to read: {e} (set KUBECONFIG, or write ~/.kube/config)"
                ))
            })?;
        config.connect_timeout = Some(Duration::from_secs(10));
        config.read_timeout = Some(Duration::from_secs(60));
        let server = config.cluster_url.to_string();
        let client = {
            let _entered = runtime.enter();
            kube::Client::try_from(config)
        }
        .map_err(|e| Error::failed(format!("cannot set up a client for the API server at {server}: {e}")))?;
        Ok(Connection { runtime, client, server })
    }

    /// Every object of `kind`, in every namespace, at most [`MAX_OBJECTS`], as the API
    /// server holds them (`apiVersion` and `kind` included).
    fn list(&self, kind: Kind) -> Result<Vec<Value>, Error> {
        let gvk = GroupVersionKind::gvk(GROUP, VERSION, kind.kind);
        let resource = ApiResource::from_gvk_with_plural(&gvk, kind.plural);
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource);
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut params = ListParams::default().limit(PAGE);
            if let Some(token) = &token {
                params = params.continue_token(token);
            }
            let page = self.runtime.block_on(api.list(&params)).map_err(|e| self.failed(kind, e))?;
            for mut object in page.items {
                object.types = Some(kube::api::TypeMeta {
                    api_version: resource.api_version.clone(),
                    kind: kind.kind.into(),
                });
                out.push(serde_json::to_value(object).map_err(|e| Error::failed(e.to_string()))?);
            }
            if out.len() > MAX_OBJECTS {
                return Err(Error::failed(format!(
                    "the API server at {} holds more than {MAX_OBJECTS} {}: too many to read",
                    self.server, kind.plural
                )));
            }
            token = page.metadata.continue_.filter(|t| !t.is_empty());
            if token.is_none() {
                return Ok(out);
            }
        }
    }

    /// Kueue's positions of the pending workloads of ClusterQueue `cluster_queue`
    /// (`namespace/name` to position, the first 0), from its visibility API; `None` when
    /// the server does not serve it (a test server, or Kueue without it).
    pub fn positions(&self, cluster_queue: &str) -> Option<Vec<(String, u64)>> {
        let gvk = GroupVersionKind::gvk("visibility.kueue.x-k8s.io", VERSION, "ClusterQueue");
        let resource = ApiResource::from_gvk_with_plural(&gvk, "clusterqueues");
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource);
        let summary = self.runtime.block_on(api.get_subresource("pendingworkloads", cluster_queue)).ok()?;
        Some(allot_verify::workloads::positions(&summary.data))
    }

    /// What a failed list means, in words.
    fn failed(&self, kind: Kind, error: kube::Error) -> Error {
        let what = format!("{}.{GROUP}/{VERSION}", kind.plural);
        let server = &self.server;
        Error::failed(match &error {
            kube::Error::Api(status) if status.code == 404 => format!(
                "the API server at {server} serves no {what}: is Kueue (with its v1beta2 API) installed there?"
            ),
            kube::Error::Api(status) if status.code == 401 || status.code == 403 => format!(
                "the API server at {server} refused to list {what} ({}): this kubeconfig's user needs `list` on them",
                status.message
            ),
            kube::Error::Api(status) => format!("listing {what} at {server} failed: {}", status.message),
            _ => format!("cannot reach the API server at {server} to list {what}: {error}"),
        })
    }
}

/// The live objects of Kueue, as listed.
pub struct Objects {
    cluster_queues: Vec<Value>,
    cohorts: Vec<Value>,
    local_queues: Vec<Value>,
    workloads: Vec<Value>,
    /// The other kinds allot writes, for the drift (empty unless asked for).
    others: Vec<Value>,
}

impl Objects {
    /// Lists the queues and the workloads, and with `written`, every other kind allot writes.
    pub fn read(connection: &Connection, written: bool) -> Result<Objects, Error> {
        let mut others = Vec::new();
        if written {
            others.extend(connection.list(RESOURCE_FLAVORS)?);
            others.extend(connection.list(PRIORITY_CLASSES)?);
        }
        Ok(Objects {
            cluster_queues: connection.list(CLUSTER_QUEUES)?,
            cohorts: connection.list(COHORTS)?,
            local_queues: connection.list(LOCAL_QUEUES)?,
            workloads: connection.list(WORKLOADS)?,
            others,
        })
    }

    /// The queues and workloads read, counting GPUs of `resource`.
    pub fn kueue(&self, resource: &str) -> Result<allot_verify::workloads::Kueue, Error> {
        let lists = allot_verify::workloads::Lists {
            cluster_queues: &self.cluster_queues,
            cohorts: &self.cohorts,
            local_queues: &self.local_queues,
            workloads: &self.workloads,
        };
        allot_verify::workloads::Kueue::read(&lists, resource)
            .map_err(|e| Error::failed(format!("Kueue's {e}")))
    }

    /// Every object of the kinds allot writes.
    pub fn written(&self) -> Vec<Value> {
        let queues = [&self.others, &self.cohorts, &self.cluster_queues, &self.local_queues];
        queues.into_iter().flatten().cloned().collect()
    }
}

/// The budget each of allot's ClusterQueues and Cohorts of allot cluster `cluster` stands
/// for: its name, and the project's path.
pub fn queue_names(model: &Model, cluster: &str) -> Vec<(String, String)> {
    let nodes = kubernetes::tree(model, cluster);
    nodes.iter().flat_map(|n| n.flatten()).map(|n| (n.name.clone(), n.project.path.clone())).collect()
}
