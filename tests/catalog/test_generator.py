"""scripts/generate_aws_catalog.py: the shipped aws.json is what the generator builds from
Karpenter's files (written back here in their published formats), and bad sources exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from allocator.catalog import aws

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "generate_aws_catalog.py"


def _markdown(instance_types: dict[str, dict]) -> str:
    """Karpenter's website/.../instance-types.md format (hack/docs/instancetypes_gen)."""
    out = ["---", 'title: "Instance Types"', "---", "## a1 Family", "### `a1.medium`"]
    out += ["#### Labels", " | Label | Value |", " |--|--|"]
    out += [" |node.kubernetes.io/instance-type|a1.medium|"]
    for family in aws.families():
        out.append(f"## {family} Family")
        for name, entry in instance_types.items():
            if entry["family"] != family:
                continue
            out += [f"### `{name}`", "#### Labels", " | Label | Value |", " |--|--|"]
            out += [f" |{k}|{v}|" for k, v in sorted(entry["labels"].items())]
            out += ["#### Resources", " | Resource | Quantity |", " |--|--|"]
            out += [f" |{k}|{v}|" for k, v in sorted(entry["resources"].items())]
    return "\n".join(out) + "\n"


def _pricing_go(prices: dict[str, dict[str, float]], when: str) -> str:
    """Karpenter's pkg/providers/pricing/zz_generated.pricing_*.go format."""
    lines = [
        "package pricing",
        "",
        f"// generated at {when} for us-east-1",
        "",
        "var InitialOnDemandPricesAWS = map[string]map[ec2types.InstanceType]float64{",
    ]
    for region, table in prices.items():
        lines += [f"\t// {region}", f'\t"{region}": {{']
        cells = ", ".join(f'"{name}": {price:f}' for name, price in table.items())
        lines += [f"\t\t{cells},", "\t},"]
    lines.append("}")
    return "\n".join(lines) + "\n"


def _generate(tmp_path: Path, md: str, pricing: list[str]) -> subprocess.CompletedProcess:
    (tmp_path / "instance-types.md").write_text(md)
    args = [sys.executable, str(SCRIPT), "--instance-types-md", str(tmp_path / "instance-types.md")]
    for i, text in enumerate(pricing):
        path = tmp_path / f"zz_generated.pricing_{i}.go"
        path.write_text(text)
        args += ["--pricing", str(path)]
    args += ["--out", str(tmp_path / "aws.json")]
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


def test_regenerating_from_karpenters_formats_gives_the_shipped_catalog(tmp_path):
    shipped = aws.load_data()
    commercial = {"us-east-1": shipped["prices"]["us-east-1"]}
    gov = {r: t for r, t in shipped["prices"].items() if r.startswith("us-gov-")}
    done = _generate(
        tmp_path,
        _markdown(shipped["instanceTypes"]),
        [_pricing_go(commercial, "2026-07-20T13:44:30Z"), _pricing_go(gov, "2026-07-20T13:44:38Z")],
    )
    assert done.returncode == 0, done.stderr
    built = json.loads((tmp_path / "aws.json").read_text())
    for key in ("instanceTypes", "prices", "regions", "gpuModels", "families", "neuron"):
        assert built[key] == shipped[key], key
    assert built["sources"]["instanceTypes"]["file"] == "instance-types.md"
    assert set(built["sources"]["prices"]["generatedAt"].values()) == {
        "2026-07-20T13:44:30Z",
        "2026-07-20T13:44:38Z",
    }


def test_missing_families_are_named_and_exit_2(tmp_path):
    shipped = aws.load_data()["instanceTypes"]
    partial = {n: e for n, e in shipped.items() if e["family"] != "trn2"}
    done = _generate(
        tmp_path, _markdown(partial), [_pricing_go({"us-east-1": {"p5.48xlarge": 55.04}}, "x")]
    )
    assert done.returncode == 2
    assert "families not found in the instance type data: trn2" in done.stderr
    assert not (tmp_path / "aws.json").exists()


def test_an_unknown_gpu_is_refused_rather_than_guessed(tmp_path):
    shipped = aws.load_data()["instanceTypes"]
    changed = json.loads(json.dumps(shipped))
    changed["g6e.xlarge"]["labels"]["karpenter.k8s.aws/instance-gpu-memory"] = "49152"
    done = _generate(
        tmp_path, _markdown(changed), [_pricing_go({"us-east-1": {"g6e.xlarge": 1.861}}, "x")]
    )
    assert done.returncode == 2
    assert "g6e.xlarge: no GPU model for gpu-name/gpu-memory ('l40s', 49152)" in done.stderr
