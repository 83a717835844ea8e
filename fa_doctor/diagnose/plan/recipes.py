"""Remedies (2) and the server's unmet requirements, from the catalog's release facts: each install holds the
installed torch and the server's exact pins on the FA stack; printed text is bounded (docs/remedies.md)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence

from fa_doctor.catalog import ecosystem, names, urls
from fa_doctor.catalog.families import normalize
from fa_doctor.catalog.implementations import FA2_SHIPS_CUTE_THROUGH
from fa_doctor.diagnose.contain import collected
from fa_doctor.diagnose.derive.requires import (
    applies,
    exact_pin,
    installed,
    name_of,
    public,
    requirement,
    requires,
    server,
)
from fa_doctor.model import intents as I
from fa_doctor.model.actions import Action, BuildFromClone, PipInstall, RunCommand
from fa_doctor.model.facts import Facts
from fa_doctor.model.finding import Remedy

_CLOSURE = frozenset(names.FA_CLOSURE)
_Strs = Iterable[str]


class Unheld(ValueError):
    """torch is installed but its version cannot be read, so no install can promise to keep it."""


def server_pins(facts: Facts) -> dict[str, str]:
    """The server's exact pins on the FA stack for this environment: normalised name -> `name==X`."""
    if (srv := server(facts)) is None:
        return {}
    pins: dict[str, str] = {}
    for text in srv.requires:
        bare = re.sub(r"\[[^\]]*\]", "", requirement(text) or "")
        # One exact pin only (`name==X`, X a version): it is printed, and the metadata it comes from is hostile.
        if exact_pin(bare) and name_of(bare) in _CLOSURE - {normalize(srv.name)} and applies(facts, text):
            pins[name_of(bare)] = bare
    return pins


def keep(facts: Facts) -> tuple[str, ...]:
    """Constraint lines: torch as installed, the server's pins (installed ones at their installed version)."""
    if facts.scan.first(names.TORCH) is not None and installed(facts, names.TORCH) is None:
        raise Unheld(f"the installed torch's version {facts.scan.index.get(names.TORCH)!r} is not a PEP 440 version")
    pins = server_pins(facts)
    lines = (f"{n}=={v}" if (v := installed(facts, n)) else pins.get(n) for n in dict.fromkeys([names.TORCH, *pins]))
    return tuple(filter(None, lines))


def keep_except(facts: Facts, specs: Iterable[str]) -> tuple[str, ...]:
    """`keep`, less the installed versions of what is being installed (the server's pin on them stays)."""
    moving = {name_of(s) for s in specs}
    pins = {n: pin for n, pin in server_pins(facts).items() if n != names.TORCH}
    return tuple(filter(None, (pins.get(name_of(c)) if name_of(c) in moving else c for c in keep(facts))))


def pip_install(
    facts: Facts, requirements: _Strs, options: _Strs = (), constraints: _Strs = (), env: Iterable[tuple[str, str]] = ()
) -> PipInstall:
    """`pip install` into the interpreter that runs the server."""
    return PipInstall(facts.target.executable, tuple(requirements), tuple(options), tuple(constraints), tuple(env))


def reinstall_same(facts: Facts, *specs: str) -> PipInstall:
    """The same versions again, without touching anything they depend on."""
    return pip_install(facts, specs, ("--force-reinstall", "--no-deps"))


_JOBS = (("MAX_JOBS", names.BUILD_JOBS),)
REBUILD = ("--force-reinstall", "--no-deps", "--no-build-isolation", "--no-cache-dir")
_FA3 = ("--no-build-isolation", "--no-deps", "--no-cache-dir")  # a clone's build against the installed torch


def cuda_major(facts: Facts) -> int | None:
    return facts.torch_cuda[0] if facts.torch_cuda else None


def reinstall(facts: Facts, key: str) -> tuple[Remedy, ...]:
    if key == "fa2":
        return tuple(fa2(facts))
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
    return (vllm(facts),) if key == "vllm-fa" else ()


