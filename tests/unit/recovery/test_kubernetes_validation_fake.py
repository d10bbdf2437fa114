"""Validation on Kubernetes through the real ``kubernetes`` client against the fake API server on loopback
(no cluster can run here): the pod pinned to the cordoned node, its log read back, the uncordon patch."""

from __future__ import annotations

from pathlib import Path

import pytest

from acme.lake import Lake
from acme.recovery.kubernetes_backend import KubernetesBackend
from acme.recovery.node_selftest import ValidationSpec, simulated_node_output
from acme.recovery.validation import node_log, validate_node, validation_spec
from acme.settings import recovery as recovery_settings
from acme.settings import validation as validation_settings
from tests.fakes.kubernetes_api import FakeKubernetesApi

OURS = {"key": "acme.io/faulty", "value": "true", "effect": "NoSchedule"}
OTHER = {"key": "team", "value": "llm", "effect": "NoSchedule"}


@pytest.fixture
def api(tmp_path: Path):
    with FakeKubernetesApi() as fake:
        for node in ("gpu-1", "gpu-2"):
            fake.add_node(node, taints=[OTHER, OURS])
            fake.nodes[node]["spec"]["unschedulable"] = True

        def log(pod: dict) -> str:
            node = pod["spec"]["nodeName"]
            spec = ValidationSpec("v", ranks=8, dcgm_level=2, timeout_s=60)
            return simulated_node_output(
                node, spec, "dcgm_diag" if node == "gpu-2" else None, "2026-12-02T08:00:00Z"
            )

        fake.script_pods(name_prefix="acme-validate-", log=log)
        yield fake


def backend_for(api: FakeKubernetesApi, tmp_path: Path) -> KubernetesBackend:
    from kubernetes import client, config

    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    backend = KubernetesBackend(
        recovery_settings(), client.CoreV1Api(config.new_client_from_config(str(kubeconfig)))
    )
    backend.poll_s = 0.01
    return backend


def test_a_passing_node_is_uncordoned_and_a_failing_one_keeps_its_cordon_fake(api, tmp_path, monkeypatch):
    monkeypatch.setenv("ACME_RECOVERY_NAMESPACE", "training")
    lake = Lake(str(tmp_path / "lake"))
    backend = backend_for(api, tmp_path)
    settings = validation_settings()
    spec = validation_spec("run-7", settings, recovery_settings())
    assert backend.cordoned(["gpu-1", "gpu-2"]) == {"gpu-1", "gpu-2"}

    passed = validate_node(lake, backend, "k8s", "gpu-1", spec, settings, False)
    failed = validate_node(lake, backend, "k8s", "gpu-2", spec, settings, False)

    assert passed["uncordoned"] and not failed["uncordoned"] and failed["failed_checks"] == ["dcgm_diag"]
    pods = api.created_pods()
    assert [p["spec"]["nodeName"] for p in pods] == ["gpu-1", "gpu-2"]
    container = pods[0]["spec"]["containers"][0]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "8"}
    assert container["command"][:2] == ["sh", "-c"] and "torch.distributed.run" in container["command"]
    assert {t["key"] for t in pods[0]["spec"]["tolerations"]} == {
        "acme.io/faulty",
        "node.kubernetes.io/unschedulable",
    }
    assert not api.pods, "validation pods are deleted once read"
    assert [node for node, _ in api.node_patches()] == ["gpu-1"]
    assert api.nodes["gpu-1"]["spec"] == {"taints": [OTHER], "unschedulable": False}
    assert api.nodes["gpu-2"]["spec"]["unschedulable"] is True
    assert backend.cordoned(["gpu-1", "gpu-2"]) == {"gpu-2"}
    evidence = node_log(lake, "k8s", "gpu-2", "run-7").records()[0]["result"]
    dcgm = next(c for c in evidence["checks"] if c["check"] == "dcgm_diag")
    assert dcgm["figures"]["failed_tests"] == ["memory"] and dcgm["figures"]["exit_status"] == 226

    # Again: the recorded verdicts are reused, no pod is started and nothing is patched twice.
    validate_node(lake, backend, "k8s", "gpu-1", spec, settings, False)
    validate_node(lake, backend, "k8s", "gpu-2", spec, settings, False)
    assert len(api.created_pods()) == 2 and len(api.node_patches()) == 1
