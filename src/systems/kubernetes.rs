//! A live Kueue, read from the Kubernetes API server a kubeconfig names (`KUBECONFIG`, else
//! `~/.kube/config`, else the service account of the pod allot runs in; its current
//! context, or the one named): the objects of `kueue.x-k8s.io/v1beta2` listed page by page
//! within a bound, and Kueue's visibility API for the pending workloads' positions when the
//! server serves it. Nothing is ever written.

use std::collections::HashMap;
use std::path::PathBuf;

use allot_compiler::escape;
use allot_compiler::ir::{Cluster, KubernetesBinding, KubernetesScheduler, Model};
use allot_live::kueue::{self, Kueue, MAX_OBJECTS, Workload};
use allot_targets::kubernetes;
use allot_verify::trace::Job;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::Value;

use crate::exit::Error;
use crate::systems::timeout;

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

/// The objects listed per request, and the most requests of one list.
const PAGE: u32 = 500;
const MAX_PAGES: usize = MAX_OBJECTS / PAGE as usize + 1;

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

/// Where the kubeconfig is read from: `KUBECONFIG`, or `~/.kube/config` when it exists.
fn kubeconfig_place() -> Option<String> {
    match std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
        Some(value) => Some(format!("KUBECONFIG={}", value.to_string_lossy())),
        None => {
            let home = PathBuf::from(std::env::var_os("HOME")?).join(".kube/config");
            home.exists().then(|| home.display().to_string())
        }
    }
}

/// The client's configuration: from the kubeconfig and its context (the current one, or
/// `context`), or inside a pod from its service account.
async fn config(context: Option<&str>) -> Result<kube::Config, String> {
    let Some(place) = kubeconfig_place() else {
        if let Some(context) = context {
            return Err(format!(
                "--context {}: there is no kubeconfig (KUBECONFIG is unset, and there is no ~/.kube/config)",
                escape::line(context)
            ));
        }
        return kube::Config::incluster().map_err(|e| {
            format!(
                "no Kubernetes API server to read: KUBECONFIG is unset, there is no ~/.kube/config, and this is not a pod with a service account ({e})"
            )
        });
    };
    let place = escape::line(&place);
    let kubeconfig = Kubeconfig::read().map_err(|e| format!("cannot read the kubeconfig ({place}): {e}"))?;
    let contexts: Vec<String> = kubeconfig.contexts.iter().map(|c| escape::line(&c.name)).collect();
    let has = if contexts.is_empty() { "none".to_string() } else { contexts.join(", ") };
    match context {
        Some(context) if !kubeconfig.contexts.iter().any(|c| c.name == context) => {
            return Err(format!(
                "the kubeconfig ({place}) has no context `{}` (it has: {has})",
                escape::line(context)
            ));
        }
        None if kubeconfig.current_context.is_none() => {
            return Err(format!(
                "the kubeconfig ({place}) sets no current context: name one with --context (it has: {has})"
            ));
        }
        _ => {}
    }
    let options = KubeConfigOptions { context: context.map(str::to_string), ..Default::default() };
    kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| format!("the kubeconfig ({place}): {e}"))
}

