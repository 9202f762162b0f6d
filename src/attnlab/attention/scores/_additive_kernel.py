"""The exact branch of ``AdditiveScores`` as two fused C loops, for CPU float32 tensors only.

    vᵀ tanh(a + c) = Σ v − 2 Σ_n v_n r,   r = 1 / (1 + e^{2a} e^{2c}),   d tanh / dx = 4 r (1 − r)
    (Bahdanau et al., 2015; the identity and its derivation are in additive.py)

Shape letters as in additive.py, plus g = b·h (one (query, key) grid per batch entry and head).

Eager PyTorch makes a pass over memory for every elementwise step of the (g, t_q, t_k, n) chunk; here
each (query, key, hidden) triple is one multiply-add and one division in registers, in a loop over keys
that the compiler vectorises, and only the (g, t_q, t_k) scores and the (g, t_q, n), (g, n, t_k)
gradients are written. Forward runs in parallel over (grid, query), backward over grids (each owns its
key gradients).

The source is compiled at first use with the system C compiler (``$CC``, else ``cc``; ``-O3
-march=native -fopenmp``, about 0.3 s) into ``$ATTNLAB_CACHE/kernels`` (default ``~/.cache/attnlab``)
under a name hashed from the source, the flags and this CPU, then loaded with ``ctypes``: no PyTorch
headers, so no minutes of C++ compilation. The OpenMP runtime it links is the ``libgomp.so.1`` PyTorch
has already loaded, so it shares PyTorch's threads. When anything fails (no compiler, a read-only
home, another OS), ``library()`` warns once and returns None, and ``AdditiveScores`` runs its eager
loop; ``ATTNLAB_ADDITIVE_KERNEL=0`` turns the kernel off.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path

import torch

SOURCE = r"""
#include <stdint.h>

/* s[g, i, j] = vsum[h] - 2 sum_n v[h, n] / (1 + ea[g, i, n] ecT[g, n, j]),  h = g % heads */
void additive_forward(const float *restrict ea, const float *restrict ecT, const float *restrict v,
                      float *restrict s, int64_t grids, int64_t heads, int64_t t_q, int64_t t_k,
                      int64_t n, int threads) {
    #pragma omp parallel for collapse(2) schedule(static) num_threads(threads)
    for (int64_t g = 0; g < grids; g++) {
        for (int64_t i = 0; i < t_q; i++) {
            const float *x = ea + (g * t_q + i) * n, *w = v + (g % heads) * n;
            float *out = s + (g * t_q + i) * t_k, vsum = 0.0f;
            for (int64_t j = 0; j < t_k; j++) out[j] = 0.0f;
            for (int64_t m = 0; m < n; m++) {
                const float *y = ecT + (g * n + m) * t_k, xm = x[m], wm = w[m];
                vsum += wm;
                #pragma omp simd
                for (int64_t j = 0; j < t_k; j++) out[j] += wm / (1.0f + xm * y[j]);
            }
            for (int64_t j = 0; j < t_k; j++) out[j] = vsum - 2.0f * out[j];
        }
    }
}

/* With r = 1 / (1 + ea ecT), tanh = 1 - 2 r and dr = grad r (1 - r), per grid g:
   da[g, i, n] = 4 v[h, n] sum_j dr,  dcT[g, n, j] = sum_i dr (unscaled),  gt[g, n] = sum_ij grad tanh */
void additive_backward(const float *restrict grad, const float *restrict ea, const float *restrict ecT,
                       const float *restrict v, float *restrict da, float *restrict dcT,
                       double *restrict gt, int64_t grids, int64_t heads, int64_t t_q, int64_t t_k,
                       int64_t n, int threads) {
    #pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t g = 0; g < grids; g++) {
        const float *w = v + (g % heads) * n;
        float *dy0 = dcT + g * n * t_k;
        double *gtg = gt + g * n;
        for (int64_t e = 0; e < n * t_k; e++) dy0[e] = 0.0f;
        for (int64_t m = 0; m < n; m++) gtg[m] = 0.0;
        for (int64_t i = 0; i < t_q; i++) {
            const float *x = ea + (g * t_q + i) * n, *gi = grad + (g * t_q + i) * t_k;
            float *dx = da + (g * t_q + i) * n;
            for (int64_t m = 0; m < n; m++) {
                const float *y = ecT + (g * n + m) * t_k, xm = x[m];
                float *dy = dy0 + m * t_k, sum_dr = 0.0f, sum_gt = 0.0f;
                #pragma omp simd reduction(+ : sum_dr, sum_gt)
                for (int64_t j = 0; j < t_k; j++) {
                    float r = 1.0f / (1.0f + xm * y[j]), g_r = gi[j] * r, dr = g_r - g_r * r;
                    sum_gt += gi[j] - 2.0f * g_r;
                    sum_dr += dr;
                    dy[j] += dr;
                }
                dx[m] = 4.0f * w[m] * sum_dr;
                gtg[m] += sum_gt;
            }
        }
    }
}
"""

FLAGS = ["-O3", "-march=native", "-ffp-contract=fast", "-fopenmp", "-fPIC", "-shared", "-std=c99"]

_P, _I64 = ctypes.c_void_p, ctypes.c_int64
_ARGTYPES = {
    "additive_forward": [_P, _P, _P, _P, _I64, _I64, _I64, _I64, _I64, ctypes.c_int],
    "additive_backward": [_P, _P, _P, _P, _P, _P, _P, _I64, _I64, _I64, _I64, _I64, ctypes.c_int],
}


def _cpu_signature() -> str:
    """What -march=native depends on: the machine and, on Linux, the CPU's model and feature flags."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    model = next((line for line in lines if line.startswith(("model name", "CPU part"))), "")
    flags = next((line for line in lines if line.startswith(("flags", "Features"))), "")
    return f"{platform.machine()} {model} {flags}"


