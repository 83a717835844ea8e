"""Remedies as typed actions for this machine, following the three documented remedies:
(1) unset or fix the override, (2) reinstall a compatible package, (3) let auto-detection pick.

A repair keeps the server's environment: it reinstalls only what is broken (`--no-deps` for the same version),
never torch or what the server pins; a new version is resolved with torch and those pins as constraints.
Every value read from the target (versions, requirement strings) is checked before it reaches an action, and
`fa_doctor.actions.render` quotes it anyway. docs/remedies.md says which releases the facts below come from.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable

from fa_doctor.actions import Action, PipInstall, PipUninstall, RunCommand, SetEnv, UnsetEnv
from fa_doctor.facts import Facts
from fa_doctor.families import normalize
from fa_doctor.finding import Remedy
from fa_doctor.probes.distributions import Distribution
from fa_doctor.probes.environment import OVERRIDE

FIX = "fa-doctor fix --apply"
UNSET_FIX = 'eval "$(fa-doctor fix --unset-override)"'
SERVERS = ("sglang", "vllm")

# flash-attn v2.8.3 release wheels (tag v2.8.3 publish.yml): torch 2.4-2.8, CUDA 12, both C++ ABIs,
# CPython 3.9-3.13, linux x86_64. flash-attn 2.8.3 and 2.8.3.post2 also ship flash_attn/cute (21 files in
# 2.8.3.post2), which FA4 owns: installing either after flash-attn-4 overwrites FA4's files.
_FA2_RELEASE = "2.8.3"
_FA2_TORCH = {(2, 4), (2, 5), (2, 6), (2, 7), (2, 8)}
_FA2_PYTHON = {(3, 9), (3, 10), (3, 11), (3, 12), (3, 13)}
_JOBS = (("MAX_JOBS", "4"),)
_FA2_BUILD_TOOLS = ("ninja", "packaging", "psutil", "setuptools", "wheel")
# sglang-kernel's exact torch pin per release, read from its wheel METADATA (the one being installed, which
# need not be the one installed).
SGL_KERNEL_TORCH = {"0.4.10": "2.14.1"}
# CUDA 12 builds of sglang-kernel are `+cu129` local versions on SGLang's own index; PyPI's are CUDA 13.
SGL_CU12_INDEX = "https://docs.sglang.ai/whl/cu129"
# Distributions a repair of an FA package may resolve: the server's pins on these become constraints.
_FA_CLOSURE = frozenset(
    normalize(n)
    for n in (
        "torch",
        "torchvision",
        "torchaudio",
        "sglang-kernel",
        "sgl-kernel",
        "flash-attn",
        "flash-attn-4",
        "nvidia-cutlass-dsl",
        "nvidia-cutlass-dsl-libs-base",
        "nvidia-cutlass-dsl-libs-core",
        "nvidia-cutlass-dsl-libs-cu12",
        "nvidia-cutlass-dsl-libs-cu13",
        "quack-kernels",
        "apache-tvm-ffi",
        "torch-c-dlpack-ext",
        "cuda-bindings",
        "cuda-python",
        "einops",
        "typing-extensions",
    )
)
_DSL_PARTS = ("nvidia-cutlass-dsl-libs-base", "nvidia-cutlass-dsl-libs-core")
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?\Z")


# ---- reading hostile metadata -------------------------------------------------------------------------------


def version_of(text: str | None) -> str | None:
    """`text` if it is a PEP 440 version (a `+local` label included), else None."""
    from packaging.version import InvalidVersion, Version

    if not text or len(text) > 64:
        return None
    try:
        Version(text)
    except InvalidVersion:
        return None
    return text


def requirement(text: str) -> str | None:
    """`name[extras]<specifier>` from a Requires-Dist line, if every part is well formed; markers dropped."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    from fa_doctor import requirements

    req = requirements.parse(text)
    if req is None or not _NAME.match(req.name) or len(text) > 512:
        return None
    try:
        spec = str(SpecifierSet(req.specifier))
    except InvalidSpecifier:
        return None
    extras = re.match(r"^\s*[A-Za-z0-9._-]+\s*(\[[A-Za-z0-9_.,\s-]*\])?", text)
    extra = (extras.group(1) or "").replace(" ", "") if extras else ""
    return req.name + extra + spec


def _applies(facts: Facts, text: str) -> bool:
    from fa_doctor import requirements
    from fa_doctor.derive.inventory import marker_env

    req = requirements.parse(text)
    if req is None:
        return False
    return req.marker is None or requirements.marker_applies(req.marker, marker_env(facts)) is True


