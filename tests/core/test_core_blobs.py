"""Blob store on its three backends; the HTTP server (a thread) and the S3 server (a real
`moto_server` process) are started and stopped here, on free 127.0.0.1 ports."""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.core.blobs import (
    BlobBackendError,
    BlobIntegrityError,
    BlobNotFound,
    BlobServer,
    BlobStore,
    BlobTimeout,
    BlobTooLarge,
    HttpBackend,
    LocalDirBackend,
    S3Backend,
    keccak_address,
    open_blob_store,
    serving,
)
from agents.core.chain import free_port

PAYLOADS = [b"", b"x", bytes(range(256)) * 300]  # empty, tiny, 75 KiB


@contextlib.contextmanager
def silent_server() -> Iterator[int]:
    """A TCP port that accepts connections and never answers (a hung backend)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("moto_server did not start")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)


def s3_backend(endpoint: str, bucket: str = "vtp-blobs", timeout_s: float = 10.0) -> S3Backend:
    backend = S3Backend(bucket, endpoint_url=endpoint, timeout_s=timeout_s,
                        access_key="test", secret_key="test")  # fmt: skip
    backend.ensure_bucket()
    return backend


def roundtrip(store: BlobStore) -> None:
    for data in PAYLOADS:
        address = store.put(data)
        assert address == keccak_address(data)
        assert store.has(address)
        assert store.get(address) == data
        assert store.put(data) == address  # idempotent
    missing = keccak_address(b"never stored")
    assert not store.has(missing)
    with pytest.raises(BlobNotFound):
        store.get(missing)


def test_local_roundtrip_and_corruption(tmp_path: Path) -> None:
    backend = LocalDirBackend(tmp_path / "blobs")
    store = BlobStore(backend)
    roundtrip(store)
    address = store.put(b"checkpoint bytes")
    backend.path(address).write_bytes(b"checkpoint bytez")
    with pytest.raises(BlobIntegrityError, match=f"blob {address} .* is corrupt"):
        store.get(address)
    with pytest.raises(ValueError, match="not a blob address"):
        store.get("../../etc/passwd")


def test_http_roundtrip_corruption_and_readonly(tmp_path: Path) -> None:
    served = LocalDirBackend(tmp_path / "solver")
    with BlobServer(served, writable=True) as server:
        assert server.url.startswith("http://127.0.0.1:")
        store = open_blob_store(server.url, timeout_s=5)
        roundtrip(store)
        address = store.put(b"weights")
        served.path(address).write_bytes(b"weightz")  # the server's copy rots
        with pytest.raises(BlobIntegrityError):
            store.get(address)
        # A writable server still refuses content that does not match its address.
        with pytest.raises(BlobBackendError, match="422"):
            HttpBackend(server.url).write(keccak_address(b"a"), b"b")
    with serving(tmp_path / "solver") as readonly:
        with pytest.raises(BlobBackendError, match="403"):
            open_blob_store(readonly.url).put(b"new")
        assert open_blob_store(readonly.url).get(keccak_address(b"x")) == b"x"


def test_http_timeout() -> None:
    with silent_server() as port:
        store = open_blob_store(f"http://127.0.0.1:{port}", timeout_s=0.3)
        started = time.monotonic()
        with pytest.raises(BlobTimeout, match="no answer within 0.3 s"):
            store.get(keccak_address(b"x"))
        assert time.monotonic() - started < 5


def test_s3_roundtrip_and_corruption(moto_endpoint: str, monkeypatch) -> None:
    backend = s3_backend(moto_endpoint)
    store = BlobStore(backend)
    roundtrip(store)
    address = keccak_address(b"honest")
    backend.client.put_object(Bucket="vtp-blobs", Key=f"blobs/{address}", Body=b"tampered")
    with pytest.raises(BlobIntegrityError):
        store.get(address)
    # The URL form a config carries; credentials come from the environment.
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    nocreds = open_blob_store(f"s3://vtp-blobs?endpoint={moto_endpoint}", timeout_s=10)
    with pytest.raises(BlobBackendError, match="no credentials"):
        nocreds.get(keccak_address(b"x"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    via_url = open_blob_store(f"s3://vtp-blobs?endpoint={moto_endpoint}", timeout_s=10)
    assert via_url.get(keccak_address(b"x")) == b"x"


def test_s3_read_refuses_an_object_above_the_cap(moto_endpoint: str) -> None:
    store = BlobStore(s3_backend(moto_endpoint))
    address = store.put(b"w" * 5000)
    assert store.get(address, max_bytes=5000) == b"w" * 5000
    with pytest.raises(BlobTooLarge, match="5000 bytes"):
        store.get(address, max_bytes=4999)


def test_s3_timeout() -> None:
    with silent_server() as port:
        backend = S3Backend("b", endpoint_url=f"http://127.0.0.1:{port}", timeout_s=0.3,
                            access_key="test", secret_key="test")  # fmt: skip
        started = time.monotonic()
        with pytest.raises(BlobTimeout):
            BlobStore(backend).get(keccak_address(b"x"))
        assert time.monotonic() - started < 10


def test_custom_address_function(tmp_path: Path) -> None:
    """A tensor store addresses blobs by a Merkle root; here a stand-in root function."""

    def root(data: bytes) -> str:
        leaves = [hashlib.sha256(data[i : i + 4]).digest() for i in range(0, len(data), 4)]
        return "0x" + hashlib.sha256(b"".join(leaves)).hexdigest()

    store = BlobStore(LocalDirBackend(tmp_path), address_fn=root)
    address = store.put(b"0123456789abcdef")
    assert address == root(b"0123456789abcdef")
    assert store.get(address) == b"0123456789abcdef"
    # A keccak-addressed view of the same directory rejects it: the verifier is what counts.
    with pytest.raises(BlobIntegrityError):
        BlobStore(LocalDirBackend(tmp_path)).get(address)
    assert BlobStore(LocalDirBackend(tmp_path)).get(address, address_fn=root) == b"0123456789abcdef"


def test_a_blob_written_from_its_parts_is_the_joined_blob(tmp_path: Path) -> None:
    # a state blob: its tensors' bytes back to back, each a memoryview of its own array,
    # written one by one under the address the caller computed from the same content
    import numpy as np

    arrays = [np.arange(n, dtype="<f4") for n in (3, 0, 5)]
    parts = [memoryview(a).cast("B") for a in arrays]
    joined = b"".join(parts)
    local = BlobStore(LocalDirBackend(tmp_path / "local"))
    assert local.put_parts(keccak_address(joined), parts) == keccak_address(joined)
    assert local.get(keccak_address(joined)) == joined
    with serving(tmp_path / "served", writable=True) as server:  # a backend without parts
        remote = open_blob_store(server.url, timeout_s=5)
        assert remote.put_parts(keccak_address(joined), parts) == keccak_address(joined)
        assert remote.get(keccak_address(joined)) == joined
    # the address is the caller's: a wrong one is stored, and every read refuses it
    wrong = keccak_address(b"another blob")
    local.put_parts(wrong, parts)
    with pytest.raises(BlobIntegrityError):
        local.get(wrong)
