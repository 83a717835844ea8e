"""The server's own unmet requirements, and which distribution a missing module belongs to.

A smoke test that fails on `No module named 'orjson'` is not an FA problem: orjson is a requirement of the
installed sglang that pip never installed. This module names the distribution that requires the module and
turns that distribution's unmet requirements (as `pip check` reports them) into an install that holds torch
and the server's other pins where they are.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from fa_doctor.actions import RunCommand
from fa_doctor.checks.remedies import (
    SGL_KERNEL_TORCH,
    installed,
    keep,
    pip_install,
    reinstall,
    requirement,
    requires,
    server,
)
from fa_doctor.facts import Facts
from fa_doctor.families import normalize
from fa_doctor.finding import Remedy
from fa_doctor.probes.distributions import Distribution

# Import names whose distribution is named otherwise (the rest: the import name with _ as -).
MODULE_DISTRIBUTION = {
    "cutlass": "nvidia-cutlass-dsl-libs-core",
    "tvm_ffi": "apache-tvm-ffi",
    "quack": "quack-kernels",
    "sgl_kernel": "sglang-kernel",
    "flash_attn_interface": "flash-attn-3",
    "yaml": "pyyaml",
    "PIL": "pillow",
    "zmq": "pyzmq",
    "google": "protobuf",
    "cv2": "opencv-python",
}


def distribution_for_module(module: str) -> str:
    top = module.split(".", 1)[0]
    return MODULE_DISTRIBUTION.get(top, normalize(top))


def who_requires(facts: Facts, module: str) -> Distribution | None:
    """The installed distribution (server first) that requires the distribution providing `module`."""
    want = normalize(distribution_for_module(module))
    ordered = [d for d in (server(facts),) if d] + list(facts.scan.distributions)
    for dist in ordered:
        if requires(facts, dist, want) is not None:
            return dist
    return None


def _keep_except(facts: Facts, specs: Iterable[str]) -> tuple[str, ...]:
    """`keep`, less the distributions being installed: the server's own pin on them wins."""
    names = {normalize(re.split(r"[\[=<>!~;]", s, maxsplit=1)[0]) for s in specs}
    return tuple(c for c in keep(facts) if normalize(c.split("==", 1)[0]) not in names)


def install_unmet(facts: Facts, dist: Distribution, unmet: Iterable[tuple[str, str]]) -> tuple[Remedy, ...]:
    """Install what `dist` declares and lacks (requirement, what is installed); torch itself is named, never
    changed, and an installed distribution at another version than the pin is named, not moved."""
    torch_now = installed(facts, "torch")
    specs: list[str] = []
    bound: list[str] = []  # requirements that cannot be met without another torch
    moved: list[str] = []  # installed at another version: moving them is the user's call
    torch_spec: str | None = None
    for text, have in unmet:
        spec = requirement(text)
        if spec is None:
            continue
        name = normalize(re.split(r"[\[=<>!~;]", spec, maxsplit=1)[0])
        if have != "not installed" and name != "torch":
            moved.append(f"{spec} (found {have})")
            continue
        pin = SGL_KERNEL_TORCH.get(spec.split("==", 1)[1].split("+")[0]) if "==" in spec else None
        if name == "torch":
            torch_spec = spec
        elif name in ("sglang-kernel", "sgl-kernel") and pin and torch_now and pin != torch_now.split("+")[0]:
            bound.append(f"{spec} (built for torch {pin} exactly)")
        else:
            specs.append(spec)
    out: list[Remedy] = []
    if specs:
        out.append(
            Remedy(
                f"(2) Install what {dist.name} declares and lacks, at its own pins (as `pip check` reports them); "
                "torch stays as it is, so pip refuses anything that would need another torch.",
                actions=(pip_install(facts, specs, (), _keep_except(facts, specs)),),
            )
        )
    if moved:
        out.append(
            Remedy(
                f"{dist.name} pins other versions than the installed {', '.join(moved)}: fa-doctor leaves installed "
                "packages as they are; `pip check` lists every mismatch.",
                actions=(RunCommand((facts.target.executable, "-m", "pip", "check")),),
            )
        )
    if torch_spec or bound:
        needs = ", ".join(([torch_spec] if torch_spec else []) + bound)
        out.append(
            Remedy(
                f"{dist.name} requires {needs} but torch {torch_now or 'is not installed'}"
                + (" is installed" if torch_now else "")
                + ": fa-doctor does not replace torch. Install the release of "
                f"{dist.name} built for the torch you run, or install {dist.name} and torch together from the "
                f"server's own instructions.",
                actions=(RunCommand((facts.target.executable, "-m", "pip", "check")),),
            )
        )
    return tuple(out)


def for_problem(facts: Facts, key: str, problem: object) -> tuple[Remedy, ...]:
    """The reinstall for a smoke-test failure, unless a missing module belongs to another distribution's
    unmet requirements (sglang's `orjson`): then that distribution's requirements are the remedy."""
    from fa_doctor.derive.inventory import unmet_requirements
    from fa_doctor.families import FA_DISTRIBUTIONS

    evidence = getattr(problem, "evidence", None) or {}
    module = str(evidence.get("module", "")) if getattr(problem, "cause", None) == "module_missing" else ""
    if module and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]{0,200}", module):
        provider = distribution_for_module(module)
        owner = who_requires(facts, module)
        if owner is not None and provider not in FA_DISTRIBUTIONS and installed(facts, provider) is None:
            unmet = unmet_requirements(owner, facts)
            head = Remedy(
                f"`import {module.split('.')[0]}` fails because {provider}, a requirement of {owner.name} "
                f"{owner.version}, is not installed: the FA packages are not the cause."
            )
            return (head, *install_unmet(facts, owner, unmet))
    return reinstall(facts, key)