def requires(facts: Facts, dist: Distribution, name: str) -> str | None:
    """`dist`'s requirement on `name` for this environment, well formed, or None."""
    want = normalize(name)
    for text in dist.requires:
        head = text.split(";", 1)[0].split("[", 1)[0]
        m = re.match(r"\s*([A-Za-z0-9._-]+)", head)
        if m and normalize(m.group(1)) == want and _applies(facts, text):
            return requirement(text)
    return None


def server(facts: Facts) -> Distribution | None:
    return facts.scan.first(*SERVERS)


def installed(facts: Facts, name: str) -> str | None:
    """The installed version of `name` (first on the path), if it is a valid version."""
    return version_of(facts.scan.index.get(normalize(name)))


def keep(facts: Facts, *extra: str) -> tuple[str, ...]:
    """Constraints that hold torch and the server's pins where they are (or at the pin, when not installed)."""
    names = ["torch"]
    srv = server(facts)
    pins: dict[str, str] = {}
    if srv is not None:
        for text in srv.requires:
            spec = requirement(text)
            if spec and "==" in spec and _applies(facts, text):
                name = normalize(re.split(r"[\[=<>!~]", spec, maxsplit=1)[0])
                if name in _FA_CLOSURE and name != normalize(srv.name):
                    pins[name] = re.sub(r"\[[^\]]*\]", "", spec)
                    names.append(name)
    names += [normalize(n) for n in extra]
    out: list[str] = []
    for name in dict.fromkeys(names):
        have = installed(facts, name)
        if have is not None:
            out.append(f"{name}=={have}")
        elif name in pins:
            out.append(pins[name])
    return tuple(out)


def _torch_mm(facts: Facts) -> tuple[int, int] | None:
    if facts.torch is None or not facts.torch.version:
        return None
    head = facts.torch.version.split("+")[0].split(".")
    try:
        return int(head[0]), int(head[1])
    except (ValueError, IndexError):
        return None


def _cuda13(facts: Facts) -> bool:
    return facts.torch_cuda is not None and facts.torch_cuda[0] >= 13


def pip_install(
    facts: Facts,
    requirements: Iterable[str],
    options: Iterable[str] = (),
    constraints: Iterable[str] = (),
    env: Iterable[tuple[str, str]] = (),
) -> PipInstall:
    """`pip install` into the interpreter that runs the server."""
    return PipInstall(facts.target.executable, tuple(requirements), tuple(options), tuple(constraints), tuple(env))


def reinstall_same(facts: Facts, *specs: str) -> PipInstall:
    """The same versions again, without touching anything they depend on."""
    return pip_install(facts, specs, ("--force-reinstall", "--no-deps"))


def pip(facts: Facts, *args: str) -> str:
    """Deprecated: a POSIX line for `pip install ARGS`, each argument quoted. Use `pip_install` (an action)."""
    return shlex.join([facts.target.executable, "-m", "pip", "install", *args])


def pip_uninstall(facts: Facts, *names: str) -> PipUninstall:
    return PipUninstall(facts.target.executable, names)


# ---- remedy (1) and (3) -------------------------------------------------------------------------------------


def pinned(facts: Facts) -> bool:
    """Whether anything pins the choice: the override variable or a backend flag."""
    return OVERRIDE in facts.env or facts.flags.any


def unset_override(valid: int | None = None) -> Remedy:
    actions: list[Action] = [UnsetEnv(OVERRIDE)]
    text = (
        f"(1) Unset {OVERRIDE} in this shell (`{UNSET_FIX}` does it) and remove it from env files and launch scripts "
        "(`fa-doctor fix --unset-override --env-file FILE`)"
    )
    if valid is not None:
        actions.append(SetEnv(OVERRIDE, str(valid)))
        text += f", or set it to {valid}, a value that works here (`fa-doctor fix --unset-override --set {valid}`)"
    return Remedy(text + ".", actions=tuple(actions))


def auto_detect(facts: Facts | None = None) -> Remedy:
    """Remedy (3); callers offer it only when `pinned(facts)`."""
    actions: list[Action] = []
    if facts is None or OVERRIDE in facts.env:
        actions.append(UnsetEnv(OVERRIDE))
    actions.append(RunCommand(("fa-doctor", "check")))
    return Remedy(
        f"(3) Remove the pin and let auto-detection choose: drop {OVERRIDE} and any "
        "--attention-backend fa3|fa4 from the launch command; `fa-doctor check` then shows what runs.",
        actions=tuple(actions),
    )


# ---- remedy (2): reinstall one implementation ---------------------------------------------------------------