impl Connection {
    /// To the API server of the kubeconfig's current `context`, or of the one named.
    pub fn open(context: Option<&str>) -> Result<Connection, Error> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::failed(format!("cannot start the Kubernetes client: {e}")))?;
        let mut config = runtime.block_on(config(context)).map_err(Error::failed)?;
        // Each request is bounded as a whole (`within`); the client's own bounds are the
        // safety net behind it.
        config.connect_timeout = Some(timeout::read() * 2);
        config.read_timeout = Some(timeout::read() * 2);
        let server = escape::line(&config.cluster_url.to_string());
        let client = {
            let _entered = runtime.enter();
            kube::Client::try_from(config)
        }
        .map_err(|e| Error::failed(format!("cannot set up a client for the API server at {server}: {e}")))?;
        Ok(Connection { runtime, client, server })
    }

    /// Every object of `kind`, in every namespace, at most [`MAX_OBJECTS`], handed to
    /// `each` page by page as the API server holds it (`apiVersion` and `kind` set, the
    /// server's `managedFields` dropped).
    fn list(&self, kind: Kind, mut each: impl FnMut(Value) -> Result<(), Error>) -> Result<(), Error> {
        let gvk = GroupVersionKind::gvk(GROUP, VERSION, kind.kind);
        let resource = ApiResource::from_gvk_with_plural(&gvk, kind.plural);
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource);
        let too_many = || {
            Error::failed(format!(
                "the API server at {} holds more than {MAX_OBJECTS} {}: too many to read",
                self.server, kind.plural
            ))
        };
        let (mut count, mut token) = (0usize, None::<String>);
        for _ in 0..MAX_PAGES {
            let mut params = ListParams::default().limit(PAGE);
            if let Some(token) = &token {
                params = params.continue_token(token);
            }
            let page = self.within(api.list(&params), kind.plural)?.map_err(|e| self.failed(kind, e))?;
            count += page.items.len();
            if count > MAX_OBJECTS {
                return Err(too_many());
            }
            for mut object in page.items {
                object.metadata.managed_fields = None;
                object.types = Some(kube::api::TypeMeta {
                    api_version: resource.api_version.clone(),
                    kind: kind.kind.into(),
                });
                each(serde_json::to_value(object).map_err(|e| Error::failed(e.to_string()))?)?;
            }
            token = page.metadata.continue_.filter(|t| !t.is_empty());
            if token.is_none() {
                return Ok(());
            }
        }
        Err(too_many())
    }

    /// Every object of `kind`.
    fn all(&self, kind: Kind) -> Result<Vec<Value>, Error> {
        let mut out = Vec::new();
        self.list(kind, |o| {
            out.push(o);
            Ok(())
        })?;
        Ok(out)
    }

    /// Kueue's positions of the pending workloads of ClusterQueue `cluster_queue`
    /// (`namespace/name` to position, the first 0), from its visibility API (its first
    /// page: Kueue's default of 1,000); `None` when the request fails for any reason (a
    /// server without it answers 404 or 503).
    pub fn positions(&self, cluster_queue: &str) -> Option<Vec<(String, u64)>> {
        let gvk = GroupVersionKind::gvk("visibility.kueue.x-k8s.io", VERSION, "ClusterQueue");
        let resource = ApiResource::from_gvk_with_plural(&gvk, "clusterqueues");
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource);
        let summary =
            self.within(api.get_subresource("pendingworkloads", cluster_queue), "positions").ok()?.ok()?;
        Some(kueue::positions(&summary.data))
    }

    /// What `request` answers, within the read bound (`--timeout`); past it, an error naming
    /// what was asked (`what`), the bound and the server.
    fn within<T>(&self, request: impl Future<Output = T>, what: &str) -> Result<T, Error> {
        let bound = timeout::read();
        self.runtime.block_on(async { tokio::time::timeout(bound, request).await }).map_err(|_| {
            Error::failed(format!(
                "the API server at {} did not answer the request for {what} within {}: is it up and reachable? A slow one may be given longer with --timeout",
                self.server,
                timeout::shown(bound)
            ))
        })
    }

    /// What a failed list means, in words.
    fn failed(&self, kind: Kind, error: kube::Error) -> Error {
        let what = format!("{}.{GROUP}/{VERSION}", kind.plural);
        let server = &self.server;
        Error::failed(match &error {
            kube::Error::Api(status) => {
                let said = escape::line(&status.message);
                match status.code {
                    404 => format!(
                        "the API server at {server} serves no {what}: is Kueue (with its v1beta2 API) installed there?"
                    ),
                    401 => format!(
                        "the API server at {server} did not accept this kubeconfig's credentials ({said})"
                    ),
                    403 => format!(
                        "the API server at {server} refused to list {what} ({said}): this kubeconfig's user needs `list` on them"
                    ),
                    code => format!("listing {what} at {server} failed ({code}): {said}"),
                }
            }
            kube::Error::HyperError(_) | kube::Error::Service(_) => {
                format!(
                    "cannot reach the API server at {server} to list {what}: {}",
                    escape::line(&error.to_string())
                )
            }
            kube::Error::Auth(_) => {
                format!(
                    "cannot authenticate to the API server at {server}: {}",
                    escape::line(&error.to_string())
                )
            }
            kube::Error::SerdeError(_) => format!(
                "the API server at {server} answered the list of {what} with something else: {}",
                escape::line(&error.to_string())
            ),
            _ => format!("listing {what} at {server} failed: {}", escape::line(&error.to_string())),
        })
    }
}

