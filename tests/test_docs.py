"""The reference pages in docs/ stay in step with the code they describe."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from allocator.cli import build_parser
from allocator.featuregates import GATE_NAMES, KUBERNETES_VERSIONS, gate_stage
from allocator.snapshot.loader import KINDS
from allocator.snapshot.unsimulated import FIELDS
from allocator.snapshot.unsimulated import KINDS as UNSIMULATED_KINDS

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
REFERENCE = [
    "SNAPSHOT.md",
    "CLI.md",
    "SIMULATION.md",
    "RESULT.md",
    "TRACE.md",
    "API.md",
    "FEATURE_GATES.md",
]
SCHEMA = json.loads((ROOT / "allocator" / "result_schema.json").read_text())


def page(name: str) -> str:
    return (DOCS / name).read_text()


def test_the_readme_links_every_reference_page_and_nothing_outside_the_repository():
    readme = (ROOT / "README.md").read_text()
    for name in [*REFERENCE, "WEB.md"]:
        assert f"(docs/{name})" in readme, name
    for text in [
        readme,
        *(page(name) for name in [*REFERENCE, "WEB.md", "CONTRIBUTING.md", "INTERFACES.md"]),
    ]:
        assert "../shared" not in text and "CONTRACT" not in text


@pytest.mark.parametrize("name", REFERENCE)
def test_each_page_says_what_it_is_kept_in_step_with(name):
    assert page(name).split("\n")[2].startswith("> Kept in step with")


@pytest.mark.parametrize("name", [*REFERENCE, "WEB.md", "CONTRIBUTING.md", "INTERFACES.md"])
def test_links_between_pages_resolve(name):
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", page(name)):
        if not target.startswith("http"):
            assert (DOCS / target).exists(), f"{name} links {target}"


def test_every_top_level_result_field_is_documented():
    text = page("RESULT.md")
    for field in SCHEMA["properties"]:
        assert f"| `{field}` |" in text, field


@pytest.mark.parametrize("definition", ["pod", "claim", "device", "nodeClaim", "funnel", "pool"])
def test_every_field_of_the_result_entries_is_documented(definition):
    text = page("RESULT.md")
    for field in SCHEMA["$defs"][definition]["properties"]:
        assert f"`{field}`" in text, f"{definition}.{field}"


def test_every_suggestion_kind_is_documented():
    kinds = SCHEMA["$defs"]["suggestion"]["properties"]["kind"]["enum"]
    text = page("RESULT.md")
    assert all(f"`{kind}`" in text for kind in kinds)


def test_every_recognised_kind_is_in_the_snapshot_page():
    text = page("SNAPSHOT.md")
    for kind in KINDS:
        assert f"| `{kind}` |" in text, kind


def test_every_row_of_the_not_simulated_table_is_in_the_snapshot_page():
    text = page("SNAPSHOT.md")
    for row in FIELDS:
        assert row.field.split("/")[0].split("[]")[-1].strip(". ") in text, row.field
    for row in UNSIMULATED_KINDS:
        assert f"`{row.kind}`" in text, row.kind


def test_every_option_of_the_command_line_is_in_the_cli_page():
    text = page("CLI.md")
    simulate = build_parser()._subparsers._group_actions[0].choices["simulate"]
    for action in simulate._actions:
        for option in action.option_strings:
            if option not in ("-h", "--help"):
                assert f"`{option}" in text or f"{option}`" in text, option


def test_the_preset_table_is_the_code_s():
    rows = {}
    for line in page("FEATURE_GATES.md").splitlines():
        match = re.match(r"^\| `(DRA\w+)` \| (.+) \|$", line)
        cells = [cell.strip() for cell in match.group(2).split("|")] if match else []
        if cells and all(re.match(r"^((on|off) \(\w+\)|—)$", cell) for cell in cells):
            rows[match.group(1)] = cells
    assert set(rows) == set(GATE_NAMES)
    for name, cells in rows.items():
        for version, cell in zip(KUBERNETES_VERSIONS, cells, strict=True):
            stage = gate_stage(name, version)
            expected = "—" if stage is None else f"{'on' if stage[1] else 'off'} ({stage[0]})"
            assert cell == expected, f"{name} {version}"
