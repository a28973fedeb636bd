"""The deployment agrees with the route table: template.yaml's HTTP API routes map each route to
the function of its endpoint group, and `GET /v1/config` advertises exactly those routes."""

import json
import os
import pathlib
import subprocess

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]


class _CloudFormationLoader(yaml.SafeLoader):
    """Reads CloudFormation short-form tags (!Ref, !Sub, ...) as plain values."""


_CloudFormationLoader.add_multi_constructor("!", lambda loader, suffix, node: None)


def _route_table():
    out = subprocess.run([os.environ["FLOE_BIN"], "routes"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def _template():
    return yaml.load((ROOT / "template.yaml").read_text(), Loader=_CloudFormationLoader)


def test_template_routes_are_the_route_table():
    resources = _template()["Resources"]
    declared = set()
    for logical_id, resource in resources.items():
        for event in (resource.get("Properties", {}).get("Events") or {}).values():
            if event["Type"] == "HttpApi":
                props = event["Properties"]
                declared.add((props["Method"], props["Path"], logical_id))
    expected = {(r["method"], "/iceberg" + r["path"], r["group"].capitalize() + "Function") for r in _route_table()}
    assert declared == expected


def test_every_function_builds_a_binary_of_the_workspace():
    resources = _template()["Resources"]
    binaries = {
        logical_id: resource["Metadata"]["BuildProperties"]["Binary"]
        for logical_id, resource in resources.items()
        if resource["Type"] == "AWS::Serverless::Function"
    }
    assert set(binaries.values()) == {f"floe-{g}" for g in ("config", "namespaces", "tables", "commits", "credentials", "purge")}
    for binary in binaries.values():
        manifest = (ROOT / "functions" / binary.removeprefix("floe-") / "Cargo.toml").read_text()
        assert f'name = "{binary}"' in manifest
    for resource in resources.values():
        if resource["Type"] == "AWS::Serverless::Function":
            assert resource["Metadata"]["BuildMethod"] == "rust-cargolambda"


def test_config_advertises_exactly_the_route_table(floe):
    import urllib.request

    request = urllib.request.Request(f"{floe.uri}/v1/config?warehouse={floe.warehouse}",
                                     headers={"Authorization": f"Bearer {floe.token}"})
    endpoints = json.loads(urllib.request.urlopen(request).read())["endpoints"]
    assert sorted(endpoints) == sorted(f"{r['method']} {r['path']}" for r in _route_table())
