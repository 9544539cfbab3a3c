"""The `s3_server` fixture: a real S3 server that stores, serves ranges and checks credentials."""

from __future__ import annotations

import hashlib
import os

import pytest
from botocore.exceptions import ClientError  # type: ignore[import-untyped]

from tests.support.seaweedfs import S3Server


def test_put_range_head_and_wrong_credentials(s3_server: S3Server) -> None:
    s3 = s3_server.client()
    s3.create_bucket(Bucket="smoke")
    body = os.urandom(3 * 1024 * 1024 + 5)
    s3.put_object(Bucket="smoke", Key="dir/blob.bin", Body=body)

    ranged = s3.get_object(Bucket="smoke", Key="dir/blob.bin", Range="bytes=10-19")
    assert ranged["Body"].read() == body[10:20]
    assert ranged["ContentRange"] == f"bytes 10-19/{len(body)}"

    head = s3.head_object(Bucket="smoke", Key="dir/blob.bin")
    assert head["ContentLength"] == len(body)
    assert head["ETag"] == f'"{hashlib.md5(body).hexdigest()}"'

    intruder = s3_server.client(aws_secret_access_key="not-the-secret")
    with pytest.raises(ClientError) as refused:
        intruder.list_objects_v2(Bucket="smoke")
    assert refused.value.response["Error"]["Code"] in {
        "SignatureDoesNotMatch",
        "InvalidAccessKeyId",
        "AccessDenied",
    }
