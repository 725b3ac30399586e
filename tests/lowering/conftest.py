"""Fixtures of the lowering tests."""
import pytest

from tests.helpers import lowering_harness


@pytest.fixture(scope="session", autouse=True)
def _harness_builds_in_pytest_temp(tmp_path_factory):
    """The harness builds the libraries it calls directly under pytest's temporary folder."""
    lowering_harness.build_root = tmp_path_factory.mktemp("lowering-harness")
