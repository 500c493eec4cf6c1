"""The snapshot loader and catalog entries: an InstanceType the user wrote wins over the
catalog's entry of the same name, in either file order, with a warning; two of the user's own
are still an error."""

from __future__ import annotations

import pytest
import yaml

from allocator.catalog import aws
from allocator.snapshot import SnapshotError, load_documents, load_files
from tests.scheduling.k8s import instance_type


def _catalog_text(*names: str) -> str:
    docs = aws.instance_types(
        "us-west-2", None, aws.CatalogOptions(names=frozenset(names), mig=False)
    )
    return yaml.safe_dump_all(docs)


def _own(name: str) -> str:
    return yaml.safe_dump(instance_type(name, cpu="4", memory="30Gi"))


@pytest.mark.parametrize("catalog_first", [True, False])
def test_the_users_instance_type_wins_over_the_catalogs(catalog_first):
    files = [
        ("catalog.yaml", _catalog_text("g6e.xlarge", "g6e.2xlarge")),
        ("mine.yaml", _own("g6e.xlarge")),
    ]
    if not catalog_first:
        files.reverse()
    loaded = load_files(files)
    assert set(loaded.instance_types) == {"g6e.xlarge", "g6e.2xlarge"}
    assert str(loaded.instance_types["g6e.xlarge"].capacity["cpu"]) == "4"
    kept = [raw for kind, raw in loaded.documents if raw["metadata"]["name"] == "g6e.xlarge"]
    assert len(kept) == 1 and "annotations" not in kept[0]["metadata"]
    (warning,) = [w for w in loaded.warnings if "g6e.xlarge" in w]
    assert "the catalog's entry is left out, the one of mine.yaml doc 1 is kept" in warning
    # The stored documents load to the same objects.
    again = load_documents(loaded.documents)
    assert str(again.instance_types["g6e.xlarge"].capacity["cpu"]) == "4"


def test_two_catalog_entries_keep_the_first():
    loaded = load_files(
        [("a.yaml", _catalog_text("p5.4xlarge")), ("b.yaml", _catalog_text("p5.4xlarge"))]
    )
    assert len(loaded.instance_types) == 1
    assert any("b.yaml doc 1 InstanceType p5.4xlarge" in w for w in loaded.warnings)


def test_two_of_the_users_own_are_still_an_error():
    with pytest.raises(SnapshotError) as info:
        load_files([("a.yaml", _own("g6e.xlarge")), ("b.yaml", _own("g6e.xlarge"))])
    assert "b.yaml doc 1 InstanceType g6e.xlarge: metadata.name: duplicate InstanceType" in str(
        info.value.problems
    )
