"""Standalone smoke-test child, run as `python -c <this source> <json config>` in the target interpreter (standard
library and torch only): a few tiny FlashAttention calls compared with an fp32 reference. Results go as JSON lines
to the pipe fd the config names, which no C library's stdout can corrupt."""

from __future__ import annotations

import contextlib
import faulthandler
import hashlib
import importlib
import json
import math
import os
import signal
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Iterator
from typing import Any

_MAX_WARNINGS = 20
_MAX_TEXT = 4000


class Channel:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    def emit(self, event: str, **fields: Any) -> None:
        line = json.dumps({"event": event, "t": time.perf_counter(), **fields}, default=str) + "\n"
        data = line.encode("utf-8", "replace")
        # One os.write per line and no buffering: a crash right after still leaves complete lines behind.
        while data:
            data = data[os.write(self.fd, data) :]


def describe(exc: BaseException) -> dict[str, Any]:
    """Type, message, the whole __cause__/__context__ chain and the traceback's last lines."""
    chain: list[str] = []
    seen = {id(exc)}
    link = exc.__cause__ or exc.__context__
    # The context is kept even when suppressed ("raise ... from None"): that is where bare excepts hide the cause.
    while link is not None and id(link) not in seen and len(chain) < 10:
        seen.add(id(link))
        chain.append(f"{type(link).__name__}: {link}"[:_MAX_TEXT])
        link = link.__cause__ or link.__context__
    lines = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).splitlines()
    tail = "\n".join(lines[-15:])[-_MAX_TEXT:]
    return {"type": type(exc).__name__, "message": str(exc)[:_MAX_TEXT], "chain": chain, "traceback": tail}


@contextlib.contextmanager
def watch_warnings(channel: Channel, seen: set[str]) -> Iterator[None]:
    """Report what a user would see: every warning except the deprecation notes Python hides by default."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for category in (DeprecationWarning, PendingDeprecationWarning):
            warnings.filterwarnings("ignore", category=category)
        try:
            yield
        finally:
            for w in caught:
                # Once per place, as Python's "default" action does: the CuTe DSL warns again for every kernel.
                place = f"{w.category.__name__}:{w.filename}:{w.lineno}"
                if place not in seen and len(seen) < _MAX_WARNINGS:
                    seen.add(place)
                    text = f"{w.category.__name__}: {w.message}"[:500]
                    channel.emit("warning", text=f"{text} ({os.path.basename(w.filename)}:{w.lineno})")


def module_origin(name: str) -> str | None:
    mod = sys.modules.get(name)
    if mod is None:
        return None
    # vLLM's synthetic flash_attn module and namespace packages have no __file__, only a __path__.
    file = getattr(mod, "__file__", None)
    return str(file) if file else "__path__=" + json.dumps([str(p) for p in getattr(mod, "__path__", [])])


def dist_versions(names: list[str]) -> dict[str, str]:
    from importlib import metadata

    found: dict[str, str] = {}
    for name in names:
        with contextlib.suppress(Exception):  # absent or broken metadata is just "unknown"
            found[name] = metadata.version(name)
    return found


# What a compiled FA4 kernel depends on beyond the cache's own key (FA4 hashes its sources and the CuTe DSL
# version, not the target arch): every FA4/CuTe variable except the cache locations set below.
_CACHE_PREFIXES = ("CUTE_DSL_", "FLASH_ATTENTION_", "FLASH_ATTN_", "FA_", "CUTLASS_", "SGLANG_CUTE_", "TVM_FFI_")
_CACHE_DIRS = {
    "FLASH_ATTENTION_CUTE_DSL_CACHE_DIR": "flash-attn",  # FA4 and SGLang's older vendored copy
    "SGLANG_CUTE_AOT_CACHE_DIR": "sglang-aot",  # SGLang's vendored FA4 (sglang.kernels.jit.cute_aot_cache)
    "CUTE_DSL_CACHE_DIR": "cute-dsl",  # the CuTe DSL's own file cache
}
_CACHE_OWN = frozenset(
    {*_CACHE_DIRS, "FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED", "CUTE_DSL_DISABLE_FILE_CACHING", "FA_DOCTOR_RUN"}
)


def cache_identity(config: dict[str, Any], torch: Any) -> dict[str, Any]:
    """What the child's result depends on: a cache filled under different values must not be used."""
    gpu = str(config["device"])
    if gpu.startswith("cuda"):
        try:
            major, minor = torch.cuda.get_device_capability(0)
            gpu = f"{torch.cuda.get_device_name(0)} sm_{major}{minor}"
        except Exception as exc:  # no usable GPU: the device phase reports it; the identity only needs to differ
            gpu = f"unknown ({type(exc).__name__})"
    env = {k: v for k, v in os.environ.items() if k.startswith(_CACHE_PREFIXES) and k not in _CACHE_OWN}
    return {
        "env": dict(sorted(env.items())),
        "versions": dist_versions(list(config.get("cache_dists", []))),
        "gpu": gpu,
        "torch": str(torch.__version__),
        "python": sys.version.split()[0],
        "module": str(config["module"]),
    }


