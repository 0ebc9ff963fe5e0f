"""Content-addressed blob store: local directory, HTTP (server + client), S3-compatible.

A blob's address is computed from its bytes (keccak-256 by default; a tensor store passes its
Merkle-root function instead), and every blob fetched from *any* backend is re-addressed before
it is returned: a backend is never trusted, a mismatch raises `BlobIntegrityError`. Missing
blobs raise `BlobNotFound`; a backend that does not answer in time raises `BlobTimeout`.

Addresses are "0x" + 64 lower-case hex digits; anything else is refused before it reaches a
backend (so no address can be a path like "../../etc").

Blobs are held in memory whole: checkpoints of the models this project trains are MBs, not GBs.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol

from eth_utils import keccak

AddressFn = Callable[[bytes], str]
_ADDRESS = re.compile(r"^0x[0-9a-f]{64}$")


class BlobError(RuntimeError):
    pass


class BlobNotFound(BlobError):
    pass


class BlobIntegrityError(BlobError):
    pass


class BlobTimeout(BlobError):
    pass


class BlobBackendError(BlobError):
    """The backend answered, but not usefully (refused write, server error, bad config)."""


def keccak_address(data: bytes) -> str:
    return "0x" + keccak(data).hex()


def check_address(address: str) -> str:
    normal = address.lower()
    if not _ADDRESS.match(normal):
        raise ValueError(f"not a blob address (0x + 64 hex digits): {address[:80]!r}")
    return normal


class Backend(Protocol):
    def read(self, address: str) -> bytes: ...

    def write(self, address: str, data: bytes) -> None: ...

    def exists(self, address: str) -> bool: ...


class BlobStore:
    """Checks every blob against its address, whatever the backend."""

    def __init__(self, backend: Backend, address_fn: AddressFn = keccak_address) -> None:
        self.backend = backend
        self.address_fn = address_fn

    def put(self, data: bytes) -> str:
        address = check_address(self.address_fn(data))
        self.backend.write(address, data)
        return address

    def get(self, address: str, address_fn: AddressFn | None = None) -> bytes:
        """Fetch and verify; `address_fn` overrides the store's (e.g. a tensor's Merkle root)."""
        address = check_address(address)
        data = self.backend.read(address)
        actual = (address_fn or self.address_fn)(data).lower()
        if actual != address:
            raise BlobIntegrityError(
                f"blob {address} from {self.backend!r} is corrupt: its content addresses to "
                f"{actual} ({len(data)} bytes)"
            )
        return data

    def has(self, address: str) -> bool:
        return self.backend.exists(check_address(address))


# --- local directory -------------------------------------------------------------------------


@dataclass
class LocalDirBackend:
    root: Path

    def __post_init__(self) -> None:
        self.root = Path(self.root)
        self.root.mkdir(parents=True, exist_ok=True)

    def path(self, address: str) -> Path:
        address = check_address(address)
        return self.root / address[2:4] / address[2:]

    def read(self, address: str) -> bytes:
        try:
            return self.path(address).read_bytes()
        except FileNotFoundError:
            raise BlobNotFound(f"blob {address} not in {self.root}") from None

    def write(self, address: str, data: bytes) -> None:
        target = self.path(address)
        if target.exists():
            return  # content-addressed: already there means already right (checked on read)
        target.parent.mkdir(parents=True, exist_ok=True)
        # Atomic: a reader never sees half a blob, a crash never leaves one.
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise

    def exists(self, address: str) -> bool:
        return self.path(address).exists()

    def __repr__(self) -> str:
        return f"LocalDirBackend({str(self.root)!r})"


# --- HTTP: a small server the solver runs, and a client --------------------------------------


class BlobServer:
    """Serves a directory of blobs over HTTP: GET/HEAD /blobs/<address>, PUT when writable.

    Binds to 127.0.0.1 unless told otherwise. PUT bodies are checked against their address,
    so a writable server still only ever holds correctly addressed blobs.
    """

    def __init__(
        self, backend: LocalDirBackend, host: str = "127.0.0.1", port: int = 0,
        writable: bool = False, address_fn: AddressFn = keccak_address,
        max_put_bytes: int = 1 << 30,
    ) -> None:  # fmt: skip
        self.backend = backend
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet: agents log what matters
                pass

            def _address(self) -> str | None:
                parts = self.path.split("?", 1)[0].strip("/").split("/")
                if len(parts) != 2 or parts[0] != "blobs":
                    return None
                try:
                    return check_address(parts[1])
                except ValueError:
                    return None

            def _reply(self, code: int, body: bytes = b"", head_only: bool = False) -> None:
                self.send_response(code)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head_only:
                    self.wfile.write(body)

            def _get(self, head_only: bool) -> None:
                address = self._address()
                if address is None:
                    return self._reply(400, b"bad blob path", head_only)
                try:
                    data = server.backend.read(address)
                except BlobNotFound:
                    return self._reply(404, b"", head_only)
                self._reply(200, data, head_only)

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                self._get(head_only=False)

            def do_HEAD(self) -> None:  # noqa: N802
                self._get(head_only=True)

            def do_PUT(self) -> None:  # noqa: N802
                address = self._address()
                length = int(self.headers.get("Content-Length") or 0)
                if not writable:
                    return self._reply(403, b"read-only blob server")
                if address is None or length > max_put_bytes:
                    return self._reply(400, b"bad blob path or size")
                data = self.rfile.read(length)
                if address_fn(data).lower() != address:
                    return self._reply(422, b"content does not match address")
                server.backend.write(address, data)
                self._reply(201)

        self._httpd = ThreadingHTTPServer((host, port), Handler)
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> BlobServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True,
                                        name="blob-server")  # fmt: skip
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> BlobServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class HttpBackend:
    base_url: str
    timeout_s: float = 30.0

    def _url(self, address: str) -> str:
        return f"{self.base_url.rstrip('/')}/blobs/{check_address(address)}"

    def _open(self, request: urllib.request.Request) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()
        except TimeoutError as exc:
            raise BlobTimeout(f"{request.full_url}: no answer within {self.timeout_s:g} s") from exc
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise BlobTimeout(
                    f"{request.full_url}: no answer within {self.timeout_s:g} s"
                ) from exc
            raise BlobBackendError(f"{request.full_url}: {exc.reason}") from exc

    def read(self, address: str) -> bytes:
        status, body = self._open(urllib.request.Request(self._url(address)))
        if status == 404:
            raise BlobNotFound(f"blob {address} not on {self.base_url}")
        if status != 200:
            raise BlobBackendError(f"GET {self._url(address)}: HTTP {status}")
        return body

    def write(self, address: str, data: bytes) -> None:
        request = urllib.request.Request(self._url(address), data=data, method="PUT")
        status, body = self._open(request)
        if status not in (200, 201):
            raise BlobBackendError(
                f"PUT {self._url(address)}: HTTP {status} {body[:80].decode(errors='replace')}"
            )

    def exists(self, address: str) -> bool:
        status, _ = self._open(urllib.request.Request(self._url(address), method="HEAD"))
        return status == 200


# --- S3-compatible object storage ------------------------------------------------------------


class S3Backend:
    """Blobs as objects `<prefix><address>` in one bucket (AWS S3, MinIO, moto, ...).

    Credentials come from the usual boto3 chain (env, files) unless given.
    """

    def __init__(
        self, bucket: str, endpoint_url: str | None = None, prefix: str = "blobs/",
        region: str = "us-east-1", timeout_s: float = 30.0,
        access_key: str | None = None, secret_key: str | None = None,
    ) -> None:  # fmt: skip
        import boto3
        from botocore.config import Config

        self.bucket, self.prefix, self.endpoint_url = bucket, prefix, endpoint_url
        self.timeout_s = timeout_s
        self.client = boto3.client(
            "s3",
            endpoint_url=endpoint_url,
            region_name=region,
            aws_access_key_id=access_key,
            aws_secret_access_key=secret_key,
            config=Config(
                connect_timeout=timeout_s,
                read_timeout=timeout_s,
                retries={"max_attempts": 2, "mode": "standard"},
            ),
        )

    def _key(self, address: str) -> str:
        return self.prefix + check_address(address)

    def _call(self, what: str, fn: Callable[[], Any]) -> Any:
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            ConnectTimeoutError,
            EndpointConnectionError,
            NoCredentialsError,
            ReadTimeoutError,
        )

        try:
            return fn()
        except (ReadTimeoutError, ConnectTimeoutError) as exc:
            raise BlobTimeout(f"s3://{self.bucket} {what}: no answer within "
                              f"{self.timeout_s:g} s") from exc  # fmt: skip
        except EndpointConnectionError as exc:
            raise BlobBackendError(f"s3://{self.bucket} {what}: {exc}") from exc
        except NoCredentialsError:
            raise BlobBackendError(
                f"s3://{self.bucket}: no credentials (set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY, or an AWS profile)"
            ) from None
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in ("NoSuchKey", "404", "NotFound"):
                raise BlobNotFound(f"{what}: not in s3://{self.bucket}/{self.prefix}") from None
            raise BlobBackendError(f"s3://{self.bucket} {what}: {code or exc}") from exc
        except BotoCoreError as exc:
            raise BlobBackendError(f"s3://{self.bucket} {what}: {exc}") from exc

    def ensure_bucket(self) -> None:
        from botocore.exceptions import ClientError

        try:
            self.client.head_bucket(Bucket=self.bucket)
        except ClientError:
            self._call("create bucket", lambda: self.client.create_bucket(Bucket=self.bucket))

    def read(self, address: str) -> bytes:
        obj = self._call(
            f"get {address}", lambda: self.client.get_object(Bucket=self.bucket,
                                                             Key=self._key(address))
        )  # fmt: skip
        return self._call(f"read {address}", lambda: obj["Body"].read())

    def write(self, address: str, data: bytes) -> None:
        self._call(
            f"put {address}",
            lambda: self.client.put_object(Bucket=self.bucket, Key=self._key(address), Body=data),
        )

    def exists(self, address: str) -> bool:
        try:
            self._call(
                f"head {address}",
                lambda: self.client.head_object(Bucket=self.bucket, Key=self._key(address)),
            )
        except BlobNotFound:
            return False
        return True

    def __repr__(self) -> str:
        return f"S3Backend(s3://{self.bucket}/{self.prefix}, endpoint={self.endpoint_url})"


# --- from a URL (config) ---------------------------------------------------------------------


def open_blob_store(
    url: str, address_fn: AddressFn = keccak_address, timeout_s: float = 30.0
) -> BlobStore:
    """A store for `url`:

    * a path or file:///path -> local directory
    * http(s)://host:port -> a BlobServer's client
    * s3://bucket[/prefix][?endpoint=http://host:port&region=...] -> S3-compatible storage
    """
    parsed = urllib.parse.urlparse(url)
    backend: Backend
    if parsed.scheme in ("", "file"):
        backend = LocalDirBackend(Path(parsed.path if parsed.scheme == "file" else url))
    elif parsed.scheme in ("http", "https"):
        backend = HttpBackend(url, timeout_s)
    elif parsed.scheme == "s3":
        if not parsed.netloc:
            raise ValueError(f"blob URL {url!r}: s3:// needs a bucket name")
        query = urllib.parse.parse_qs(parsed.query)
        prefix = parsed.path.strip("/")
        backend = S3Backend(
            parsed.netloc,
            endpoint_url=query.get("endpoint", [None])[0],
            prefix=f"{prefix}/" if prefix else "blobs/",
            region=query.get("region", ["us-east-1"])[0],
            timeout_s=timeout_s,
        )
    else:
        raise ValueError(f"blob URL {url!r}: expected a path, file://, http(s):// or s3://")
    return BlobStore(backend, address_fn)


@contextlib.contextmanager
def serving(directory: Path, **kwargs: Any) -> Iterator[BlobServer]:
    """Run a BlobServer over `directory` for the duration of a with-block."""
    server = BlobServer(LocalDirBackend(directory), **kwargs).start()
    try:
        yield server
    finally:
        server.stop()
