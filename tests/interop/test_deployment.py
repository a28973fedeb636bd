"""The deployment agrees with the code: template.yaml's HTTP API routes map each route to the
function of its endpoint group, each management route to the management function and the web
view's routes to the web view's function,
`GET /v1/config` advertises exactly the Iceberg routes, and each function's role grants exactly
the AWS actions its code can call (`floe iam`)."""

import json
import os
import pathlib
import re
import subprocess

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]


class _CloudFormationLoader(yaml.SafeLoader):
    """Reads CloudFormation short-form tags (!Ref, !Sub, ...) on scalars as their text, e.g.
    "!GetAtt VendingRole.Arn"."""


def _short_form(loader, suffix, node):
    return f"!{suffix} {loader.construct_scalar(node)}" if isinstance(node, yaml.ScalarNode) else None


_CloudFormationLoader.add_multi_constructor("!", _short_form)


def _route_table():
    out = subprocess.run([os.environ["FLOE_BIN"], "routes"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def _declared_iam():
    out = subprocess.run([os.environ["FLOE_BIN"], "iam"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def _management_routes():
    """(method, path) of every management route, relative to /api/v1, as
    docs/management-api.yaml documents them (tests/http/management.rs keeps the document equal to
    the router's route table)."""
    document = yaml.safe_load((ROOT / "docs" / "management-api.yaml").read_text())
    methods = {"get", "put", "post", "patch", "delete"}
    return {(method.upper(), path) for path, item in document["paths"].items() for method in item if method in methods}


def _ui_routes():
    """(method, path) of the HTTP API routes of the web view, as floe::ui::GATEWAY_ROUTES declares
    them (tests/lambda routes a sample event of each into the web view's router)."""
    source = (ROOT / "shared" / "src" / "ui" / "routes.rs").read_text()
    declaration = re.search(r"pub const GATEWAY_ROUTES: \[\(&str, &str\); \d+\] = \[(.*?)\];", source, re.S)
    assert declaration, "shared/src/ui/routes.rs declares no GATEWAY_ROUTES"
    return set(re.findall(r'\("([A-Z]+)", "([^"]+)"\)', declaration.group(1)))


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
    management = _management_routes()
    assert management, "docs/management-api.yaml lists no routes"
    expected |= {(method, "/api/v1" + path, "ManagementFunction") for method, path in management}
    ui = _ui_routes()
    assert ("GET", "/ui") in ui, ui
    expected |= {(method, path, "UiFunction") for method, path in ui}
    assert declared == expected


def test_every_function_builds_a_binary_of_the_workspace():
    resources = _template()["Resources"]
    binaries = {
        logical_id: resource["Metadata"]["BuildProperties"]["Binary"]
        for logical_id, resource in resources.items()
        if resource["Type"] == "AWS::Serverless::Function"
    }
    functions = ("config", "namespaces", "tables", "commits", "credentials", "signing", "planning", "purge",
                 "maintenance", "worker", "management", "ui", "events")
    assert set(binaries.values()) == {f"floe-{f}" for f in functions}
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


def _actions(statement):
    action = statement["Action"]
    return [action] if isinstance(action, str) else action


def _allowed(statements):
    """Every action the statements allow (each must be an Allow)."""
    actions = set()
    for statement in statements:
        assert statement["Effect"] == "Allow", statement
        actions.update(_actions(statement))
    return actions


def test_every_function_knows_the_secrets_key():
    """Functions seal and open bucket secrets with the stack's KMS key (FLOE_SECRETS_KMS_KEY);
    without it a DynamoDB deployment refuses bucket configurations with static keys."""
    template = _template()
    variables = template["Globals"]["Function"]["Environment"]["Variables"]
    assert variables["FLOE_SECRETS_KMS_KEY"] == "!GetAtt SecretsKey.Arn"
    key = template["Resources"]["SecretsKey"]
    assert key["Type"] == "AWS::KMS::Key" and key["DeletionPolicy"] == "Retain"
    assert key["Properties"]["EnableKeyRotation"] is True


def test_the_catalog_table_expires_items_by_the_attribute_the_store_writes():
    """Idempotency keys carry their expiry in the attribute the DynamoDB adapter writes
    (TTL_ATTRIBUTE); the table must let DynamoDB delete by that same attribute."""
    tables = [r for r in _template()["Resources"].values() if r["Type"] == "AWS::DynamoDB::Table"]
    assert len(tables) == 1
    ttl = tables[0]["Properties"]["TimeToLiveSpecification"]
    adapter = (ROOT / "shared" / "src" / "store" / "dynamodb.rs").read_text()
    assert ttl["Enabled"] is True
    assert f'pub const TTL_ATTRIBUTE: &str = "{ttl["AttributeName"]}";' in adapter


def test_every_function_is_granted_exactly_the_actions_its_code_calls():
    """A missing action is a 500 on AWS the first time a request needs it; an extra one is
    privilege no code path uses. `floe iam` prints what floe::iam declares, which tests/http/iam.rs
    checks against what each function's requests do."""
    declared = _declared_iam()["functions"]
    functions = {
        logical_id: resource
        for logical_id, resource in _template()["Resources"].items()
        if resource["Type"] == "AWS::Serverless::Function"
    }
    assert set(functions) == {name.capitalize() + "Function" for name in declared}
    mismatches = []
    for name, actions in sorted(declared.items()):
        statements = []
        for policy in functions[name.capitalize() + "Function"]["Properties"].get("Policies", []):
            # Inline statements only: a managed policy or SAM policy template hides its actions.
            assert isinstance(policy, dict) and set(policy) == {"Statement"}, f"{name}: {policy!r}"
            statements += policy["Statement"]
        granted = _allowed(statements)
        if granted != set(actions):
            mismatches.append(f"{name}: missing {sorted(set(actions) - granted)}, "
                              f"never called {sorted(granted - set(actions))}")
        for statement in statements:
            if "sts:AssumeRole" in statement["Action"]:
                # The vending role, and the customer-managed roles bucket configurations name.
                assert statement["Resource"] == ["!GetAtt VendingRole.Arn", "!Ref CustomerRoleArnPattern"], \
                    f"{name}: {statement}"
            if any(action.startswith("kms:") for action in _actions(statement)):
                # Only the secrets key, and only with Floe's encryption context.
                assert statement["Resource"] == "!GetAtt SecretsKey.Arn", f"{name}: {statement}"
                assert statement.get("Condition") == {
                    "StringEquals": {"kms:EncryptionContext:purpose": "floe-bucket-secret"}
                }, f"{name}: {statement}"
    assert not mismatches, "\n".join(mismatches)


def test_the_vending_role_grants_exactly_what_sessions_and_functions_use():
    declared = set(_declared_iam()["vending-role"])
    role = _template()["Resources"]["VendingRole"]["Properties"]
    assert _allowed(s for p in role["Policies"] for s in p["PolicyDocument"]["Statement"]) == declared
    # The same permissions, as documents for roles made by hand (infra/DEPLOY.md).
    for document in ("vending-role-permissions.json", "customer-role-permissions.json"):
        assert _allowed(json.loads((ROOT / "infra" / document).read_text())["Statement"]) == declared, document
