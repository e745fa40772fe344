from importlib.metadata import version

import danlu


def test_version_matches_installed_metadata():
    assert danlu.__version__ == version("danlu")
