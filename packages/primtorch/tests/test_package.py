from importlib.metadata import version

import danlu_primtorch


def test_version_matches_installed_metadata():
    assert danlu_primtorch.__version__ == version("danlu-primtorch")
