//! A real CRD-serving Kubernetes API server for the tests that need one
//! (`scripts/k8s-apiserver.sh`: the standalone apiextensions-apiserver plus etcd, with every CRD
//! of the shared reference material), talked to with `curl` and the client certificate. Each
//! [`ApiServer`] has a state folder and ports of its own, and is stopped when dropped.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::root;

const SCRIPT: &str = "scripts/k8s-apiserver.sh";
const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

/// A real API server of its own (state folder and ports of its own, so it never meets the one
/// `.ci/run` checks with), stopped when dropped.
pub struct ApiServer {
    /// What `scripts/k8s-apiserver.sh` is run with: state folder, ports, shared folder.
    env: Vec<(String, String)>,
    url: String,
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
    kubeconfig: PathBuf,
    /// Holds the state folder (`state/` inside); removed after `stop`.
    _dir: tempfile::TempDir,
}

fn script(command: &str, env: &[(String, String)]) -> Output {
    Command::new(root().join(SCRIPT))
        .arg(command)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(root())
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{SCRIPT} {command}: {e}"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn required() -> bool {
    std::env::var_os("ALLOT_REQUIRE_APISERVER").is_some()
}

/// The value of `name` in the script's `env` file (shell lines `NAME='value'`).
fn env_value(env_file: &str, name: &str) -> String {
    env_file
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix('='))
        .map(|value| value.trim().trim_matches('\'').to_string())
        .unwrap_or_else(|| panic!("no {name} in the API server's env file:\n{env_file}"))
}

