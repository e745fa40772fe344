from importlib.metadata import version

import danlu_inductor


def test_version_matches_installed_metadata():
    assert danlu_inductor.__version__ == version("danlu-inductor")
