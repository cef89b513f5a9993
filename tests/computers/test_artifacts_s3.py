"""Masked captures through django-storages' S3 backend, against a server speaking the S3
protocol on loopback (moto's): what production uses when hosts share no disk."""

from __future__ import annotations

import hashlib
import io
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from django.core.files.storage import storages
from moto.server import ThreadedMotoServer

from accounts.models import Account
from computers.artifacts import artifact_store, artifacts_sweep
from computers.models import Computer, DiagnosticArtifact, StoredProfile
from computers.profiles import profile_load, profile_store
from computers.services import computer_profile_reset, executor_register

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

BUCKET = "ram-artifacts"
PNG = b"\x89PNG\r\n\x1a\n" + b"masked" * 100
CREDENTIALS = {"aws_access_key_id": "test-access-key", "aws_secret_access_key": "test-secret-key", "region_name": "us-east-1"}


@pytest.fixture
def s3(settings: Any) -> Iterator[Any]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    client = boto3.client("s3", endpoint_url=endpoint, **CREDENTIALS)
    client.create_bucket(Bucket=BUCKET)
    settings.STORAGES = {
        **settings.STORAGES,
        "artifacts": {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": BUCKET,
                "endpoint_url": endpoint,
                "region_name": "us-east-1",
                "access_key": CREDENTIALS["aws_access_key_id"],
                "secret_key": CREDENTIALS["aws_secret_access_key"],
                "location": "artifacts",
                "default_acl": None,
                "file_overwrite": False,
            },
        },
    }
    try:
        yield client
    finally:
        server.stop()


def test_a_capture_is_stored_read_and_swept_in_an_s3_bucket(
    s3: Any, account: Account, make_computer: Callable[..., Computer], settings: Any
) -> None:
    computer = make_computer(account, "pc-s3")
    artifact_id = artifact_store(computer_id=computer.id, kind="screenshot", data=PNG)
    artifact = DiagnosticArtifact.objects.get(pk=artifact_id)
    assert artifact.account_id == account.id and artifact.size == len(PNG)
    key = f"artifacts/{artifact.storage_name}"
    stored = s3.get_object(Bucket=BUCKET, Key=key)
    assert stored["Body"].read() == PNG
    # Private: no public grant on the object.
    grants = s3.get_object_acl(Bucket=BUCKET, Key=key)["Grants"]
    assert not [g for g in grants if g["Grantee"].get("URI", "").endswith("AllUsers")]
    assert artifact.data == PNG  # what GET /api/artifacts/{id} answers
    assert storages["artifacts"].exists(artifact.storage_name)
    settings.RAM_ARTIFACT_RETENTION_DAYS = 0
    assert artifacts_sweep() == 1
    assert s3.list_objects_v2(Bucket=BUCKET).get("KeyCount", 0) == 0


def test_a_stored_profile_lives_encrypted_in_the_bucket_and_a_reset_deletes_every_version(
    s3: Any, account: Account, make_computer: Callable[..., Computer]
) -> None:
    s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    computer = make_computer(account, "pc-s3-profile")
    generation = uuid.uuid4()
    assert executor_register(computer_id=computer.id, generation=generation, address="127.0.0.1:9")
    profile_generation = Computer.objects.get(pk=computer.id).profile_generation
    for archive in (b"first archive with sid=secret-one", b"second archive with sid=secret-two"):
        kept = profile_store(
            computer_id=computer.id,
            generation=generation,
            profile_generation=profile_generation,
            stream=io.BytesIO(archive),
            size=len(archive),
            sha256=hashlib.sha256(archive).hexdigest(),
        )
        assert kept
    prefix = f"artifacts/profiles/{computer.id}/"
    current = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)["Contents"]
    assert len(current) == 1  # the older one was deleted...
    versions = s3.list_object_versions(Bucket=BUCKET, Prefix=prefix)
    assert len(versions["Versions"]) == 2 and len(versions["DeleteMarkers"]) == 1  # ...but a versioned bucket keeps it
    for version in versions["Versions"]:
        body = s3.get_object(Bucket=BUCKET, Key=version["Key"], VersionId=version["VersionId"])["Body"].read()
        assert b"secret" not in body and b"archive" not in body
    assert profile_load(computer_id=computer.id, profile_generation=profile_generation) == b"second archive with sid=secret-two"

    computer_profile_reset(computer=Computer.objects.get(pk=computer.id))
    versions = s3.list_object_versions(Bucket=BUCKET, Prefix=prefix)
    assert versions.get("Versions", []) == [] and versions.get("DeleteMarkers", []) == []
    assert not StoredProfile.objects.filter(computer_id=computer.id).exists()