impl ApiServer {
    /// Builds (no-op when cached) and starts one with state under a fresh temp dir and ports
    /// base+0 (API), base+1, base+2 (etcd); `None` when this machine cannot run one (build/start
    /// exit 3 or 4) unless env ALLOT_REQUIRE_APISERVER is set, then panic with the script's
    /// stderr. Any other failure panics with stderr.
    pub fn start(port_base: u16) -> Option<ApiServer> {
        let Some(crds) = allot_compiler::test_support::shared(&root(), "crds", "CRDs") else {
            assert!(!required(), "ALLOT_REQUIRE_APISERVER is set but there are no shared CRDs");
            return None;
        };
        let shared = crds.parent().unwrap().to_path_buf();
        let dir = tempfile::Builder::new().prefix("allot-apiserver-").tempdir().unwrap();
        let state = dir.path().join("state");
        let env: Vec<(String, String)> = [
            ("ALLOT_SHARED_DIR", shared.display().to_string()),
            ("ALLOT_APISERVER_STATE", state.display().to_string()),
            ("ALLOT_APISERVER_PORT", port_base.to_string()),
            ("ALLOT_ETCD_PORT", (port_base + 1).to_string()),
            ("ALLOT_ETCD_PEER_PORT", (port_base + 2).to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        for command in ["build", "start"] {
            let output = script(command, &env);
            match output.status.code() {
                Some(0) => {}
                Some(3 | 4) if !required() => {
                    eprintln!("skipped: no real API server here:\n{}", text(&output.stderr));
                    return None;
                }
                _ => {
                    // start stops what it started when it fails; this is for the other ways out.
                    let _ = script("stop", &env);
                    panic!("{SCRIPT} {command} failed ({}):\n{}", output.status, text(&output.stderr));
                }
            }
        }
        let env_file = std::fs::read_to_string(state.join("env"))
            .unwrap_or_else(|e| panic!("{}: {e}", state.join("env").display()));
        let path = |name| PathBuf::from(env_value(&env_file, name));
        Some(ApiServer {
            url: env_value(&env_file, "K8S_URL"),
            ca: path("K8S_CA"),
            cert: path("K8S_CLIENT_CERT"),
            key: path("K8S_CLIENT_KEY"),
            kubeconfig: path("K8S_KUBECONFIG"),
            env,
            _dir: dir,
        })
    }

    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// One request: (HTTP status, body). `body` goes with the content type `content_type`.
    fn request(&self, method: &str, path: &str, body: Option<(&str, &Value)>) -> (u16, String) {
        let mut command = Command::new("curl");
        command
            .args(["-sS", "--max-time", "20", "-X", method, "-H", "Accept: application/json"])
            .arg("--cacert")
            .arg(&self.ca)
            .arg("--cert")
            .arg(&self.cert)
            .arg("--key")
            .arg(&self.key)
            .args(["-w", "\n%{http_code}"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some((content_type, _)) = body {
            command.args(["-H", &format!("Content-Type: {content_type}"), "--data-binary", "@-"]);
            command.stdin(Stdio::piped());
        } else {
            command.stdin(Stdio::null());
        }
        command.arg(format!("{}{path}", self.url));
        let mut child = command.spawn().unwrap_or_else(|e| panic!("curl: {e}"));
        if let Some((_, value)) = body {
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(value.to_string().as_bytes()).unwrap();
        }
        let output = child.wait_with_output().unwrap();
        let stdout = text(&output.stdout);
        assert!(output.status.success(), "curl {method} {path}: {}{}", text(&output.stderr), stdout);
        let (body, code) = stdout.rsplit_once('\n').unwrap_or(("", &stdout));
        let code =
            code.trim().parse().unwrap_or_else(|_| panic!("curl {method} {path}: no status in {stdout}"));
        (code, body.to_string())
    }

    /// `request`, asserting the status is `expected` (any 2xx for `None`): the JSON body.
    fn expect(&self, method: &str, path: &str, body: Option<(&str, &Value)>, expected: Option<u16>) -> Value {
        let (code, text) = self.request(method, path, body);
        let ok = match expected {
            Some(expected) => code == expected,
            None => (200..300).contains(&code),
        };
        assert!(
            ok,
            "{method} {path}: HTTP {code} (wanted {}):\n{text}",
            expected.map_or("2xx".into(), |c| c.to_string())
        );
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{method} {path}: {e}:\n{text}"))
    }

    /// GET a path, the JSON body; panics on a non-2xx status with the body.
    pub fn get(&self, path: &str) -> Value {
        self.expect("GET", path, None, None)
    }

    /// POST an object to a collection path, asserting 201; returns the created object.
    pub fn create(&self, collection: &str, object: &Value) -> Value {
        self.expect("POST", collection, Some(("application/json", object)), Some(201))
    }

    /// PATCH an object with application/merge-patch+json, asserting 200.
    pub fn patch(&self, object_path: &str, patch: &Value) -> Value {
        self.expect("PATCH", object_path, Some(("application/merge-patch+json", patch)), Some(200))
    }

    /// DELETE an object, asserting 200.
    pub fn delete(&self, object_path: &str) -> Value {
        self.expect("DELETE", object_path, None, Some(200))
    }

    /// PATCH `{object_path}/status` with application/merge-patch+json, asserting 200.
    pub fn patch_status(&self, object_path: &str, patch: &Value) -> Value {
        let path = format!("{object_path}/status");
        self.expect("PATCH", &path, Some(("application/merge-patch+json", patch)), Some(200))
    }

    /// Creates tests/kueue/workload-crd.yaml (read with serde-saphyr, then posted as JSON) and
    /// waits until `/apis/kueue.x-k8s.io/v1beta2/workloads` lists (up to 60 s).
    pub fn create_workload_crd(&self) {
        let file = root().join("tests/kueue/workload-crd.yaml");
        let yaml = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let crd: Value = serde_saphyr::from_str(&yaml).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        self.create(CRDS, &crd);
        let list = "/apis/kueue.x-k8s.io/v1beta2/workloads";
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (code, text) = self.request("GET", list, None);
            if code == 200 {
                return;
            }
            assert!(Instant::now() < deadline, "{list} is not served after 60 s: HTTP {code}:\n{text}");
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        let output = script("stop", &self.env);
        if !output.status.success() {
            eprintln!("{SCRIPT} stop failed ({}):\n{}", output.status, text(&output.stderr));
        }
    }
}