@collected
def fa2(facts: Facts) -> Iterator[Remedy]:
    version = installed(facts, names.FLASH_ATTN)
    head = (installed(facts, names.TORCH) or (facts.torch.version if facts.torch else None) or "").split("+")[0]
    try:
        mm: tuple[int, int] | None = int(head.split(".")[0]), int(head.split(".")[1])
    except (ValueError, IndexError):
        mm = None
    abi = facts.torch.cxx11_abi if facts.torch else None
    fa4_have = installed(facts, names.FLASH_ATTN_4)
    after: tuple[Action, ...] = (reinstall_same(facts, f"{names.FLASH_ATTN_4}=={fa4_have}"),) if fa4_have else ()
    cute = (
        f" flash-attn up to {FA2_SHIPS_CUTE_THROUGH} also ships an old flash_attn/cute that overwrites "
        f"{names.FLASH_ATTN_4} {fa4_have}'s files, so the last command puts FA4's copy back."
        if fa4_have
        else ""
    )
    release = version if version and ecosystem.fa2_has_matrix(version) else ecosystem.fa2_release()
    cuda = cuda_major(facts)
    url = None
    if release and mm and cuda and abi is not None and facts.target.machine == "x86_64":
        url = ecosystem.fa2_wheel(release, mm, cuda, abi, python(facts), "linux_x86_64")
    if url and mm:
        yield Remedy(
            f"(2) Install the flash-attn {release} release wheel built for torch {mm[0]}.{mm[1]}, CUDA {cuda} "
            f"and this C++ ABI (no compiler needed).{cute}",
            actions=(reinstall_same(facts, url), *after),
        )
    target = version or ecosystem.latest(names.FLASH_ATTN)
    spec = f"{names.FLASH_ATTN}=={target}" if target else names.FLASH_ATTN
    options, held = (REBUILD, ()) if version else (("--no-build-isolation", "--no-cache-dir"), keep(facts))
    build = pip_install(facts, (spec,), options, held, _JOBS)
    yield Remedy(
        "(2) Build flash-attn for this torch: PyPI has only its source, and its setup.py imports torch, so it "
        "needs --no-build-isolation and, in this interpreter, the build tools (installed first); --no-cache-dir "
        "keeps pip from reinstalling a wheel it built for another torch. setup.py first tries a prebuilt wheel "
        "from the GitHub release for this torch/CUDA/ABI/Python; without one it compiles with nvcc (a CUDA "
        f"toolkit of torch's CUDA major), which takes hours and several GB of RAM per job (MAX_JOBS="
        f"{names.BUILD_JOBS} bounds it).{cute}",
        actions=(pip_install(facts, names.FA2_BUILD_TOOLS, (), keep(facts)), build, *after),
    )