def use_cache(channel: Channel, config: dict[str, Any], torch: Any) -> None:
    """Point every FA4 compile cache at a folder named by the identity's hash, before the module is imported
    (FA4 reads its variables at import)."""
    identity = cache_identity(config, torch)
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
    folder = os.path.join(str(config["cache_root"]), key)
    try:
        for sub in _CACHE_DIRS.values():
            os.makedirs(os.path.join(folder, sub), mode=0o700, exist_ok=True)
        warm = any(os.listdir(os.path.join(folder, sub)) for sub in _CACHE_DIRS.values())
        note = os.path.join(folder, "identity.json")
        if not os.path.exists(note):
            with open(note, "w", encoding="utf-8") as fh:
                json.dump(identity, fh, indent=1, sort_keys=True)
    except OSError as exc:
        channel.emit("warning", text=f"FA4 compile cache disabled: cannot use {folder}: {exc}")
        disable_cache()
        return
    os.environ["FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED"] = "1"
    os.environ.pop("CUTE_DSL_DISABLE_FILE_CACHING", None)
    for name, sub in _CACHE_DIRS.items():
        os.environ[name] = os.path.join(folder, sub)
    channel.emit("info", cache_dir=folder, cache_warm=warm, cache_key=key)


def disable_cache() -> None:
    """No persistent cache anywhere: not FA4's, not SGLang's (an empty value keeps it in memory), not the DSL's."""
    os.environ["FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED"] = "0"
    os.environ.pop("FLASH_ATTENTION_CUTE_DSL_CACHE_DIR", None)
    os.environ["SGLANG_CUTE_AOT_CACHE_DIR"] = ""
    os.environ["CUTE_DSL_DISABLE_FILE_CACHING"] = "1"


def attend(q: Any, k: Any, v: Any, scale: float, causal: bool) -> Any:
    """fp32 softmax(QK^T * scale + mask) V for one sequence; q (Lq, H, D), k/v (Lk, Hk, D)."""
    import torch

    groups = q.shape[1] // k.shape[1]
    k, v = (t.repeat_interleave(groups, dim=1) for t in (k, v))
    scores = torch.einsum("qhd,khd->hqk", q, k) * scale
    if causal:
        lq, lk = q.shape[0], k.shape[0]
        # Bottom-right alignment, as FlashAttention does: the last query sees every key.
        hidden = torch.arange(lk).unsqueeze(0) > torch.arange(lq).unsqueeze(1) + (lk - lq)
        scores = scores.masked_fill(hidden, float("-inf"))
    return torch.einsum("hqk,khd->qhd", torch.softmax(scores, dim=-1), v)


