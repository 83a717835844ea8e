"""Remedy (2), reinstall a compatible package, per FA implementation, from the catalog's release facts
(docs/remedies.md has the rules every recipe holds)."""

from __future__ import annotations

from fa_doctor.catalog import ecosystem, names, urls
from fa_doctor.diagnose.derive.requires import exact_pin, installed, name_of, public, requirement, requires, server
from fa_doctor.diagnose.plan.constraints import jobs, keep, keep_except, pip_install, reinstall_same, server_pins
from fa_doctor.model.actions import Action, BuildFromClone, PipInstall, RunCommand
from fa_doctor.model.facts import Facts
from fa_doctor.model.finding import Remedy

_REBUILD = ("--force-reinstall", "--no-deps", "--no-build-isolation", "--no-cache-dir")


def torch_mm(facts: Facts) -> tuple[int, int] | None:
    version = installed(facts, names.TORCH) or (facts.torch.version if facts.torch else None)
    head = (version or "").split("+")[0].split(".")
    try:
        return int(head[0]), int(head[1])
    except (ValueError, IndexError):
        return None


def cuda_major(facts: Facts) -> int | None:
    return facts.torch_cuda[0] if facts.torch_cuda else None


def reinstall(facts: Facts, key: str) -> tuple[Remedy, ...]:
    if key == "fa2":
        return fa2(facts)
    if key == "fa3-sgl":
        return sgl_kernel(facts)
    if key == "fa3":
        return (fa3(facts),)
    rules = facts.sglang.rules if facts.sglang else None
    if key == "fa4-sglang" and rules is not None and rules.fa4 == "sgl_kernel.flash_attn":
        # FA4 is the CuTe copy inside the kernel wheel (SGLang 0.5.3rc2-0.5.8.post1): the kernel is the package.
        return (*sgl_kernel(facts), fa4(facts, key))
    if key in ("fa4", "fa4-sglang"):
        return (fa4(facts, key),)
    if key == "vllm-fa":
        return (vllm(facts),)
    return ()


def fa2(facts: Facts) -> tuple[Remedy, ...]:
    version = installed(facts, names.FLASH_ATTN)
    mm = torch_mm(facts)
    abi = facts.torch.cxx11_abi if facts.torch else None
    py = (facts.target.version[0], facts.target.version[1])
    out: list[Remedy] = []
    fa4_have = installed(facts, names.FLASH_ATTN_4)
    after: tuple[Action, ...] = (reinstall_same(facts, f"{names.FLASH_ATTN_4}=={fa4_have}"),) if fa4_have else ()
    cute = (
        f" flash-attn up to 2.8.3.post2 also ships an old flash_attn/cute that overwrites {names.FLASH_ATTN_4} "
        f"{fa4_have}'s files, so the last command puts FA4's copy back."
        if fa4_have
        else ""
    )
    release = version if version and ecosystem.fa2_has_matrix(version) else ecosystem.fa2_release()
    cuda = cuda_major(facts)
    url = None
    if release and mm and cuda and abi is not None and facts.target.machine == "x86_64":
        url = ecosystem.fa2_wheel(release, mm, cuda, abi, py, "linux_x86_64")
    if url and mm:
        out.append(
            Remedy(
                f"(2) Install the flash-attn {release} release wheel built for torch {mm[0]}.{mm[1]}, CUDA {cuda} "
                f"and this C++ ABI (no compiler needed).{cute}",
                actions=(reinstall_same(facts, url), *after),
            )
        )
    target = version or ecosystem.latest(names.FLASH_ATTN)
    spec = f"{names.FLASH_ATTN}=={target}" if target else names.FLASH_ATTN
    build = (
        pip_install(facts, (spec,), _REBUILD, env=jobs())
        if version
        else pip_install(facts, (spec,), ("--no-build-isolation", "--no-cache-dir"), keep(facts), jobs())
    )
    out.append(
        Remedy(
            "(2) Build flash-attn for this torch: PyPI has only its source, and its setup.py imports torch, so it "
            "needs --no-build-isolation and, in this interpreter, the build tools (installed first); --no-cache-dir "
            "keeps pip from reinstalling a wheel it built for another torch. setup.py first tries a prebuilt wheel "
            "from the GitHub release for this torch/CUDA/ABI/Python; without one it compiles with nvcc (a CUDA "
            f"toolkit of torch's CUDA major), which takes hours and several GB of RAM per job (MAX_JOBS="
            f"{names.BUILD_JOBS} bounds it).{cute}",
            actions=(pip_install(facts, names.FA2_BUILD_TOOLS, (), keep(facts)), build, *after),
        )
    )
    return tuple(out)


