"""A small fake Kubernetes API server on 127.0.0.1 for tests (stdlib ``http.server`` in a thread).

Good enough for the real ``KubernetesPodOperator`` (apache-airflow-providers-cncf-kubernetes 10.25,
synchronous mode) and the ``kubernetes`` client: it is a fake, not a cluster — no scheduler, no
kubelet; pods move through their phases on a script the test controls.

Start and stop it with the context manager; point clients at it with the kubeconfig it writes::

    with FakeKubernetesApi() as api:
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")   # KPO config_file=, or the
        # connection AIRFLOW_CONN_KUBERNETES_DEFAULT='{"conn_type": "kubernetes",
        #                                             "extra": {"kube_config_path": "<kubeconfig>"}}'
        api.add_node("gpu-node-1", labels={...}, taints=[...])
        api.script_pods(name_prefix="acme-check-", log=lambda pod: "...", exit_code=0)
        api.script_pods(labels={"app": "eval"}, log="done\\n", exit_code=1)
        ...run the code under test...
        api.requests            # every request: method, path, query, body (parsed JSON)
        api.created_pods()      # pod manifests as POSTed
        api.node_patches()      # (node, patch body) for every PATCH of a node
        api.fail("PATCH", r"/api/v1/nodes/.*", status=500)   # make calls fail (a broken API)

What it serves (``/api/v1``): pods (create, get, list with ``labelSelector`` — ``k=v``, ``k!=v``,
``k``, ``!k`` —, merge-patch, delete), ``pods/<name>/log`` (``timestamps`` adds RFC 3339 times,
``follow`` returns the whole log and closes), ``events`` (``fieldSelector=involvedObject.name=…``:
a ``Scheduled`` event per pod, a ``Warning`` for pods that never start), nodes (list, get, patch:
metadata maps are merged, ``spec`` fields replaced — as a strategic merge patch does for
``unschedulable`` and ``taints``). Unknown paths answer 404 with a Kubernetes ``Status``.

Pod life, per script (first matching script wins, by name prefix and/or labels; unscripted pods
succeed with an empty log): ``Pending`` for ``pending_reads`` reads of the pod, then ``Running``
until its log is read or ``running_reads`` more reads pass, then ``Succeeded`` (exit code 0) or
``Failed`` (``exit_code`` is a number or a function of the pod manifest). ``never_starts=True`` keeps it ``Pending`` (scheduled, image pull backing off) for ever.
``log`` is a string or a function of the pod manifest (e.g. to print a rank's report from its env).
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class PodScript:
    name_prefix: str | None = None
    labels: dict[str, str] | None = None
    log: str | Callable[[dict], str] = ""
    exit_code: int | Callable[[dict], int] = 0
    pending_reads: int = 1
    running_reads: int = 3
    never_starts: bool = False

    def matches(self, pod: dict) -> bool:
        name = pod["metadata"].get("name", "")
        labels = pod["metadata"].get("labels") or {}
        if self.name_prefix is not None and not name.startswith(self.name_prefix):
            return False
        return not self.labels or all(labels.get(k) == v for k, v in self.labels.items())


@dataclass
class _Pod:
    manifest: dict
    script: PodScript
    reads: int = 0
    phase: str = "Pending"
    log_read: bool = False
    started: str = field(default_factory=_now)
    exit_code: int = 0


@dataclass
class _Failure:
    method: str
    path: re.Pattern[str]
    status: int
    times: int | None


class FakeKubernetesApi:
    """The fake API server (module docstring). Use as a context manager: it stops what it started."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.pods: dict[tuple[str, str], _Pod] = {}
        self.nodes: dict[str, dict] = {}
        self._scripts: list[PodScript] = []
        self._failures: list[_Failure] = []
        self._lock = threading.RLock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> FakeKubernetesApi:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        api = self

        class Handler(_Handler):
            fake = api

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-kube-api", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=10)
            self._server = None

    @property
    def url(self) -> str:
        assert self._server is not None, "the fake API is not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def write_kubeconfig(self, path: Path, namespace: str = "default") -> Path:
        """A kubeconfig (JSON is valid YAML) pointing at this server, no credentials."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": "fake-token"}}],
            "contexts": [
                {"name": "fake", "context": {"cluster": "fake", "user": "fake", "namespace": namespace}}
            ],
            "current-context": "fake",
        }
        Path(path).write_text(json.dumps(config))
        return Path(path)

    # --- what the test controls ------------------------------------------------------------
    def script_pods(
        self, name_prefix: str | None = None, labels: dict[str, str] | None = None, **how: Any
    ) -> PodScript:
        script = PodScript(name_prefix=name_prefix, labels=labels, **how)
        with self._lock:
            self._scripts.append(script)
        return script

    def add_node(
        self, name: str, labels: dict[str, str] | None = None, taints: list[dict] | None = None
    ) -> dict:
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "uid": str(uuid.uuid4()), "labels": {"kubernetes.io/hostname": name, **(labels or {})},
                         "annotations": {}, "creationTimestamp": _now(), "resourceVersion": "1"},
            "spec": {"taints": list(taints or [])},
            "status": {"conditions": [{"type": "Ready", "status": "True"}],
                       "capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "8"}},
        }  # fmt: skip
        with self._lock:
            self.nodes[name] = node
        return node

    def add_pod(self, manifest: dict, phase: str = "Failed") -> None:
        """A pod that already exists (e.g. a crashed job's worker), in ``phase``."""
        namespace = manifest["metadata"].get("namespace", "default")
        manifest = json.loads(json.dumps(manifest))
        manifest["metadata"].setdefault("uid", str(uuid.uuid4()))
        with self._lock:
            pod = _Pod(manifest, PodScript(exit_code=0 if phase == "Succeeded" else 1), phase=phase)
            pod.exit_code = pod.script.exit_code
            self.pods[(namespace, manifest["metadata"]["name"])] = pod

    def fail(self, method: str, path_regex: str, status: int = 500, times: int | None = None) -> None:
        """Answer matching requests with ``status`` (``times`` times, or always)."""
        with self._lock:
            self._failures.append(_Failure(method.upper(), re.compile(path_regex), status, times))

    # --- what the test reads ---------------------------------------------------------------
    def created_pods(self) -> list[dict]:
        return [r["body"] for r in self.requests if r["method"] == "POST" and r["path"].endswith("/pods")]

    def node_patches(self) -> list[tuple[str, dict]]:
        return [
            (r["path"].rsplit("/", 1)[1], r["body"])
            for r in self.requests
            if r["method"] == "PATCH" and r["path"].startswith("/api/v1/nodes/")
        ]

    # --- internals -------------------------------------------------------------------------
    def _failure_for(self, method: str, path: str) -> int | None:
        with self._lock:
            for failure in self._failures:
                if failure.method == method and failure.path.fullmatch(path) and failure.times != 0:
                    if failure.times is not None:
                        failure.times -= 1
                    return failure.status
        return None

    def _script_for(self, manifest: dict) -> PodScript:
        for script in self._scripts:
            if script.matches(manifest):
                return script
        return PodScript()

    def _advance(self, pod: _Pod) -> None:
        """One read of the pod: move it along its script."""
        script = pod.script
        if pod.phase in ("Succeeded", "Failed") or script.never_starts:
            return
        pod.reads += 1
        if pod.phase == "Pending" and pod.reads > script.pending_reads:
            pod.phase = "Running"
            pod.reads = 0
        elif pod.phase == "Running" and (pod.log_read or pod.reads > script.running_reads):
            code = script.exit_code
            pod.exit_code = code(pod.manifest) if callable(code) else code
            pod.phase = "Succeeded" if pod.exit_code == 0 else "Failed"

    def _log_text(self, pod: _Pod) -> str:
        log = pod.script.log
        return log(pod.manifest) if callable(log) else log

    def pod_view(self, pod: _Pod) -> dict:
        manifest = json.loads(json.dumps(pod.manifest))
        containers = manifest.get("spec", {}).get("containers") or [{"name": "base"}]
        scheduled = {"type": "PodScheduled", "status": "True", "lastTransitionTime": pod.started}
        statuses = []
        for container in containers:
            if pod.phase == "Pending":
                state = {"waiting": {"reason": "ContainerCreating"}}
            elif pod.phase == "Running":
                state = {"running": {"startedAt": pod.started}}
            else:
                code = pod.exit_code
                state = {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                                        "startedAt": pod.started, "finishedAt": _now()}}  # fmt: skip
            statuses.append({"name": container["name"], "state": state, "ready": pod.phase == "Running",
                             "restartCount": 0, "image": container.get("image", ""), "imageID": ""})  # fmt: skip
        manifest["status"] = {
            "phase": pod.phase,
            "conditions": [scheduled],
            "startTime": pod.started,
            "containerStatuses": statuses,
        }
        return manifest


