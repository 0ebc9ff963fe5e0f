"""Build-on-first-use loader for the C kernels in kernels.c (matmul, reductions, exp/log, keccak).

The library is compiled with gcc into `build/training/<key>/` under the repository root (or
$VTP_BUILD_DIR), keyed by a hash of the source, the flags, the compiler and the CPU, so a copied
tree never loads a library built for another machine. `-ffp-contract=off` forbids fused
multiply-add and there is no -ffast-math, so every float operation is one IEEE-754 binary32
operation (PROTOCOL §1); `-march=native` only widens the SIMD registers, which never changes
bits. Set VTP_NATIVE=0 to force the portable torch / pycryptodome paths.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

SRC = Path(__file__).with_name("kernels.c")
# VTP_MARCH picks the target ISA (default "native"; "" = the compiler's baseline, e.g. SSE2 on
# x86-64). Tests build both and compare bits: the SIMD width must never matter.
_MARCH = os.environ.get("VTP_MARCH", "native")
FLAGS = ["-O3", *([f"-march={_MARCH}"] if _MARCH else []), "-ffp-contract=off", "-fno-fast-math"]
# errno is never read: without it sqrtf is one IEEE instruction that vectorises (same bits)
FLAGS += ["-fno-math-errno"]
FLAGS += ["-fPIC", "-shared"]
LIBS = ["-pthread", "-lm"]


class NativeUnavailable(RuntimeError):
    """The C library cannot be built or loaded here (no compiler, VTP_NATIVE=0, ...)."""


def _repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def build_dir() -> Path:
    return Path(os.environ.get("VTP_BUILD_DIR", _repo_root() / "build" / "training"))


def _cpu_id() -> str:
    # The flags line decides what -march=native emits; a different CPU gets its own build.
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return line
    except OSError:
        pass
    return platform.processor() + platform.machine()


def _compiler() -> str:
    cc = os.environ.get("CC", "gcc")
    if shutil.which(cc) is None:
        raise NativeUnavailable(f"C compiler {cc!r} not found")
    return cc


def _build(cc: str) -> Path:
    version = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout
    key = hashlib.sha256(
        SRC.read_bytes() + repr((FLAGS, LIBS, version, _cpu_id())).encode()
    ).hexdigest()[:16]
    out = build_dir() / key / "libvtp.so"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    ignore = build_dir() / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n")  # build outputs never get committed
    # Compile to a private name, then rename: concurrent processes never see a partial file.
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=out.parent)
    os.close(fd)
    res = subprocess.run([cc, *FLAGS, str(SRC), "-o", tmp, *LIBS], capture_output=True, text=True)
    if res.returncode != 0:  # a compiler without -march=native: plainer SIMD, the same bits
        portable = [f for f in FLAGS if not f.startswith("-march=")]
        res = subprocess.run(
            [cc, *portable, str(SRC), "-o", tmp, *LIBS], capture_output=True, text=True
        )
    if res.returncode != 0:
        os.unlink(tmp)
        raise NativeUnavailable(f"building {SRC.name} failed:\n{res.stderr}")
    os.replace(tmp, out)
    return out


_P = ctypes.c_void_p
_L = ctypes.c_long
_S = ctypes.c_size_t
_SIGS = {
    "vtp_keccak256": [_P, _S, _P],
    "vtp_keccak256_batch": [_P, _S, _S, _P],
    "vtp_tensor_leaves": [_P, _S, ctypes.c_int, _P],
    "vtp_merkle_levels": [_P, _S],
    "vtp_tensor_data_root": [_P, _S, ctypes.c_int, _P],
    "vtp_matmul_nt": [_P, _L, _L, _P, _L, _L, _P, _L, _L, _L, ctypes.c_int],
    "vtp_matmul_nt_batch": [_P, _L, _L, _L, _L, _P, _L, _L, _L, _P, _L, _L, _L, ctypes.c_int],
    "vtp_index_add_rows": [_P, _P, _P, _L, _L],
    "vtp_row_sum": [_P, _L, _L, _P, _L, _L],
    "vtp_row_max": [_P, _L, _L, _P, _L, _L],
    "vtp_row_sum_i32": [_P, _L, _L, _P, _L, _L],
    "vtp_row_max_i32": [_P, _L, _L, _P, _L, _L],
    "vtp_exp32": [_P, _P, _L],
    "vtp_log32": [_P, _P, _L],
    "vtp_tanh32": [_P, _P, _L],
    "vtp_erf32": [_P, _P, _L],
    "vtp_relu": [_P, _P, _L],
    "vtp_relu_bwd": [_P, _P, _P, _L],
    "vtp_exp32_scalar": [_P, _P, _L],
    "vtp_log32_scalar": [_P, _P, _L],
    "vtp_tanh32_scalar": [_P, _P, _L],
    "vtp_erf32_scalar": [_P, _P, _L],
    "vtp_ew_run": [_P, _P, ctypes.c_int],
    "vtp_matmul_nt_batch2": [_P, *[_L] * 6, _P, *[_L] * 4, _P, *[_L] * 3, ctypes.c_int],
    "vtp_plan_run": [_P, _L, _P, ctypes.c_int],
    "vtp_row_argmax": [_P, _L, _L, _P, _L, _L],
    "vtp_row_argmax_i32": [_P, _L, _L, _P, _L, _L],
}
_RESTYPES = {"vtp_plan_run": ctypes.c_long}


@functools.cache
def lib() -> ctypes.CDLL:
    """The loaded library; raises NativeUnavailable when it cannot be had."""
    if os.environ.get("VTP_NATIVE", "1") == "0":
        raise NativeUnavailable("disabled by VTP_NATIVE=0")
    so = ctypes.CDLL(str(_build(_compiler())))
    for name, argtypes in _SIGS.items():
        fn = getattr(so, name)
        fn.argtypes = argtypes
        fn.restype = _RESTYPES.get(name)
    return so


def available() -> bool:
    try:
        lib()
    except NativeUnavailable:
        return False
    return True