def fa3(facts: Facts) -> Remedy:
    return Remedy(
        f"(2) {names.FLASH_ATTN_3} has no PyPI wheel: build it from the hopper/ folder of a flash-attention "
        "checkout. It needs nvcc >= 12.3, ninja and the installed torch (hence --no-build-isolation); the build "
        f"takes well over an hour with MAX_JOBS={names.BUILD_JOBS}.",
        # A clone into a fresh folder of its own, built there: never a folder of the caller's directory.
        actions=(
            BuildFromClone(
                facts.target.executable,
                urls.FLASH_ATTENTION_REPO,
                "hopper",
                ("--no-build-isolation", "--no-deps", "--no-cache-dir"),
                keep(facts),
                jobs(),
            ),
        ),
    )


def _kernel_requirement(facts: Facts) -> tuple[str, str | None]:
    """(the kernel package, the server's requirement on it): sglang 0.4.6-0.5.9 require sgl-kernel, later ones
    sglang-kernel (the same import name, sgl_kernel); 0.4.x-0.5.2 under their `srt` extra (the catalog's line)."""
    srv = server(facts)
    for name in names.SGL_KERNELS:
        wanted = requires(facts, srv, name) if srv else None
        if wanted:
            return name, wanted
    line = facts.sglang.rules.kernel if facts.sglang and facts.sglang.rules else ""
    spec = requirement(line) if line else None
    if spec:
        return name_of(spec), spec
    dist = facts.scan.first(*names.SGL_KERNELS)
    return (dist.normalized if dist else names.SGLANG_KERNEL), None


def sgl_kernel(facts: Facts) -> tuple[Remedy, ...]:
    srv = server(facts)
    kernel, wanted = _kernel_requirement(facts)
    have = installed(facts, kernel)
    torch_now = installed(facts, names.TORCH)
    target = exact_pin(wanted) or have
    dist = facts.scan.first(kernel)
    text = f"(2) {'Reinstall' if have else 'Install'} {kernel} (FA3 lives in sgl_kernel/flash_ops)"
    if wanted and srv is not None:
        text += f"; {srv.name} {srv.version} requires {wanted}"
    if target is None and torch_now:
        # Nothing pins it: the newest release built for the installed torch.
        fits = ecosystem.releases_pinning(kernel, names.TORCH, torch_now, python(facts))
        target = fits[0] if fits else None
        if target:
            text += f"; {kernel} {target} is the newest release built for torch {public(torch_now)}"
    if target is None:
        why = (
            f": no {kernel} release in fa-doctor's catalog is built for torch "
            f"{torch_now or '(not installed)'}; install the server and its kernels together from its own instructions."
        )
        return (_no_install(text + why),)
    torch_pin = ecosystem.pin(kernel, public(target), names.TORCH)
    if torch_pin is None and dist is not None and have and public(have) == public(target):
        torch_pin = exact_pin(requires(facts, dist, names.TORCH))
    if torch_pin is None:  # sgl-kernel and sglang-kernel 0.4.2-0.4.5 declare no torch: the sglang releases
        torch_pin = ecosystem.kernel_torch(kernel, public(target))  # pinning it pin the torch it is built for
    if torch_pin and torch_now and public(torch_pin) != public(torch_now):
        why = (
            f"; {kernel} {target} is built against torch {torch_pin} exactly, but torch {torch_now} is "
            "installed: no install of it can keep this torch (see package.requirement for the consistent choices)."
        )
        return (_no_install(text + why),)
    options: list[str] = []
    spec = f"{kernel}=={target}"
    built = ecosystem.sgl_kernel_cuda(target)
    cuda = cuda_major(facts)
    if kernel == names.SGLANG_KERNEL and cuda == 12 and built == 13 and "+" not in target:
        text += (
            f"; PyPI's {kernel} {target} is a CUDA 13 build and torch here is CUDA 12, so take its "
            f"`+{urls.SGL_CU12_LOCAL}` build from SGLang's index ({urls.SGL_CU12_INDEX}), where SGLang publishes "
            "CUDA 12 builds"
        )
        options += ["--extra-index-url", urls.SGL_CU12_INDEX]
        spec += f"+{urls.SGL_CU12_LOCAL}"
    elif built is not None and cuda is not None:
        text += f"; PyPI's {target} is a CUDA {built} build"
    if torch_pin:
        text += f"; it is built against torch {torch_pin} exactly, which is installed"
    if have and public(have) == public(target):
        action = pip_install(facts, (spec,), ("--force-reinstall", "--no-deps", *options))
    else:
        text += " (a new install: torch and the server's pins are held as constraints)"
        action = pip_install(facts, (spec,), options, keep_except(facts, (spec,)))
    return (resolvable(facts, Remedy(text + ".", actions=(action,))),)