/// What was read of a live Kueue: its queues and workloads, and the objects of the kinds
/// allot writes (for the drift) or why they could not be read.
pub struct Reading {
    pub kueue: Kueue,
    pub written: Result<Vec<Value>, Error>,
}

impl Reading {
    /// Lists the queues and the workloads, counting GPUs of `resource`; with `written`,
    /// also every other kind allot writes (a failure there is kept, not fatal).
    pub fn read(connection: &Connection, resource: &str, written: bool) -> Result<Reading, Error> {
        let cluster_queues = connection.all(CLUSTER_QUEUES)?;
        let cohorts = connection.all(COHORTS)?;
        let local_queues = connection.all(LOCAL_QUEUES)?;
        let mut parsed: Vec<Workload> = Vec::new();
        connection.list(WORKLOADS, |o| {
            let workload = Workload::read(&o, resource)
                .map_err(|e| Error::failed(format!("Kueue's {}", escape::line(&e.to_string()))))?;
            parsed.push(workload);
            Ok(())
        })?;
        let lists =
            kueue::Lists { cluster_queues: &cluster_queues, cohorts: &cohorts, local_queues: &local_queues };
        let kueue = Kueue::read(&lists, parsed, resource)
            .map_err(|e| Error::failed(format!("Kueue's {}", escape::line(&e.to_string()))))?;
        let written = if written {
            (|| {
                let mut out = connection.all(RESOURCE_FLAVORS)?;
                out.extend(connection.all(PRIORITY_CLASSES)?);
                out.extend(cohorts);
                out.extend(cluster_queues);
                out.extend(local_queues);
                Ok(out)
            })()
        } else {
            Ok(Vec::new())
        };
        Ok(Reading { kueue, written })
    }
}

/// The workloads of a live Kueue that hold GPUs or wait for them, as jobs of allot cluster
/// `cluster`, each in the budget its ClusterQueue stands for; one in a contract's reserve
/// (`root-reserve-<contract>`) in the budget whose namespace it runs in.
pub fn demand(model: &Model, cluster: &str, live: &Kueue, now: i64) -> Vec<Job> {
    let budgets: HashMap<String, String> =
        kubernetes::kueue::queue_names(model, cluster).into_iter().collect();
    let reserves: Vec<String> =
        kubernetes::kueue::reserve_queues(model).into_iter().map(|(_, queue)| queue).collect();
    let nodes = kubernetes::tree(model, cluster);
    let by_namespace = kubernetes::namespaces(&nodes);
    kueue::demand(
        live,
        cluster,
        |w| {
            let queue = w.cluster_queue.as_deref()?;
            match budgets.get(queue) {
                Some(path) => Some(path.as_str()),
                None if reserves.iter().any(|r| r == queue) => {
                    by_namespace.get(w.namespace.as_str()).copied()
                }
                None => None,
            }
        },
        now,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use allot_live::kueue::Workload;

    #[test]
    fn a_workload_in_a_reserve_counts_for_the_budget_of_its_namespace() {
        let model = allot_compiler::test_support::model(
            "cluster c gpus=16 gpu-type=h100 gpus-per-node=8 {\n    kubernetes kueue\n}\n\
             contract debug min-runtime=\"0s\" reserve=2\ncontract batch min-runtime=\"1h\" default=#true\n\
             project a share=\"50%\" {\n    namespaces team-a\n}\n\
             project g share=\"50%\" {\n    project b share=1 {\n        namespaces team-b\n    }\n}\n",
        );
        let running = |namespace: &str, queue: &str| Workload {
            namespace: namespace.into(),
            name: "w".into(),
            cluster_queue: Some(queue.into()),
            gpus: 1,
            reserved_at: Some(0),
            active: true,
            ..Workload::default()
        };
        let live = Kueue {
            cluster_queues: Vec::new(),
            cohorts: Vec::new(),
            local_queues: Vec::new(),
            workloads: vec![
                running("team-a", "a"),
                running("team-b", "root-reserve-debug"),
                running("team-a", "root-reserve-debug"),
                running("elsewhere", "root-reserve-debug"),
                running("team-b", "someone-elses"),
            ],
        };
        let projects: Vec<String> =
            demand(&model, "c", &live, 10).iter().map(|j| j.project.to_string()).collect();
        assert_eq!(projects, ["a", "g/b", "a", "", ""]);
    }
}
