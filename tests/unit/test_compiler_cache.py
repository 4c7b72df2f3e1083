from __future__ import annotations

import json

import pytest

from ortdist.compiler_cache import CACHES, compiler_cache
from ortdist.errors import RecipeError


def test_ccache_env_keeps_hits_across_build_trees_and_ignores_foreign_vars() -> None:
    env = CACHES["ccache"].env({"CCACHE_MAXSIZE": "5G", "CCACHE_DIR": "/home/me/.ccache", "AWS_REGION": "x"})
    assert env["CCACHE_DIR"] == "/ortdist/ccache"  # the bind mount, never a host path
    assert env["CCACHE_MAXSIZE"] == "5G"
    assert env["CCACHE_NOHASHDIR"] == "true" and env["CCACHE_BASEDIR"] == "/ortdist"
    assert "AWS_REGION" not in env


def test_sccache_passes_its_remote_backend_configuration_through() -> None:
    host = {
        "SCCACHE_BUCKET": "ort-cache",
        "SCCACHE_REGION": "eu-west-1",
        "AWS_ACCESS_KEY_ID": "AKIA",
        "SCCACHE_GHA_ENABLED": "true",
        "ACTIONS_CACHE_URL": "https://cache",
        "ACTIONS_RUNTIME_TOKEN": "tok",
        "SCCACHE_DIR": "/host/path",
        "HOME": "/root",
    }
    env = CACHES["sccache"].env(host)
    for key in ("SCCACHE_BUCKET", "SCCACHE_REGION", "AWS_ACCESS_KEY_ID", "SCCACHE_GHA_ENABLED", "ACTIONS_CACHE_URL"):
        assert env[key] == host[key]
    assert env["SCCACHE_DIR"] == "/ortdist/sccache"  # local fallback lives in the bind mount
    assert "HOME" not in env
    assert CACHES["sccache"].launcher == "/ortdist/tools/sccache"


def test_stats_come_back_in_one_shape() -> None:
    ccache_out = "cache_miss\t25\ndirect_cache_hit\t56\npreprocessed_cache_hit\t496\nfiles_in_cache\t9\n"
    assert CACHES["ccache"].parse_stats(ccache_out) == {
        "cache_miss": 25,
        "direct_cache_hit": 56,
        "preprocessed_cache_hit": 496,
    }
    sccache_out = json.dumps(
        {"stats": {"cache_hits": {"counts": {"C/C++": 500, "C": 3}}, "cache_misses": {"counts": {"C/C++": 7}}}}
    )
    assert CACHES["sccache"].parse_stats(sccache_out) == {"cache_hit": 503, "cache_miss": 7}
    assert CACHES["sccache"].parse_stats("not json") == {}


def test_choice_by_name_environment_or_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ORTDIST_COMPILER_CACHE", raising=False)
    assert compiler_cache().name == "ccache"
    monkeypatch.setenv("ORTDIST_COMPILER_CACHE", "sccache")
    assert compiler_cache().name == "sccache"
    assert compiler_cache("ccache").name == "ccache"
    with pytest.raises(RecipeError, match="unknown compiler cache 'sccahe'") as err:
        compiler_cache("sccahe")
    assert "ccache, sccache" in str(err.value.fix)
