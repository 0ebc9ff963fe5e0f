"""Content-addressed blob store: local directory, HTTP (server + client), S3-compatible.

A blob's address is computed from its bytes (keccak-256 by default; a tensor store passes its
Merkle-root function instead), and every blob fetched from *any* backend is re-addressed before
it is returned: a backend is never trusted, a mismatch raises `BlobIntegrityError`. Missing
blobs raise `BlobNotFound`; a backend that does not answer in time raises `BlobTimeout`.

Addresses are "0x" + 64 lower-case hex digits; anything else is refused before it reaches a
backend (so no address can be a path like "../../etc").

Blobs are read into memory whole; one may be written from its parts (`put_parts`: a state's
tensors, never joined where the backend writes them one by one, a local folder).
Every read is bounded, because a blob's server may be anyone's (a solver's locator): a size cap
(`max_bytes`: the caller's expected size where it knows it, else DEFAULT_MAX_BLOB_BYTES) is
checked before and while reading, and a remote read ends by a deadline (`BlobTimeout`,
`BlobTooLarge`), however slowly or endlessly the server sends.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import re
import socket
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol

from Crypto.Hash import keccak as _keccak

AddressFn = Callable[[bytes], str]
Buffer = bytes | bytearray | memoryview  # what a blob's part may be
_ADDRESS = re.compile(r"^0x[0-9a-f]{64}$")
# The largest blob any read accepts unless its caller asks for less: the largest state a spec
# allows (2^28 parameters and their momenta, float32). Readers that know the job ask for less.
DEFAULT_MAX_BLOB_BYTES = 1 << 31
# A remote read must average this rate beyond its first timeout_s (1 MiB/s: a GB-sized state
# still fits, a server that trickles does not).
MIN_RATE_BYTES_S = 1 << 20
_CHUNK = 1 << 16
_ERROR_BODY_BYTES = 512  # of an error reply: enough for a message, never more


class BlobError(RuntimeError):
    pass


class BlobNotFound(BlobError):
    pass


class BlobIntegrityError(BlobError):
    pass


class BlobTimeout(BlobError):
    pass


class BlobTooLarge(BlobError):
    """The blob is larger than the read accepts (checked before reading where the size is
    announced, and while reading)."""


class BlobBackendError(BlobError):
    """The backend answered, but not usefully (refused write, server error, bad config)."""


def keccak_address(data: bytes) -> str:
    # pycryptodome's (what eth_utils wraps), without eth_utils' import time
    return "0x" + _keccak.new(digest_bits=256, data=data).hexdigest()


def check_address(address: str) -> str:
    normal = address.lower()
    if not _ADDRESS.match(normal):
        raise ValueError(f"not a blob address (0x + 64 hex digits): {address[:80]!r}")
    return normal


class Backend(Protocol):
    def read(self, address: str, max_bytes: int = DEFAULT_MAX_BLOB_BYTES) -> bytes: ...

    def write(self, address: str, data: bytes) -> None: ...

    def exists(self, address: str) -> bool: ...


class BlobStore:
    """Checks every blob against its address, whatever the backend."""

    def __init__(
        self, backend: Backend, address_fn: AddressFn = keccak_address,
        max_bytes: int = DEFAULT_MAX_BLOB_BYTES,
    ) -> None:  # fmt: skip
        self.backend = backend
        self.address_fn = address_fn
        self.max_bytes = max_bytes

    def put(self, data: bytes) -> str:
        address = check_address(self.address_fn(data))
        self.backend.write(address, data)
        return address

    def put_parts(self, address: str, parts: Sequence[Buffer]) -> str:
        """Store the blob of `parts` back to back under `address`, which the caller computed by
        this store's function from the same content (a state's Merkle root from its tensors);
        the parts are never joined where the backend writes them one by one (a local folder),
        so a state of GBs is not copied whole. Every read re-checks the address, as for any blob."""
        address = check_address(address)
        write_parts = getattr(self.backend, "write_parts", None)
        if write_parts is None:
            self.backend.write(address, b"".join(parts))
        else:
            write_parts(address, parts)
        return address

    def get(
        self, address: str, address_fn: AddressFn | None = None, max_bytes: int | None = None
    ) -> bytes:
        """Fetch and verify; `address_fn` overrides the store's (e.g. a tensor's Merkle root),
        `max_bytes` its size cap (BlobTooLarge above it)."""
        address = check_address(address)
        data = self.backend.read(address, self.max_bytes if max_bytes is None else max_bytes)
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
    """Blobs as files under `root`. Opening one touches nothing on disk (the folder is made by
    the first write), so a store opened only to read never creates a directory."""

    root: Path

    def __post_init__(self) -> None:
        self.root = Path(self.root)

    def path(self, address: str) -> Path:
        address = check_address(address)
        return self.root / address[2:4] / address[2:]

    def read(self, address: str, max_bytes: int = DEFAULT_MAX_BLOB_BYTES) -> bytes:
        try:
            with self.path(address).open("rb") as fh:
                size = os.fstat(fh.fileno()).st_size  # an oversized file is never read
                data = fh.read(max_bytes + 1) if size <= max_bytes else b""
        except FileNotFoundError:
            raise BlobNotFound(f"blob {address} not in {self.root}") from None
        if max(size, len(data)) > max_bytes:
            raise BlobTooLarge(f"blob {address} in {self.root}: {size} bytes, more than the "
                               f"{max_bytes} this read accepts")  # fmt: skip
        return data

    def write(self, address: str, data: bytes) -> None:
        self.write_parts(address, (data,))

    def write_parts(self, address: str, parts: Iterable[Buffer]) -> None:
        """The blob of `parts` back to back, written one part at a time (never joined)."""
        target = self.path(address)
        if target.exists():
            return  # content-addressed: already there means already right (checked on read)
        target.parent.mkdir(parents=True, exist_ok=True)
        # Atomic: a reader never sees half a blob, a crash never leaves one.
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb", buffering=0) as fh:
                for part in parts:
                    view = memoryview(part).cast("B")
                    while view:  # a raw write may take less than it was given
                        view = view[fh.write(view) :]
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
        max_put_bytes: int = DEFAULT_MAX_BLOB_BYTES,
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
    """A BlobServer's client (any server of GET/HEAD/PUT /blobs/<address>).

    `timeout_s` bounds a whole request, not one socket read: the status line and headers must
    come within `timeout_s` (plus the upload at `min_rate`), and the body must keep an average of
    `min_rate` bytes/s beyond that. A server that sends one byte per socket timeout, or without
    end, cannot hold the caller: past the deadline the socket is shut (BlobTimeout), and a
    body above the read's `max_bytes` is refused before it is read when its length is
    announced, else as soon as it is exceeded (BlobTooLarge). Redirects are not followed.
    """

    base_url: str
    timeout_s: float = 30.0
    min_rate: float = MIN_RATE_BYTES_S

    def _url(self, address: str) -> str:
        return f"{self.base_url.rstrip('/')}/blobs/{check_address(address)}"

    def _request(
        self, method: str, address: str, body: bytes | None = None, max_bytes: int = 0
    ) -> tuple[int, bytes]:
        url = self._url(address)
        parts = urllib.parse.urlsplit(url)
        conn_cls = (
            http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        )
        conn = conn_cls(parts.hostname or "", parts.port, timeout=self.timeout_s)
        start = time.monotonic()
        # Each socket operation has timeout_s, but a trickle is never "slow" for the socket:
        # only shutting the socket from outside ends it, at the request's hard deadline.
        held: list[socket.socket] = []
        fired = threading.Event()

        def shut() -> None:
            fired.set()
            sock = conn.sock or (held[0] if held else None)
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

        hard = self.timeout_s + (len(body or b"") + max_bytes) / self.min_rate
        watchdog = threading.Timer(hard, shut)
        watchdog.daemon = True
        watchdog.start()
        try:
            conn.connect()
            held.append(conn.sock)  # the response keeps it after a "Connection: close" reply
            conn.request(method, parts.path + (f"?{parts.query}" if parts.query else ""), body)
            response = conn.getresponse()
            blob = method == "GET" and response.status == 200
            limit = max_bytes if blob else _ERROR_BODY_BYTES
            data = b"" if method == "HEAD" else self._body(response, url, start, limit, blob)
        except (OSError, http.client.HTTPException, BlobError) as exc:
            if isinstance(exc, BlobError) and not fired.is_set():
                raise
            if fired.is_set() or isinstance(exc, TimeoutError):
                raise BlobTimeout(f"{url}: no answer within {self.timeout_s:g} s") from exc
            raise BlobBackendError(f"{url}: {exc}") from exc
        finally:
            watchdog.cancel()
            conn.close()
        if fired.is_set():
            raise BlobTimeout(f"{url}: not read within {self.timeout_s:g} s")
        return response.status, data

    def _body(
        self, response: http.client.HTTPResponse, url: str, start: float, max_bytes: int,
        strict: bool,
    ) -> bytes:  # fmt: skip
        """The body, in chunks against the deadline; `strict`: a blob (refuse more than
        `max_bytes`, or less than announced), else an error reply (keep its first bytes)."""
        announced = response.getheader("Content-Length", "")
        if strict and announced.isdigit() and int(announced) > max_bytes:
            raise BlobTooLarge(
                f"{url}: {announced} bytes announced, more than the {max_bytes} this read accepts"
            )
        chunks: list[bytes] = []
        size = 0
        while chunk := response.read1(_CHUNK):
            chunks.append(chunk)
            size += len(chunk)
            if size > max_bytes:
                if not strict:
                    break
                raise BlobTooLarge(f"{url}: more than the {max_bytes} bytes this read accepts")
            elapsed = time.monotonic() - start
            if elapsed > self.timeout_s + size / self.min_rate:
                raise BlobTimeout(
                    f"{url}: {size} bytes in {elapsed:.1f} s, slower than {self.timeout_s:g} s "
                    f"plus {self.min_rate / 2**20:g} MiB/s"
                )
        data = b"".join(chunks)
        if not strict:
            return data[:max_bytes]
        if announced.isdigit() and size != int(announced):
            raise BlobBackendError(f"{url}: body ended after {size} of {announced} bytes")
        return data

    def read(self, address: str, max_bytes: int = DEFAULT_MAX_BLOB_BYTES) -> bytes:
        status, body = self._request("GET", address, max_bytes=max_bytes)
        if status == 404:
            raise BlobNotFound(f"blob {address} not on {self.base_url}")
        if status != 200:
            raise BlobBackendError(f"GET {self._url(address)}: HTTP {status}")
        return body

    def write(self, address: str, data: bytes) -> None:
        status, body = self._request("PUT", address, data)
        if status not in (200, 201):
            raise BlobBackendError(
                f"PUT {self._url(address)}: HTTP {status} {body[:80].decode(errors='replace')}"
            )

    def exists(self, address: str) -> bool:
        status, _ = self._request("HEAD", address)
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

    def read(self, address: str, max_bytes: int = DEFAULT_MAX_BLOB_BYTES) -> bytes:
        """As HttpBackend's: the announced size is checked before reading, and the body is read
        in chunks that must keep `MIN_RATE_BYTES_S` beyond the first timeout_s."""
        start = time.monotonic()
        obj = self._call(
            f"get {address}", lambda: self.client.get_object(Bucket=self.bucket,
                                                             Key=self._key(address))
        )  # fmt: skip
        body = obj["Body"]
        try:
            if int(obj.get("ContentLength") or 0) > max_bytes:
                raise BlobTooLarge(f"s3://{self.bucket} {address}: {obj['ContentLength']} bytes, "
                                   f"more than the {max_bytes} this read accepts")  # fmt: skip
            return self._call(f"read {address}", lambda: self._body(body, address, start,
                                                                   max_bytes))  # fmt: skip
        finally:
            body.close()

    def _body(self, body: Any, address: str, start: float, max_bytes: int) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while chunk := body.read(_CHUNK):
            chunks.append(chunk)
            size += len(chunk)
            if size > max_bytes:
                raise BlobTooLarge(f"s3://{self.bucket} {address}: more than the {max_bytes} "
                                   "bytes this read accepts")  # fmt: skip
            if time.monotonic() - start > self.timeout_s + size / MIN_RATE_BYTES_S:
                raise BlobTimeout(f"s3://{self.bucket} {address}: {size} bytes, slower than "
                                  f"{self.timeout_s:g} s plus 1 MiB/s")  # fmt: skip
        return b"".join(chunks)

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
    """A store for `url` (the operator's own configuration: a URL read from the chain goes
    through agents/roles/artifacts.py's locator_store, which accepts only http(s)):

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
