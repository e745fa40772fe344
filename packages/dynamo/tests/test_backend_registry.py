"""The one backend registry: plain backends and factories by name, callables as they are."""

import pytest

from danlu_dynamo import backends


def test_plain_backend_factory_and_callable():
    def plain(gm, example_inputs):
        return gm.forward

    seen = []

    def factory(mode=None, options=None):
        seen.append((mode, options))
        return plain

    backends.register_backend("plain_for_test", plain)
    backends.register_backend("factory_for_test")(factory)
    try:
        assert backends.lookup_backend("plain_for_test") is plain
        assert backends.lookup_backend("factory_for_test", mode="m", options={"k": 1}) is plain
        assert seen == [("m", {"k": 1})]
        assert backends.lookup_backend(plain) is plain
        assert {"eager", "plain_for_test", "factory_for_test"} <= set(backends.registered_names())
    finally:
        backends._REGISTRY.pop("plain_for_test", None)
        backends._REGISTRY.pop("factory_for_test", None)


def test_unknown_names_and_wrong_types():
    with pytest.raises(ValueError, match="unknown backend 'no_such'.*eager"):
        backends.lookup_backend("no_such")
    with pytest.raises(TypeError, match="callable or a name"):
        backends.lookup_backend(3)
