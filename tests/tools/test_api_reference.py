"""docs/api.md and the README's coverage table are what sprue.tools.api_reference computes from
JAX's names (docs/jax_names.json) and sprue's modules now: adding a function without regenerating
them (`python -m sprue.tools.api_reference`, then the README's table from docs/api.md) fails here."""
from sprue.tools import api_reference


def test_api_reference_is_current():
    assert api_reference.API_MD.read_text() == api_reference.render(), \
        "docs/api.md is stale: run `python -m sprue.tools.api_reference`"


def test_readme_coverage_table_is_current():
    readme = (api_reference.REPO / "README.md").read_text()
    rows = api_reference.summary_rows(api_reference.coverage())
    assert "\n".join(rows) in readme, "the README's coverage table differs from docs/api.md's: copy it from there"


def test_every_name_counted_is_jaxs_and_present_ones_exist():
    cov = api_reference.coverage()
    assert cov["numpy"][0] and "exp" in cov["numpy"][0] and "sum" in cov["numpy"][0]
    for jax_mod, (have, lack) in cov.items():
        assert not set(have) & set(lack)