def reinstall(facts: Facts, key: str) -> tuple[Remedy, ...]:
    """Remedy (2) for one implementation key, with the actions for this torch/CUDA/GPU."""
    if key == "fa2":
        return _fa2(facts)
    if key == "fa3-sgl":
        return _sgl_kernel(facts)
    if key == "fa3":
        return (
            Remedy(
                "(2) flash-attn-3 has no PyPI wheel: build it from the hopper/ folder of a flash-attention checkout. "
                "It needs nvcc >= 12.3, ninja and the installed torch (hence --no-build-isolation); the build takes "
                "well over an hour with MAX_JOBS=4.",
                actions=(
                    RunCommand(("git", "clone", "--depth", "1", "https://github.com/Dao-AILab/flash-attention.git")),
                    pip_install(
                        facts,
                        ("./flash-attention/hopper",),
                        ("--no-build-isolation", "--no-deps"),
                        env=(("MAX_JOBS", "4"),),
                    ),
                ),
            ),
        )
    if key in ("fa4", "fa4-sglang"):
        return _fa4(facts, key)
    if key == "vllm-fa":
        version = installed(facts, "vllm")
        spec = f"vllm=={version}" if version else "vllm"
        return (
            Remedy(
                "(2) Reinstall vLLM (its FA kernels are built into the vllm wheel), the same version, without its "
                "dependencies.",
                actions=(reinstall_same(facts, spec) if version else pip_install(facts, (spec,), (), keep(facts)),),
            ),
        )
    return ()


def _fa2(facts: Facts) -> tuple[Remedy, ...]:
    version = installed(facts, "flash-attn")
    mm = _torch_mm(facts)
    cuda = facts.torch_cuda
    abi = facts.torch.cxx11_abi if facts.torch else None
    py = (facts.target.version[0], facts.target.version[1])
    out: list[Remedy] = []
    fa4 = installed(facts, "flash-attn-4")
    after: tuple[Action, ...] = (reinstall_same(facts, f"flash-attn-4=={fa4}"),) if fa4 else ()
    cute = (
        f" flash-attn <= 2.8.3.post2 also ships an old flash_attn/cute that overwrites flash-attn-4 {fa4}'s files, "
        "so the last command puts FA4's copy back."
        if fa4
        else ""
    )
    wheel_fits = cuda is not None and cuda[0] == 12 and abi is not None and facts.target.machine == "x86_64"
    if wheel_fits and mm is not None and mm in _FA2_TORCH and py in _FA2_PYTHON:
        tag = f"cp{py[0]}{py[1]}"
        wheel = (
            f"flash_attn-{_FA2_RELEASE}+cu12torch{mm[0]}.{mm[1]}cxx11abi{str(abi).upper()}-{tag}-{tag}-linux_x86_64.whl"
        )
        url = f"https://github.com/Dao-AILab/flash-attention/releases/download/v{_FA2_RELEASE}/{wheel}"
        out.append(
            Remedy(
                f"(2) Install the flash-attn {_FA2_RELEASE} release wheel built for torch {mm[0]}.{mm[1]}, CUDA 12 "
                f"and this C++ ABI (no compiler needed).{cute}",
                actions=(reinstall_same(facts, url), *after),
            )
        )
    spec = f"flash-attn=={version}" if version else "flash-attn"
    build = (
        pip_install(
            facts, (spec,), ("--force-reinstall", "--no-deps", "--no-build-isolation"), env=(("MAX_JOBS", "4"),)
        )
        if version
        else pip_install(facts, (spec,), ("--no-build-isolation",), keep(facts), _JOBS)
    )
    out.append(
        Remedy(
            "(2) Build flash-attn for this torch: PyPI has only its source, and its setup.py imports torch, so it "
            "needs --no-build-isolation and, in this interpreter, the build tools (installed first). setup.py first "
            "tries a prebuilt wheel from the GitHub release for this torch/CUDA/ABI/Python; without one it compiles "
            "with nvcc (a CUDA toolkit of torch's CUDA major), which takes hours and several GB of RAM per job "
            f"(MAX_JOBS=4 bounds it).{cute}",
            actions=(pip_install(facts, _FA2_BUILD_TOOLS, (), keep(facts)), build, *after),
        )
    )
    return tuple(out)


