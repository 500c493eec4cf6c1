"""Finding the user's kubeconfig as kubectl does: --kubeconfig, $KUBECONFIG (merged), ~/.kube."""

from __future__ import annotations

import os

import pytest
import yaml

from dra_web.kubectl_dra.kubeconfig import KubeconfigError, context_namespace, load_kubeconfig


def _write(path, **config):
    path.write_text(yaml.safe_dump(config))
    return str(path)


def test_kubeconfig_files_merge_first_one_wins(tmp_path):
    first = _write(
        tmp_path / "a",
        clusters=[
            {"name": "prod", "cluster": {"server": "https://a", "certificate-authority": "ca.crt"}}
        ],
        users=[{"name": "me", "user": {"token": "t1"}}],
        contexts=[
            {"name": "prod", "context": {"cluster": "prod", "user": "me", "namespace": "ml"}}
        ],
        **{"current-context": "prod"},
    )
    (tmp_path / "more").mkdir()
    second = _write(
        tmp_path / "more" / "b",
        clusters=[
            {"name": "prod", "cluster": {"server": "https://other"}},
            {"name": "dev", "cluster": {"server": "https://dev"}},
        ],
        users=[{"name": "me", "user": {"token": "t2"}}],
        contexts=[{"name": "dev", "context": {"cluster": "dev", "user": "me"}}],
        **{"current-context": "dev"},
    )
    config = load_kubeconfig(None, {"KUBECONFIG": os.pathsep.join([first, second])})
    assert [c["name"] for c in config["clusters"]] == ["prod", "dev"]
    assert config["clusters"][0]["cluster"]["server"] == "https://a"
    # A relative file is relative to the kubeconfig naming it.
    assert config["clusters"][0]["cluster"]["certificate-authority"] == str(tmp_path / "ca.crt")
    assert config["users"][0]["user"]["token"] == "t1"
    assert config["current-context"] == "prod"
    assert context_namespace(config, None) == "ml"
    assert context_namespace(config, "dev") is None


def test_home_kube_config_is_the_default(tmp_path):
    (tmp_path / ".kube").mkdir()
    _write(
        tmp_path / ".kube" / "config", clusters=[{"name": "c", "cluster": {"server": "https://c"}}]
    )
    assert load_kubeconfig(None, {"HOME": str(tmp_path)})["clusters"][0]["name"] == "c"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("clusters: [\n", "not valid YAML"),
        ("- a\n", "not a kubeconfig"),
        ("users: []\n", "no clusters"),
    ],
)
def test_a_broken_kubeconfig_is_named(tmp_path, content, message):
    path = tmp_path / "config"
    path.write_text(content)
    with pytest.raises(KubeconfigError, match=message):
        load_kubeconfig(str(path), {})