class Case:
    """Inputs built on the CPU, seeded with the case's index, so the same case gives the same tensors on any device."""

    def __init__(self, spec: dict[str, Any], device: str, index: int) -> None:
        import torch

        self.spec, self.device = spec, device
        dtype = getattr(torch, spec["dtype"])
        d, h, hk = int(spec["head_dim"]), int(spec["heads"]), int(spec["kv_heads"])
        self.scale = 1.0 / math.sqrt(d)
        self.causal = bool(spec["causal"])
        gen = torch.Generator().manual_seed(index)

        def rand(*shape: int) -> Any:
            return torch.randn(*shape, generator=gen, dtype=torch.float32).to(dtype)

        self.lens = [int(n) for n in spec["seqlens"]]
        if spec["function"] == "flash_attn_with_kvcache":
            batch, cache = len(self.lens), int(spec["cache_len"])
            self.q, self.k, self.v = rand(batch, 1, h, d), rand(batch, cache, hk, d), rand(batch, cache, hk, d)
        else:
            total = sum(self.lens)
            self.q, self.k, self.v = rand(total, h, d), rand(total, hk, d), rand(total, hk, d)

    def call(self, mod: Any) -> tuple[Any, float]:
        import torch

        fn = getattr(mod, self.spec["function"], None)
        if fn is None:
            raise AttributeError(f"module {mod.__name__!r} has no attribute {self.spec['function']!r}")
        dev = self.device
        q, k, v = self.q.to(dev), self.k.to(dev), self.v.to(dev)
        lens = torch.tensor(self.lens, dtype=torch.int32)
        if self.spec["function"] == "flash_attn_with_kvcache":
            kwargs: dict[str, Any] = {"q": q, "k_cache": k, "v_cache": v, "cache_seqlens": lens.to(dev)}
        else:
            cu = torch.cat([torch.zeros(1, dtype=torch.int32), lens.cumsum(0).to(torch.int32)]).to(dev)
            kwargs = {"q": q, "k": k, "v": v, "cu_seqlens_q": cu, "cu_seqlens_k": cu}
            kwargs.update(max_seqlen_q=max(self.lens), max_seqlen_k=max(self.lens))
        start = time.perf_counter()
        # Keywords only: positional orders differ between FA2, FA3, FA4 and vLLM's fork.
        r = fn(**kwargs, softmax_scale=self.scale, causal=self.causal)
        if dev.startswith("cuda"):
            torch.cuda.synchronize()
        return (r[0] if isinstance(r, tuple) else r), time.perf_counter() - start

    def reference(self) -> Any:
        import torch

        q, k, v = self.q.float(), self.k.float(), self.v.float()
        if self.spec["function"] == "flash_attn_with_kvcache":
            # The single decode query sees keys [0, cache_seqlen) of its own row.
            parts = [attend(q[b], k[b, :n], v[b, :n], self.scale, self.causal) for b, n in enumerate(self.lens)]
            return torch.stack(parts)
        seqs = zip(*(t.split(self.lens) for t in (q, k, v)), strict=True)
        return torch.cat([attend(qi, ki, vi, self.scale, self.causal) for qi, ki, vi in seqs])

    def compare(self, out: Any) -> dict[str, Any]:
        import torch

        if not isinstance(out, torch.Tensor) or tuple(out.shape) != tuple(self.q.shape):
            shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            return {"max_abs_err": None, "problem": f"unexpected output {shape}, expected shape {tuple(self.q.shape)}"}
        got = out.detach().float().cpu()
        bad = int((~torch.isfinite(got)).sum())
        if bad:
            return {"max_abs_err": None, "problem": f"output contains {bad} non-finite values (NaN/Inf)"}
        return {"max_abs_err": float((got - self.reference()).abs().max()), "problem": None}


def run_case(channel: Channel, mod: Any, case: Case, seen: set[str]) -> dict[str, Any]:
    with watch_warnings(channel, seen):
        try:
            out, seconds = case.call(mod)
            return {"name": case.spec["name"], "seconds": seconds, "error": None, "out": out}
        except Exception as exc:  # the call's failure is the data we report
            return {"name": case.spec["name"], "error": describe(exc)}


def finish_case(channel: Channel, case: Case, result: dict[str, Any]) -> None:
    out = result.pop("out", None)
    if result["error"] is None:
        try:
            result.update(case.compare(out))
        except Exception as exc:  # a reference failure is reported, not raised
            result.update(max_abs_err=None, problem=f"reference check failed: {type(exc).__name__}: {exc}")
    channel.emit("case", **result)