def _sgl_kernel(facts: Facts) -> tuple[Remedy, ...]:
    srv = facts.scan.first("sglang")
    wanted = requires(facts, srv, "sglang-kernel") if srv else None
    have = installed(facts, "sglang-kernel") or installed(facts, "sgl-kernel")
    pin = re.fullmatch(r"sglang-kernel==([0-9][0-9A-Za-z.+!]*)", wanted or "")
    target = version_of(pin.group(1)) if pin else have
    torch_now = installed(facts, "torch")
    dist = facts.scan.first("sglang-kernel", "sgl-kernel")
    torch_pin: str | None = None
    if target and have and target.split("+")[0] == have.split("+")[0] and dist is not None:
        spec = requires(facts, dist, "torch")
        torch_pin = spec.split("==", 1)[1] if spec and "==" in spec else None
    elif target:
        torch_pin = SGL_KERNEL_TORCH.get(target.split("+")[0])
    cu12 = facts.torch_cuda is not None and facts.torch_cuda[0] == 12
    text = f"(2) {'Reinstall' if have else 'Install'} sglang-kernel (FA3 lives in sgl_kernel/flash_ops)"
    if wanted:
        text += f"; {srv.name if srv else 'the server'} requires {wanted}"
    options: list[str] = []
    spec = f"sglang-kernel=={target}" if target else "sglang-kernel"
    if cu12:
        text += (
            f"; PyPI's sglang-kernel wheels are CUDA 13 builds and torch here is CUDA 12, so take the `+cu129` build "
            f"from SGLang's index ({SGL_CU12_INDEX}; not every release has one)"
        )
        options += ["--extra-index-url", SGL_CU12_INDEX]
        if target and "+" not in target:
            spec = f"sglang-kernel=={target}+cu129"
    if torch_pin and torch_now and torch_pin != torch_now.split("+")[0]:
        return (
            Remedy(
                text + f"; sglang-kernel {target} is built against torch {torch_pin} exactly, but torch {torch_now} is "
                "installed. fa-doctor does not replace the server's torch: install the sglang-kernel release built "
                f"for torch {torch_now.split('+')[0]}, or bring torch and the server to the versions the server "
                "pins together (see package.requirement).",
                actions=(RunCommand(("fa-doctor", "check")),),
            ),
        )
    if torch_pin:
        text += f"; it is built against torch {torch_pin} exactly, which is installed"
    elif target:
        text += "; its torch pin is not known here: pip refuses it if it needs another torch"
    if have and target and have.split("+")[0] == target.split("+")[0]:
        action = pip_install(facts, (spec,), ("--force-reinstall", "--no-deps", *options))
    else:
        text += " (a new install: torch and the server's pins are held as constraints)"
        action = pip_install(facts, (spec,), options, keep(facts))
    return (Remedy(text + ".", actions=(action,)),)


def _fa4(facts: Facts, key: str) -> tuple[Remedy, ...]:
    srv = facts.scan.first("sglang")
    cu = "cu13" if _cuda13(facts) else "cu12"
    dsl = installed(facts, "nvidia-cutlass-dsl")
    libs = [n for n in ("nvidia-cutlass-dsl-libs-cu12", "nvidia-cutlass-dsl-libs-cu13") if installed(facts, n)]
    text = (
        "(2) Reinstall the CuTe DSL runtime FA4 runs on, the same versions without their dependencies, into the "
        "interpreter's own site-packages (not with --target: the DSL's .pth file must be processed)"
    )
    actions: list[Action] = []
    if dsl:
        parts = ["nvidia-cutlass-dsl", *_DSL_PARTS, *(libs or [f"nvidia-cutlass-dsl-libs-{cu}"])]
        actions.append(reinstall_same(facts, *(f"{p}=={dsl}" for p in parts)))
    fa4 = installed(facts, "flash-attn-4")
    if key == "fa4" and fa4:
        text = text.replace("the CuTe DSL runtime FA4 runs on", "flash-attn-4 and the CuTe DSL runtime it runs on")
        actions.insert(0, reinstall_same(facts, f"flash-attn-4=={fa4}"))
    if not actions or (key == "fa4" and not fa4):
        wanted = (requires(facts, srv, "flash-attn-4") if srv else None) or "flash-attn-4"
        libs_note = "[cu13] for torch CUDA 13" if cu == "cu13" else "its CUDA 12 libs"
        spec = wanted.replace("flash-attn-4", "flash-attn-4[cu13]", 1) if cu == "cu13" and "[" not in wanted else wanted
        text = (
            f"(2) Install {spec} with its CuTe DSL runtime ({libs_note}); torch and the server's pins are held as "
            "constraints, so pip adds only what is missing"
        )
        actions = [pip_install(facts, (spec,), (), keep(facts))]
    return (Remedy(text + ".", actions=tuple(actions)),)
