"""A model wrapper's calls through an inference service: the process's shared one once attached
(its calls batched with every other stream's), else a private one that runs each call at once.

The private service's runner holds the session, never the wrapper: no reference cycle, so a
wrapper dropped at a model reload is freed at once (the app freezes its heap once the first models
are loaded; a cycle would then keep the wrapper and its session for good).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from models.runtime.batch_window import BatchPolicy
from models.runtime.inference_service import HostBatchRunner, InferenceService, ServiceClient, Ticket


def private_client(session: Any, output: str, label: str) -> ServiceClient:
    """A service of one's own on `session` (each call run at once), fetching output `output`."""
    names = [output]
    runner = HostBatchRunner(lambda feeds: session.run(names, dict(feeds)))
    return InferenceService([runner], BatchPolicy(max_batch=1), label).client(label)


class ServedModel:
    """Where one wrapper instance sends its model calls (module doc)."""

    def __init__(self, session: Any, output: str, label: str) -> None:
        self.client: ServiceClient = private_client(session, output, label)

    def attach(self, client: ServiceClient) -> None:
        """Send the calls through `client` (a shared service's stream) from now on."""
        self.client = client

    def submit(self, feeds: Mapping[str, Any]) -> Ticket:
        return self.client.submit(feeds)

    def run(self, feeds: Mapping[str, Any]) -> npt.NDArray[Any]:
        """The first output for `feeds` (inputs with a batch of 1), as an array."""
        return np.asarray(self.client.run(feeds)[0])


__all__ = ["ServedModel", "private_client"]
