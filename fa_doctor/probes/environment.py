"""What the environment says: the variables that pin or steer an FA version (captured once), the tools a source build
would use (found where torch.utils.cpp_extension looks; nothing is run), the calling shell, and where a report ran:
the host name and the ids the scheduler that placed the run gives the node (Slurm's variables, Kubernetes'
downward-API ones inside a pod, FA_DOCTOR_RAY_NODE_ID from `fleet ray`; docs/fleet.md)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # loaded by probe_host only: `--help` imports this module
    from fa_doctor.model.machine import HostFacts

OVERRIDE = "SGLANG_FLASHATTENTION_VERSION"
# Those that steer FlashAttention in SGLang (probes/sglang_rules.py looks for them in its source).
SGLANG_KNOBS = (OVERRIDE, "SGLANG_USE_SGL_FA3_KERNEL", "SGLANG_INKLING_FA4_USE_PIP", "SGLANG_IS_FLASHINFER_AVAILABLE")

# Exact names fa-doctor validates (docs/findings.md lists what each one does).
KNOBS = (
    *SGLANG_KNOBS,
    "SGLANG_CACHE_DIR",
    "VLLM_FLASH_ATTN_VERSION",
    "VLLM_ATTENTION_BACKEND",
    "VLLM_BATCH_INVARIANT",
    "FLASH_ATTENTION_ARCH",
    "CUTE_DSL_ARCH",
    "FLASH_ATTENTION_TRITON_AMD_ENABLE",
    "FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED",
    "FLASH_ATTENTION_CUTE_DSL_CACHE_DIR",
    "FLASH_ATTENTION_FORCE_BUILD",
    "FLASH_ATTN_CUDA_ARCHS",
    "CUDA_VISIBLE_DEVICES",
    "HF_HUB_OFFLINE",
)


# Not knobs, but facts a check needs: where the dynamic loader looks (the libstdc++ an extension would load).
CONTEXT = ("LD_LIBRARY_PATH",)


def capture(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The knobs that are set (empty strings included: an empty override is a mistake worth naming)."""
    source = os.environ if env is None else env
    return {name: source[name] for name in (*KNOBS, *CONTEXT) if name in source}


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_nvcc(env: Mapping[str, str]) -> str | None:
    """nvcc under `CUDA_HOME` (or `CUDA_PATH`), else on `PATH`, else in `/usr/local/cuda`; or None."""
    for name in ("CUDA_HOME", "CUDA_PATH"):
        home = env.get(name, "")
        if home and os.path.isabs(home):
            nvcc = os.path.join(home, "bin", "nvcc")
            return nvcc if _executable(nvcc) else None  # cpp_extension takes this toolkit, nvcc or not
    default = "/usr/local/cuda/bin/nvcc"
    return shutil.which("nvcc", path=env.get("PATH", "")) or (default if _executable(default) else None)


def find_git(env: Mapping[str, str]) -> str | None:
    return shutil.which("git", path=env.get("PATH", ""))


# Names a process or $SHELL may carry, mapped to the syntax fa-doctor prints for it.
_SHELLS = {
    **dict.fromkeys(("sh", "dash", "ash", "busybox", "ksh", "mksh", "yash"), "sh"),
    **{name: name for name in ("bash", "zsh", "fish")},
    **dict.fromkeys(("pwsh", "powershell"), "powershell"),
}


def _known(name: str | None) -> str | None:
    """The syntax for a process name or $SHELL (a login shell's argv[0] is -bash; on Windows, pwsh.exe)."""
    return _SHELLS.get(os.path.basename(name.strip()).lower().removeprefix("-").removesuffix(".exe")) if name else None


def _shellingham() -> str | None:
    try:
        import shellingham  # type: ignore[import-untyped]  # a dependency; imported only when used

        name, _path = shellingham.detect_shell()
    except Exception:  # not installed, shellingham.ShellDetectionFailure, or /proc unreadable
        return None
    return str(name)


def detect_shell(env: Mapping[str, str], probe: Callable[[], str | None] = _shellingham) -> str:
    """For `fix --unset-override`: the nearest known shell among our ancestors (shellingham), else $SHELL, else sh."""
    return _known(probe()) or _known(env.get("SHELL")) or "sh"


RAY_NODE_VAR = "FA_DOCTOR_RAY_NODE_ID"
K8S_VARS = {"k8s_node": "NODE_NAME", "k8s_pod": "POD_NAME", "k8s_namespace": "POD_NAMESPACE"}
_POD_VARS = {**K8S_VARS, "k8s_index": "JOB_COMPLETION_INDEX"}  # read only inside a pod
_HOST_VARS = {"slurm_job_id": "SLURM_JOB_ID", "slurm_node_id": "SLURM_NODEID", "slurm_node_name": "SLURMD_NODENAME"}
_MAX_ID = 253  # a DNS name's length: nothing a scheduler names is longer; a longer value is cut


def probe_host(env: Mapping[str, str] | None = None, hostname: str | None = None) -> HostFacts:
    from fa_doctor.model.machine import HostFacts

    source = os.environ if env is None else env
    try:  # gethostname(2), without importing socket (~2 ms)
        name = hostname if hostname is not None else os.uname().nodename
    except OSError:
        name = ""
    pod = _POD_VARS if source.get("KUBERNETES_SERVICE_HOST") else {}
    fields = {**_HOST_VARS, "ray_node_id": RAY_NODE_VAR, **pod}
    ids = {field: source.get(var, "").strip()[:_MAX_ID] or None for field, var in fields.items()}
    return HostFacts(name[:_MAX_ID] or "unknown", **ids)
