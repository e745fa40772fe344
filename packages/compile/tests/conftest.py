"""Every test gets an empty graph cache of its own (the kernel caches stay shared): a graph
compiled by an earlier test must not turn a later test's compile into a cache hit that skips
what it checks. The graph cache's own tests are in test_graph_cache.py."""

import pytest

import danlu


@pytest.fixture(autouse=True)
def _own_graph_cache(tmp_path_factory):
    with danlu.config.patch(cache_dir=str(tmp_path_factory.mktemp("graph_cache"))):
        yield
