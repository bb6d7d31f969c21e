"""The deployment files: Kubernetes manifests against the offline schemas, the compose file parsed."""

from __future__ import annotations

import pytest
import yaml

from tests.paths import REPO_ROOT

DEPLOY = REPO_ROOT / "configs" / "deploy"


@pytest.mark.parametrize("name", ["deployment.yaml", "service.yaml"])
def test_kubernetes_manifests_validate(name: str) -> None:
    import kubernetes_validate

    for doc in yaml.safe_load_all((DEPLOY / "k8s" / name).read_text()):
        kubernetes_validate.validate(doc, "1.32.0", strict=True)


def test_the_deployment_asks_for_a_gpu_and_probes_health() -> None:
    doc = yaml.safe_load((DEPLOY / "k8s" / "deployment.yaml").read_text())
    container = doc["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert container["readinessProbe"]["httpGet"]["path"] == "/v1/health"


def test_compose_reserves_the_gpu_with_video() -> None:
    doc = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    devices = doc["services"]["facecast"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["capabilities"] == ["gpu", "video"]


def test_the_image_runs_as_a_user_and_checks_health() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    assert "USER facecast" in text and "HEALTHCHECK" in text and "/v1/health" in text
    assert text.startswith("#") and "FROM nvidia/cuda:" in text
