"""The worker and Redis manifests: valid against the offline Kubernetes schemas, one GPU a worker,
the queue where the workers look for it."""

from __future__ import annotations

import pytest
import yaml

from tests.paths import REPO_ROOT

K8S = REPO_ROOT / "configs" / "deploy" / "k8s"


@pytest.mark.parametrize("name", ["workers.yaml", "redis.yaml"])
def test_the_manifests_validate(name: str) -> None:
    import kubernetes_validate

    for doc in yaml.safe_load_all((K8S / name).read_text()):
        kubernetes_validate.validate(doc, "1.32.0", strict=True)


def test_each_worker_has_one_gpu_and_finds_the_queue() -> None:
    worker = next(yaml.safe_load_all((K8S / "workers.yaml").read_text()))
    spec = worker["spec"]["template"]["spec"]
    container = spec["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert container["command"][-4:] == ["main.py", "worker", "--concurrency", "1"]
    env = {e["name"]: e["value"] for e in container["env"]}
    services = [d for d in yaml.safe_load_all((K8S / "redis.yaml").read_text()) if d["kind"] == "Service"]
    host = services[0]["metadata"]["name"]
    assert env["FACECAST_BROKER_URL"] == f"redis://{host}:6379/0"
    # A stopping worker gets the time to finish its chunk.
    assert spec["terminationGracePeriodSeconds"] >= 60