_SELECTOR = re.compile(r"^(?P<not>!)?(?P<key>[^=!]+)(?:(?P<op>!=|==|=)(?P<value>.*))?$")


def _matches_selector(labels: dict[str, str], selector: str) -> bool:
    for term in filter(None, (t.strip() for t in selector.split(","))):
        parsed = _SELECTOR.match(term)
        if parsed is None:
            return False
        key, op, value = parsed["key"], parsed["op"], parsed["value"]
        if parsed["not"]:
            if key in labels:
                return False
        elif op is None:
            if key not in labels:
                return False
        elif op == "!=":
            if labels.get(key) == value:
                return False
        elif labels.get(key) != value:
            return False
    return True


def _merge(target: dict, patch: dict) -> None:
    """Merge-patch ``patch`` into ``target`` (maps merged, anything else replaced, None deletes)."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = json.loads(json.dumps(value))


class _Handler(BaseHTTPRequestHandler):
    fake: FakeKubernetesApi
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # keep test output clean
        return

    def _reply(self, status: int, body: Any, content_type: str = "application/json") -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _status(self, code: int, reason: str, message: str) -> None:
        self._reply(code, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                           "message": message, "reason": reason, "code": code})  # fmt: skip

    def _handle(self, method: str) -> None:
        fake = self.fake
        parts = urlsplit(self.path)
        path, query = parts.path.rstrip("/"), {k: v[-1] for k, v in parse_qs(parts.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        with fake._lock:
            fake.requests.append({"method": method, "path": path, "query": query, "body": body,
                                  "content_type": self.headers.get("Content-Type")})  # fmt: skip
        failure = fake._failure_for(method, path)
        if failure is not None:
            return self._status(failure, "InternalError", f"fake failure injected for {method} {path}")
        route = re.fullmatch(r"/api/v1/namespaces/([^/]+)/(pods|events)(?:/([^/]+))?(?:/(log))?", path)
        node_route = re.fullmatch(r"/api/v1/nodes(?:/([^/]+))?", path)
        with fake._lock:
            if route:
                return self._pods(
                    method, route.group(1), route.group(2), route.group(3), route.group(4), query, body
                )
            if node_route:
                return self._nodes(method, node_route.group(1), query, body)
        return self._status(404, "NotFound", f"the fake API does not serve {method} {path}")

    def _pods(self, method, namespace, kind, name, sub, query, body) -> None:
        fake = self.fake
        if kind == "events":
            wanted = (query.get("fieldSelector") or "").removeprefix("involvedObject.name=")
            items = []
            for (ns, pod_name), pod in fake.pods.items():
                if ns != namespace or (wanted and pod_name != wanted):
                    continue
                items.append(_event(pod, "Normal", "Scheduled", f"Successfully assigned {ns}/{pod_name}"))
                if pod.script.never_starts:
                    items.append(_event(pod, "Warning", "BackOff", "Back-off pulling image"))
            return self._reply(
                200,
                {
                    "kind": "EventList",
                    "apiVersion": "v1",
                    "metadata": {"resourceVersion": "1"},
                    "items": items,
                },
            )
        if name is None:
            if method == "POST":
                pod_name = body["metadata"]["name"]
                if (namespace, pod_name) in fake.pods:
                    return self._status(409, "AlreadyExists", f'pods "{pod_name}" already exists')
                manifest = json.loads(json.dumps(body))
                manifest["metadata"].update(namespace=namespace, uid=str(uuid.uuid4()),
                                            creationTimestamp=_now(), resourceVersion="1")  # fmt: skip
                pod = _Pod(manifest, fake._script_for(manifest))
                fake.pods[(namespace, pod_name)] = pod
                return self._reply(201, fake.pod_view(pod))
            selector = query.get("labelSelector", "")
            items = [
                fake.pod_view(pod)
                for (ns, _), pod in fake.pods.items()
                if ns == namespace
                and _matches_selector(pod.manifest["metadata"].get("labels") or {}, selector)
            ]
            return self._reply(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items})
        pod = fake.pods.get((namespace, name))
        if pod is None:
            return self._status(404, "NotFound", f'pods "{name}" not found')
        if sub == "log":
            if pod.phase == "Pending":
                return self._status(
                    400, "BadRequest", f'container "base" in pod "{name}" is waiting to start'
                )
            pod.log_read = True
            text = fake._log_text(pod)
            if query.get("timestamps") == "true":
                stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f000Z")
                text = "".join(f"{stamp} {line}\n" for line in text.splitlines())
            return self._reply(200, text.encode(), "text/plain")
        if method == "GET":
            fake._advance(pod)
            return self._reply(200, fake.pod_view(pod))
        if method == "PATCH":
            _merge(pod.manifest, body or {})
            return self._reply(200, fake.pod_view(pod))
        if method == "DELETE":
            del fake.pods[(namespace, name)]
            return self._reply(200, fake.pod_view(pod))
        return self._status(405, "MethodNotAllowed", method)

    def _nodes(self, method, name, query, body) -> None:
        fake = self.fake
        if name is None:
            selector = query.get("labelSelector", "")
            items = [n for n in fake.nodes.values() if _matches_selector(n["metadata"]["labels"], selector)]
            return self._reply(200, {"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": items})
        node = fake.nodes.get(name)
        if node is None:
            return self._status(404, "NotFound", f'nodes "{name}" not found')
        if method == "PATCH":
            for key, value in (body or {}).items():
                if key == "spec":
                    node["spec"].update(json.loads(json.dumps(value)))
                elif isinstance(value, dict):
                    _merge(node.setdefault(key, {}), value)
            node["metadata"]["resourceVersion"] = str(int(node["metadata"]["resourceVersion"]) + 1)
        return self._reply(200, node)

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")


def _event(pod: _Pod, kind: str, reason: str, message: str) -> dict:
    meta = pod.manifest["metadata"]
    return {
        "metadata": {
            "name": f"{meta['name']}.{reason.lower()}",
            "namespace": meta.get("namespace"),
            "resourceVersion": "1",
        },
        "involvedObject": {"kind": "Pod", "name": meta["name"], "namespace": meta.get("namespace")},
        "type": kind,
        "reason": reason,
        "message": message,
        "firstTimestamp": pod.started,
        "lastTimestamp": pod.started,
    }