def _dsl_reinstall(facts: Facts, key: str) -> Remedy | None:
    """The installed CuTe DSL runtime (and flash-attn-4 for `fa4`), the same versions again, without deps."""
    cuda = cuda_major(facts)
    dsl = installed(facts, names.CUTLASS_DSL)
    actions: list[Action] = []
    text = (
        "(2) Reinstall the CuTe DSL runtime FA4 runs on, the same versions without their dependencies, into the "
        "interpreter's own site-packages (not with --target: the DSL's .pth file must be processed)"
    )
    if dsl:
        parts = [names.CUTLASS_DSL, *ecosystem.dsl_closure(public(dsl), cuda)]
        parts += [p for p in names.DSL_PARTS if p not in parts and installed(facts, p) == dsl]
        if ecosystem.known(names.CUTLASS_DSL) and not ecosystem.exists(names.CUTLASS_DSL, dsl):
            parts = [p for p in parts if installed(facts, p) == dsl]  # not on the index: only what is here
        actions.append(reinstall_same(facts, *(f"{p}=={dsl}" for p in parts)))
    have = installed(facts, names.FLASH_ATTN_4)
    if key == "fa4" and have:
        text = text.replace("the CuTe DSL runtime FA4 runs on", f"{names.FLASH_ATTN_4} and the CuTe DSL runtime")
        actions.insert(0, reinstall_same(facts, f"{names.FLASH_ATTN_4}=={have}"))
    if actions and (key != "fa4" or have):
        return Remedy(text + ".", actions=tuple(actions))
    return None