def fa3(facts: Facts) -> Remedy:
    return Remedy(
        f"(2) {names.FLASH_ATTN_3} has no PyPI wheel: build it from the hopper/ folder of a flash-attention "
        "checkout. It needs nvcc >= 12.3, ninja and the installed torch (hence --no-build-isolation); the build "
        f"takes well over an hour with MAX_JOBS={names.BUILD_JOBS}.",
        # A clone into a fresh folder of its own, built there: never a folder of the caller's directory.
        actions=(
            BuildFromClone(facts.target.executable, urls.FLASH_ATTENTION_REPO, "hopper", _FA3, keep(facts), _JOBS),
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
    if torch_pin is None and (dist := facts.scan.first(kernel)) and have and public(have) == public(target):
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
    return Remedy(text + ".", actions=tuple(actions)) if actions and (key != "fa4" or have) else None


def fa4(facts: Facts, key: str) -> Remedy:
    if (same := _dsl_reinstall(facts, key)) is not None:
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
    if (spec := ecosystem.fa4_install_spec(cuda, pins, wanted, python(facts))) is None:
        text = f"(2) No {names.FLASH_ATTN_4} release in fa-doctor's catalog fits here: "
        if srv:
            text += f"{srv.name} {srv.version} requires {wanted} and pins {', '.join(server_pins(facts).values())}; "
        return _no_install(text + f"none of them also admits Python {'.'.join(map(str, python(facts)))}.")
    why, held = "the newest release", ""
    if ecosystem.prerelease_only(names.FLASH_ATTN_4):
        why = f"{names.FLASH_ATTN_4} has only pre-releases on the index, so the version is named"
    if wanted and srv:
        held = f"; {srv.name} requires {wanted}, and this is the newest release whose own requirements admit its pins"
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
    for action in (a for a in remedy.actions if isinstance(a, PipInstall)):
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
    if version := installed(facts, names.VLLM):
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


MAX_SPEC = 100  # characters of one requirement as printed (real ones: `orjson>=3.9.0,<4`)
PER_LINE = 12  # requirements on one install line
MAX_SPECS = 48  # requirements listed in all; beyond, `pip check` lists them


def listed(items: Sequence[str], limit: int = 6) -> str:
    """`items` for a sentence, at most `limit` of them, each bounded."""
    shown = [i if len(i) <= MAX_SPEC else i[: MAX_SPEC - 3] + "..." for i in items[:limit]]
    more = len(items) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def _pip_check(facts: Facts) -> RunCommand:
    return RunCommand((facts.target.executable, "-m", "pip", "check"))


def _install_lacking(facts: Facts, requirer: str, specs: list[str]) -> Remedy:
    """Install `specs` (torch and the server's pins held), on lines a person can read and paste."""
    fit = [s for s in specs if len(s) <= MAX_SPEC]
    long = len(specs) - len(fit)
    if len(fit) > MAX_SPECS:
        return Remedy(
            f"(2) {requirer} declares {len(specs)} requirements that are not installed: too many to print as "
            "install lines; `pip check` lists them. Install them from the server's own instructions (torch held), "
            "or install its missing dependencies in a fresh environment.",
            actions=(_pip_check(facts),),
        )
    held = keep_except(facts, fit)
    chunks = [fit[i : i + PER_LINE] for i in range(0, len(fit), PER_LINE)]
    actions: list[Action] = [pip_install(facts, c, (), held) for c in chunks]
    note = ""
    if long:
        note = (
            f" {long} requirement(s) longer than {MAX_SPEC} characters are not printed (the metadata is unusual): "
            "`pip check` names them."
        )
        actions.append(_pip_check(facts))
    lines = " (one line per dozen)" if len(chunks) > 1 else ""
    return Remedy(
        f"(2) Install what {requirer} declares and lacks, at its own pins (as `pip check` reports them){lines}; "
        f"torch and the server's pins are held as constraints.{note}",
        actions=tuple(actions),
    )


@collected
def satisfy(facts: Facts, intent: I.Satisfy) -> Iterator[Remedy]:
    """Install what the server (or another distribution) declares and lacks; torch is never moved here: where a
    requirement needs another torch, the coherent alternatives are offered instead."""
    torch_now = installed(facts, names.TORCH)
    specs: list[str] = []
    bound: list[str] = []  # requirements that cannot be met without another torch
    moved: list[str] = []  # installed at another version: moving them is the user's call
    torch_spec: str | None = None
    for text, have in intent.unmet:
        if (spec := requirement(text)) is None:
            continue
        pin = exact_pin(spec)
        torch_pin = ecosystem.pin(name_of(spec), public(pin), names.TORCH) if pin else None
        if name_of(spec) == names.TORCH:
            torch_spec = spec
        elif have != "not installed":
            moved.append(f"{spec} (found {have})")
        elif torch_pin and torch_now and public(torch_pin) != public(torch_now):
            bound.append(f"{spec} (built for torch {torch_pin} exactly)")
        else:
            specs.append(spec)
    # Installed around a torch the requirer does not accept, the rest would be built for the wrong torch:
    # the coherent set-ups below come first, and each brings its own requirements.
    if specs and not (torch_spec and exact_pin(torch_spec)):
        yield _install_lacking(facts, intent.requirer, specs)
    if moved:
        yield Remedy(
            f"{intent.requirer} pins other versions than the installed {listed(moved)}: fa-doctor leaves "
            "installed packages as they are; `pip check` lists every mismatch.",
            actions=(_pip_check(facts),),
        )
    if torch_spec or bound:
        yield from alternatives(facts, intent.requirer, torch_spec, bound)


@collected
def alternatives(facts: Facts, requirer: str, torch_spec: str | None, bound: list[str]) -> Iterator[Remedy]:
    """No install keeps both this torch and the server's pins: say so, then the two coherent ways out."""
    torch_now = installed(facts, names.TORCH)
    needs = listed(([torch_spec] if torch_spec else []) + bound)
    server = facts.scan.first(requirer)
    yield Remedy(
        f"{requirer} requires {needs}, but torch {torch_now or 'is not installed'}"
        + (" is installed" if torch_now else "")
        + ": no install can satisfy both, so fa-doctor plans none that keeps this torch. Choose one of the "
        "consistent set-ups below."
    )
    if server is not None and torch_now and ecosystem.known(server.normalized):
        # The release's Requires-Python must admit this Python.
        pinning = ecosystem.releases_pinning(server.normalized, names.TORCH, torch_now, python(facts))
        if fits := [v for v in pinning if v != server.version]:
            spec = f"{server.normalized}=={fits[0]}"
            yield resolvable(  # never an install pip's resolver refused when fa-doctor's catalog was made
                facts,
                Remedy(
                    f"(a) Keep torch {torch_now}: install {spec}, the newest {server.normalized} release built "
                    f"for torch {public(torch_now)} (its own pins follow; torch is held).",
                    actions=(pip_install(facts, (spec,), (), (f"{names.TORCH}=={torch_now}",)),),
                ),
            )
        else:
            yield Remedy(
                f"(a) No {server.normalized} release in fa-doctor's catalog is built for torch "
                f"{public(torch_now)}: keeping this torch means another server build."
            )
    if want := exact_pin(torch_spec):
        moves = (f"{names.TORCH}=={want}", *(b.split(" ", 1)[0] for b in bound))
        yield Remedy(
            f"(b) Move torch to {requirer}'s pin, torch=={want}: this REPLACES torch {torch_now or ''} (and "
            "every package built against it must match); `fa-doctor fix --apply` takes this only with "
            "--allow-torch-change.",
            actions=(pip_install(facts, moves, (), keep_except(facts, moves)),),
            replaces_torch=True,
        )
