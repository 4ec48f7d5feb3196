"""Shared helpers of the pytest suites: the package comes from the build tree (PYTHONPATH set
by CTest, tests/python/CMakeLists.txt), the CLI from MACTUNE_CLI, data from the source tree."""

import os
import pathlib

import numpy as np
import pytest

SOURCE_DIR = pathlib.Path(os.environ.get("MACTUNE_SOURCE_DIR",
                                         pathlib.Path(__file__).resolve().parents[2]))
TRACES = SOURCE_DIR / "data" / "traces"


def _find_tinylm():
    """$MACTUNE_TINYLM, else shared/data/models/tinylm beside the checkout or an ancestor of
    it (the 46 MB model is never committed)."""
    if os.environ.get("MACTUNE_TINYLM"):
        return pathlib.Path(os.environ["MACTUNE_TINYLM"])
    for d in SOURCE_DIR.resolve().parents:
        p = d / "shared" / "data" / "models" / "tinylm" / "tinylm.safetensors"
        if p.exists():
            return p
    return SOURCE_DIR.parent / "shared" / "data" / "models" / "tinylm" / "tinylm.safetensors"


TINYLM = _find_tinylm()


def random_values(rng, shape):
    """Uniform in +-[0.25, 1): random, never zero (the project's rule for test inputs)."""
    mag = rng.uniform(0.25, 1.0, size=shape)
    sign = np.where(rng.random(size=shape) < 0.5, -1.0, 1.0)
    return (mag * sign).astype(np.float32)


def repetitive_queries(rng, steps, batch, heads, dim, motifs=4, noise=0.02):
    """Queries drawn from a few motifs plus small noise, so that MAC hits (and misses)."""
    base = random_values(rng, (motifs, batch, heads, dim)) * 2.0
    pick = rng.integers(0, motifs, size=steps)
    q = base[pick] + noise * rng.standard_normal((steps, batch, heads, dim))
    return np.ascontiguousarray(q.astype(np.float32))


@pytest.fixture
def rng():
    return np.random.default_rng(20261201)


@pytest.fixture
def cli():
    path = os.environ.get("MACTUNE_CLI")
    if not path or not os.path.exists(path):
        pytest.skip("MACTUNE_CLI is not set to the mactune binary (CTest sets it)")
    return path