def fa4(facts: Facts, key: str) -> Remedy:
    same = _dsl_reinstall(facts, key)
    if same is not None:
        return same
    srv = server(facts)
    cuda = cuda_major(facts)
    if key == "fa4-sglang":
        # SGLang's own copy needs only the CuTe DSL runtime: the server's own requirements on it.
        specs = [s for n in names.FA4_RUNTIME if srv and (s := requires(facts, srv, n)) and not installed(facts, n)]
        specs = specs or [f"{names.CUTLASS_DSL}{'[cu13]' if cuda == 13 else ''}"]
        text = (
            f"(2) Install the CuTe DSL runtime SGLang's FA4 copy runs on ({', '.join(specs)}, as "
            f"{srv.name if srv else 'the server'} requires it); torch and the server's pins are held as constraints."
        )
        return resolvable(facts, Remedy(text, actions=(pip_install(facts, specs, (), keep_except(facts, specs)),)))
    wanted = requires(facts, srv, names.FLASH_ATTN_4) if srv else None
    pins = {name_of(p): exact_pin(p) or "" for p in server_pins(facts).values()}
    spec = ecosystem.fa4_install_spec(cuda, pins, wanted, python(facts))
    if spec is None:
        return _no_install(
            f"(2) No {names.FLASH_ATTN_4} release in fa-doctor's catalog fits here: "
            + (
                f"{srv.name} {srv.version} requires {wanted} and pins {', '.join(server_pins(facts).values())}; "
                if srv
                else ""
            )
            + f"none of them also admits Python {'.'.join(map(str, python(facts)))}."
        )
    why = (
        f"{names.FLASH_ATTN_4} has only pre-releases on the index, so the version is named"
        if ecosystem.prerelease_only(names.FLASH_ATTN_4)
        else "the newest release"
    )
    held = (
        f"; {srv.name} requires {wanted}, and this is the newest release whose own requirements admit its pins"
        if wanted and srv
        else ""
    )
    text = (
        f"(2) Install {spec} ({why}{held}) with its CuTe DSL runtime"
        + (" and the CUDA 13 libraries (the [cu13] extra adds them to the CUDA 12 ones)" if cuda == 13 else "")
        + "; torch and the server's pins are held as constraints, so pip adds only what is missing."
    )
    return resolvable(facts, Remedy(text, actions=(pip_install(facts, (spec,), (), keep_except(facts, (spec,))),)))


def python(facts: Facts) -> tuple[int, int]:
    return facts.target.version[0], facts.target.version[1]


def resolvable(facts: Facts, remedy: Remedy) -> Remedy:
    """`remedy`, unless pip's resolver found one of its installs unresolvable when fa-doctor's catalog was made
    (scripts/regen_catalog.py records each install it can print, per SGLang release and torch): then why not."""
    from fa_doctor.catalog import server_rules

    py = ".".join(map(str, python(facts)))
    for action in remedy.actions:
        if not isinstance(action, PipInstall):
            continue
        status = server_rules.install_status(
            server_rules.install_key(action.requirements, action.options, action.constraints, py)
        )
        if status is not None and status[0] != "ok":
            return _no_install(
                f"{remedy.text.rstrip('.')}. fa-doctor does not print that install: pip's resolver found no "
                f"consistent set for it (Python {py}) when fa-doctor's catalog was made "
                f"({server_rules.generated_on()}): {status[1]}"
            )
    return remedy


def vllm(facts: Facts) -> Remedy:
    version = installed(facts, names.VLLM)
    if version:
        return Remedy(
            "(2) Reinstall vLLM (its FA kernels are built into the vllm wheel), the same version, without its "
            "dependencies.",
            actions=(reinstall_same(facts, f"{names.VLLM}=={version}"),),
        )
    torch_now = installed(facts, names.TORCH)
    fits = ecosystem.releases_pinning(names.VLLM, names.TORCH, torch_now, python(facts)) if torch_now else ()
    if not fits:
        return _no_install(
            f"(2) No vLLM release in fa-doctor's catalog is built for torch {torch_now or '(not installed)'}: "
            "install vLLM and its torch together from vLLM's instructions."
        )
    spec = f"{names.VLLM}=={fits[0]}"
    return resolvable(
        facts,
        Remedy(
            f"(2) Install {spec}, the newest vLLM built for torch {torch_now}; torch is held as a constraint.",
            actions=(pip_install(facts, (spec,), (), keep(facts)),),
        ),
    )


def _no_install(text: str) -> Remedy:
    """No install is consistent here: say why; the check (re-run by the planner for the same target) shows
    the state after the user's choice."""
    return Remedy(text, actions=(RunCommand(("fa-doctor", "check")),))