def _build(compiler: str) -> Path:
    """Compile SOURCE into the cache (once per source, flags and CPU); returns the shared library."""
    key = hashlib.sha256("\0".join([SOURCE, compiler, *FLAGS, _cpu_signature()]).encode()).hexdigest()
    cache = Path(os.environ.get("ATTNLAB_CACHE") or Path.home() / ".cache" / "attnlab") / "kernels"
    target = cache / f"additive_kernel_{key[:16]}.so"
    if target.exists():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        src, lib = Path(tmp) / "additive_kernel.c", Path(tmp) / target.name
        src.write_text(SOURCE)
        command = [compiler, *FLAGS, str(src), "-o", str(lib)]
        subprocess.run(command, check=True, capture_output=True, text=True, timeout=120)
        os.replace(lib, target)  # atomic: processes compiling side by side each install a whole file
    return target


@functools.cache
def library() -> ctypes.CDLL | None:
    """The compiled kernel, or None (with one warning saying why) when it cannot be built or loaded."""
    if os.environ.get("ATTNLAB_ADDITIVE_KERNEL", "1") == "0":
        return None
    compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    try:
        if compiler is None:
            raise FileNotFoundError("no C compiler ($CC, cc or gcc) on PATH")
        lib = ctypes.CDLL(str(_build(compiler)))
        for name, argtypes in _ARGTYPES.items():
            getattr(lib, name).argtypes, getattr(lib, name).restype = argtypes, None
    except (OSError, subprocess.SubprocessError) as err:
        detail = getattr(err, "stderr", None) or err
        warnings.warn(f"additive score: no fused CPU kernel ({detail}); using the eager loop", stacklevel=2)
        return None
    return lib


_enabled = True


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Inside, ``usable`` says no, so ``AdditiveScores`` runs its eager loop (tests and benchmarks)."""
    global _enabled
    before, _enabled = _enabled, False
    try:
        yield
    finally:
        _enabled = before


def usable(*tensors: torch.Tensor) -> bool:
    """Whether the kernel can take these: plain (no subclass but Parameter) dense CPU float32 tensors, eager
    mode, not ``disabled()``, and a kernel built."""
    return (
        _enabled
        and all(
            type(t) in (torch.Tensor, torch.nn.Parameter)
            and t.layout == torch.strided
            and t.device.type == "cpu"
            and t.dtype == torch.float32
            for t in tensors
        )
        and not torch.compiler.is_compiling()
        and library() is not None
    )


def forward(ea: torch.Tensor, ec_t: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """ea = e^{2a} (b, h, t_q, n), ec_t = e^{2c} transposed (b, h, n, t_k), v (h, n) -> s (b, h, t_q, t_k)."""
    b, h, t_q, n = ea.shape
    t_k = ec_t.shape[3]
    ea, ec_t, v = ea.contiguous(), ec_t.contiguous(), v.contiguous()
    s = ea.new_empty(b, h, t_q, t_k)  # (b, h, t_q, t_k)
    sizes = (b * h, h, t_q, t_k, n, torch.get_num_threads())
    library().additive_forward(*_pointers(ea, ec_t, v, s), *sizes)
    return s


def backward(
    grad: torch.Tensor, ea: torch.Tensor, ec_t: torch.Tensor, v: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """grad (b, h, t_q, t_k) and forward's inputs -> da (b, h, t_q, n), dc (b, h, t_k, n), dv (h, n)."""
    b, h, t_q, n = ea.shape
    t_k = ec_t.shape[3]
    grad, ea, ec_t, v = grad.contiguous(), ea.contiguous(), ec_t.contiguous(), v.contiguous()
    da = torch.empty_like(ea)  # (b, h, t_q, n)
    dc_t = torch.empty_like(ec_t)  # Σ_i g r (1 − r), keys last: (b, h, n, t_k)
    gt = ea.new_empty(b, h, n, dtype=torch.float64)  # Σ_ij g tanh, (b, h, n)
    sizes = (b * h, h, t_q, t_k, n, torch.get_num_threads())
    library().additive_backward(*_pointers(grad, ea, ec_t, v, da, dc_t, gt), *sizes)
    dc = dc_t.transpose(2, 3) * (4.0 * v)[:, None, :]  # (b, h, t_k, n)
    dv = gt.sum(0).to(v.dtype)  # (h, n)
    return da, dc, dv


def _pointers(*tensors: torch.Tensor) -> list[int]:
    """Addresses of contiguous tensors' first elements, for the C functions."""
    return [t.data_ptr() for t in tensors]