def watch_parent(parent: int, every: float = 0.5) -> None:
    """Once fa-doctor is gone (SIGKILL: its pid no longer exists, or we were re-parented), end our whole process
    group instead of holding the GPU. Kernel waits release the GIL, so this thread runs while the main one is stuck."""
    first = os.getppid()

    def alive() -> bool:
        try:
            os.kill(parent, 0)
        except ProcessLookupError:
            return False
        except OSError:  # exists, but not ours to signal
            pass
        return os.getppid() == first

    def watch() -> None:
        while True:
            time.sleep(every)
            if not alive():
                # The runner starts the run in a session of its own: all of that session's group is ours to end.
                if os.getsid(0) == os.getpgrp():
                    os.killpg(os.getpgrp(), signal.SIGKILL)
                os._exit(1)

    threading.Thread(target=watch, name="fa-doctor-parent-watch", daemon=True).start()


def loaded_files(limit: int = 20000) -> list[str]:
    """Every file the import and the kernels pulled in: module files and the shared objects in /proc/self/maps
    (where there is one: elsewhere, the module files alone)."""
    files: dict[str, None] = {}
    for mod in list(sys.modules.values()):
        path = getattr(mod, "__file__", None)
        if isinstance(path, str) and os.path.isabs(path):
            files[path] = None
    with contextlib.suppress(OSError), open("/proc/self/maps", encoding="utf-8", errors="surrogateescape") as fh:
        for line in fh:
            parts = line.split(None, 5)
            if len(parts) == 6 and parts[5].startswith("/"):
                files[parts[5].rstrip("\n").removesuffix(" (deleted)")] = None
    return sorted(files)[:limit]


def main(config: dict[str, Any]) -> None:
    channel = Channel(int(config["fd"]))
    if config.get("parent"):
        watch_parent(int(config["parent"]))
    # Grandchildren (compilers, helpers) must not hold the result pipe open after we exit.
    os.set_inheritable(channel.fd, False)
    channel.emit("phase", name="import", state="start")
    channel.emit("phase", name="import_torch", state="start")
    try:
        import torch
    except BaseException as exc:  # the import failure is the result
        channel.emit("import_error", stage="torch", **describe(exc))
        return
    channel.emit("phase", name="import_torch", state="end")
    env = {"torch": str(torch.__version__), "torch_cuda": str(torch.version.cuda)}
    env["cxx11abi"] = str(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", "unknown"))
    seen: set[str] = set()
    module = str(config["module"])
    if config.get("cache_root"):
        use_cache(channel, config, torch)
    elif config.get("api") == "cute":
        disable_cache()
    try:
        with watch_warnings(channel, seen):
            mod = importlib.import_module(module)
    except BaseException as exc:  # including SystemExit raised by a broken package
        env.update(dist_versions(list(config.get("dists", []))))
        channel.emit("info", environment=env, flash_attn_origin=module_origin("flash_attn"))
        channel.emit("import_error", stage="module", **describe(exc))
        return
    channel.emit("phase", name="import", state="end")
    channel.emit(
        "info", environment=env, module_file=module_origin(module), flash_attn_origin=module_origin("flash_attn")
    )
    device = str(config["device"])
    if device.startswith("cuda"):
        channel.emit("phase", name="device", state="start")
        if not torch.cuda.is_available():
            msg = f"torch.cuda.is_available() is False (torch {torch.__version__}, CUDA {torch.version.cuda})"
            channel.emit("fatal", type="RuntimeError", message=msg, chain=[], traceback="", stage="device")
            return
        channel.emit("info", device_name=torch.cuda.get_device_name(0))
        channel.emit("phase", name="device", state="end")
    cases = [Case(spec, device, i) for i, spec in enumerate(config["cases"])]
    channel.emit("phase", name="first_call", state="start")
    first = run_case(channel, mod, cases[0], seen)
    channel.emit("phase", name="first_call", state="end")
    channel.emit("phase", name="check", state="start")
    finish_case(channel, cases[0], first)
    for case in cases[1:]:
        finish_case(channel, case, run_case(channel, mod, case, seen))
    channel.emit("phase", name="check", state="end")
    channel.emit("loaded", files=loaded_files())
    channel.emit("done")


if __name__ == "__main__":
    faulthandler.enable()
    try:
        main(json.loads(sys.argv[1]))
    except BaseException as exc:  # a harness bug must still reach the parent as data
        try:
            Channel(int(json.loads(sys.argv[1])["fd"])).emit("fatal", **describe(exc))
        except Exception:  # nowhere left to report; stderr has the traceback
            traceback.print_exc()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter and CUDA teardown: it can hang or crash after the results are complete.
    os._exit(0)
