"""Exact commands for this machine, following the three documented remedies:
(1) unset or fix the override, (2) reinstall a compatible package, (3) let auto-detection pick."""

from __future__ import annotations

import shlex

from fa_doctor.facts import Facts
from fa_doctor.finding import Remedy
from fa_doctor.probes.environment import OVERRIDE

# flash-attn v2.8.3 release wheels: torch 2.4-2.8, CUDA 12, both C++ ABIs (reference/fa-packages.md 4.1).
_FA2_RELEASE = "2.8.3"
_FA2_TORCH = {(2, 4), (2, 5), (2, 6), (2, 7), (2, 8)}


def pip(facts: Facts, *args: str) -> str:
    """`<target python> -m pip install ...`: installs into the interpreter that runs the server."""
    return " ".join([shlex.quote(facts.target.executable), "-m", "pip", "install", *args])


def pip_uninstall(facts: Facts, *names: str) -> str:
    return " ".join([shlex.quote(facts.target.executable), "-m", "pip", "uninstall", "-y", *names])


def unset_override(valid: int | None = None) -> Remedy:
    commands = [f"unset {OVERRIDE}"]
    text = f"(1) Unset {OVERRIDE} (and remove it from env files and launch scripts)"
    if valid is not None:
        commands.append(f"export {OVERRIDE}={valid}")
        text += f", or set it to {valid}, a value that works here"
    return Remedy(text + ".", tuple(commands))


def auto_detect() -> Remedy:
    return Remedy(
        f"(3) Remove the pin and let auto-detection choose: drop {OVERRIDE} and any "
        "--attention-backend fa3|fa4 from the launch command; `fa-doctor check` then shows what runs.",
        (f"unset {OVERRIDE}", "fa-doctor check"),
    )


def _torch_tag(facts: Facts) -> tuple[int, int] | None:
    if facts.torch is None or not facts.torch.version:
        return None
    head = facts.torch.version.split("+")[0].split(".")
    try:
        return int(head[0]), int(head[1])
    except (ValueError, IndexError):
        return None


def fa2_commands(facts: Facts) -> tuple[str, ...]:
    torch_mm = _torch_tag(facts)
    cuda = facts.torch_cuda
    abi = facts.torch.cxx11_abi if facts.torch else None
    if (
        torch_mm in _FA2_TORCH
        and cuda is not None
        and cuda[0] == 12
        and abi is not None
        and facts.target.machine == "x86_64"
    ):
        py = facts.target.python_tag
        wheel = (
            f"flash_attn-{_FA2_RELEASE}+cu12torch{torch_mm[0]}.{torch_mm[1]}cxx11abi{str(abi).upper()}"
            f"-{py}-{py}-linux_x86_64.whl"
        )
        url = f"https://github.com/Dao-AILab/flash-attention/releases/download/v{_FA2_RELEASE}/{wheel}"
        return (pip(facts, "--force-reinstall", "--no-deps", url),)
    return ("MAX_JOBS=4 " + pip(facts, "--force-reinstall", "--no-deps", "--no-build-isolation", "flash-attn"),)


def _sglang_pin(facts: Facts, name: str) -> str | None:
    dist = facts.scan.first("sglang")
    if dist is None:
        return None
    for req in dist.requires:
        head = req.split(";", 1)[0].replace(" ", "")
        if head.lower().replace("_", "-").startswith(name + "==") or head.lower().startswith(name + ">="):
            return head
    return None


def reinstall(facts: Facts, key: str) -> tuple[Remedy, ...]:
    """Remedy (2) for one implementation key, with the commands for this torch/CUDA/GPU."""
    cuda13 = facts.torch_cuda is not None and facts.torch_cuda[0] >= 13
    if key == "fa2":
        return (Remedy("(2) Reinstall flash-attn built for this torch, CUDA and C++ ABI.", fa2_commands(facts)),)
    if key == "fa3-sgl":
        spec = _sglang_pin(facts, "sglang-kernel") or "sglang-kernel"
        dist = facts.scan.first("sglang-kernel", "sgl-kernel")
        torch_pin = next(
            (
                r.split(";")[0].replace(" ", "")
                for r in (dist.requires if dist else ())
                if r.replace(" ", "").startswith("torch==")
            ),
            None,
        )
        cmds = [pip(facts, "--force-reinstall", "--no-deps", spec)]
        text = "(2) Reinstall sglang-kernel (FA3 lives in sgl_kernel/flash_ops)"
        if torch_pin:
            cmds.append(pip(facts, torch_pin))
            text += f"; it is built against {torch_pin.replace('==', ' ')} exactly, so install that torch"
        if not cuda13:
            text += "; PyPI's wheel is a CUDA 13 build: CUDA 12 builds are at https://github.com/sgl-project/whl"
        return (Remedy(text + ".", tuple(cmds)),)
    if key == "fa3":
        return (
            Remedy(
                "(2) flash-attn-3 has no PyPI wheel: build it from the hopper/ directory (nvcc >= 12.3).",
                (
                    "git clone https://github.com/Dao-AILab/flash-attention.git",
                    "cd flash-attention/hopper && MAX_JOBS=4 " + pip(facts, "--no-build-isolation", "."),
                ),
            ),
        )
    if key in ("fa4", "fa4-sglang"):
        spec = _sglang_pin(facts, "flash-attn-4") or "flash-attn-4"
        extra = spec.replace("flash-attn-4", "flash-attn-4[cu13]", 1) if cuda13 else spec
        dsl = facts.scan.first("nvidia-cutlass-dsl")
        dsl_spec = f"nvidia-cutlass-dsl{'[cu13]' if cuda13 else ''}" + (f"=={dsl.version}" if dsl else "")
        text = (
            "(2) Reinstall FA4 and its CuTe DSL runtime into the interpreter's own site-packages "
            "(not with --target: the DSL's .pth file must be processed)"
        )
        return (
            Remedy(
                text + ".",
                (
                    pip(facts, "--force-reinstall", shlex.quote(extra)),
                    pip(facts, "--force-reinstall", shlex.quote(dsl_spec)),
                ),
            ),
        )
    if key == "vllm-fa":
        return (
            Remedy(
                "(2) Reinstall vLLM: its FA kernels are built into the vllm wheel.",
                (pip(facts, "--force-reinstall", "--no-deps", "vllm"),),
            ),
        )
    return ()
