"""The moto launcher's transaction rollback (moto_server.install_item_rollback): it never copies
a whole table, and a cancelled transaction still leaves every item it named as it was."""

import os
import sys

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.dynamodb.models.table import Table

sys.path.insert(0, os.path.dirname(__file__))
import moto_server  # noqa: E402

TABLE = "floe-rollback"


@pytest.fixture
def dynamodb(monkeypatch):
    moto_server.install_item_rollback()

    def refuse(self, memo):
        raise AssertionError("a transaction deep-copied a whole table")

    monkeypatch.setattr(Table, "__deepcopy__", refuse, raising=False)
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1", aws_access_key_id="testing",
                              aws_secret_access_key="testing")
        client.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                  {"AttributeName": "sk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield client


def _key(pk: str, sk: str) -> dict:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def _item(pk: str, sk: str, body: str) -> dict:
    return {**_key(pk, sk), "body": {"S": body}}


def _everything(client) -> list:
    items = client.scan(TableName=TABLE, ConsistentRead=True)["Items"]
    return sorted(items, key=lambda i: (i["pk"]["S"], i["sk"]["S"]))


def test_a_full_transaction_lands_without_copying_the_table(dynamodb):
    for i in range(200):
        dynamodb.put_item(TableName=TABLE, Item=_item(f"p{i % 7}", f"s{i}", "old"))
    writes = [{"Put": {"TableName": TABLE, "Item": _item("new", f"n{j:03}", "x"),
                       "ConditionExpression": "attribute_not_exists(pk)"}} for j in range(100)]
    dynamodb.transact_write_items(TransactItems=writes)
    landed = dynamodb.query(TableName=TABLE, KeyConditionExpression="pk = :p",
                            ExpressionAttributeValues={":p": {"S": "new"}})["Count"]
    assert landed == 100


def test_a_cancelled_transaction_leaves_every_item_it_named_as_it_was(dynamodb):
    dynamodb.put_item(TableName=TABLE, Item=_item("a", "updated", "before"))
    dynamodb.put_item(TableName=TABLE, Item=_item("a", "replaced", "before"))
    dynamodb.put_item(TableName=TABLE, Item=_item("a", "deleted", "before"))
    dynamodb.put_item(TableName=TABLE, Item=_item("b", "held", "before"))
    before = _everything(dynamodb)
    writes = [
        {"Update": {"TableName": TABLE, "Key": _key("a", "updated"), "UpdateExpression": "SET body = :v",
                    "ExpressionAttributeValues": {":v": {"S": "after"}}}},
        {"Put": {"TableName": TABLE, "Item": _item("a", "replaced", "after")}},
        {"Delete": {"TableName": TABLE, "Key": _key("a", "deleted")}},
        {"Put": {"TableName": TABLE, "Item": _item("c", "created", "after")}},
        # Written after the others: its condition fails, so none of them may stay.
        {"Put": {"TableName": TABLE, "Item": _item("b", "held", "after"),
                 "ConditionExpression": "attribute_not_exists(pk)"}},
    ]
    with pytest.raises(ClientError) as refused:
        dynamodb.transact_write_items(TransactItems=writes)
    assert refused.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert _everything(dynamodb) == before


def test_a_transaction_naming_one_item_twice_is_refused_and_changes_nothing(dynamodb):
    dynamodb.put_item(TableName=TABLE, Item=_item("a", "x", "before"))
    before = _everything(dynamodb)
    writes = [
        {"Put": {"TableName": TABLE, "Item": _item("a", "x", "first")}},
        {"Put": {"TableName": TABLE, "Item": _item("a", "y", "new")}},
        {"Delete": {"TableName": TABLE, "Key": _key("a", "x")}},
    ]
    with pytest.raises(ClientError) as refused:
        dynamodb.transact_write_items(TransactItems=writes)
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert _everything(dynamodb) == before
