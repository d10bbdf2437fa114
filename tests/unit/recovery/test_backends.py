"""The backend registry: every value ``ACME_RECOVERY_BACKEND`` accepts has a backend, and the setting
chooses it."""

from __future__ import annotations

import pytest

from acme.lake import Lake
from acme.recovery.backend import SimulatedBackend
from acme.recovery.backends import BACKENDS, make_backend
from acme.recovery.slurm_backend import SlurmBackend
from acme.settings import RECOVERY_BACKENDS


def test_every_accepted_backend_name_has_a_backend():
    assert set(BACKENDS) == set(RECOVERY_BACKENDS)


@pytest.mark.parametrize(("name", "kind"), [("simulated", SimulatedBackend), ("slurm", SlurmBackend)])
def test_the_setting_chooses_the_backend(monkeypatch, tmp_path, name, kind):
    monkeypatch.setenv("ACME_RECOVERY_BACKEND", name)
    backend = make_backend("seren", Lake(str(tmp_path)), "job-1", nodes=["n1", "n2"])
    assert isinstance(backend, kind)
