from importlib.metadata import version

import danlu_aotautograd


def test_version_matches_installed_metadata():
    assert danlu_aotautograd.__version__ == version("danlu-aotautograd")
