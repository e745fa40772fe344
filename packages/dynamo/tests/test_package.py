from importlib.metadata import version

import danlu_dynamo


def test_version_matches_installed_metadata():
    assert danlu_dynamo.__version__ == version("danlu-dynamo")
