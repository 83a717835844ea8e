"""Fake Python environments on disk: a real venv (no pip) whose site-packages holds hand-made or
fixture-based distributions. fa-doctor reaches them through --python, as it would a server's venv."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "dist-info"
if not FIXTURES.exists():  # the shared copy beside the checkout
    FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "dist-info"


@dataclass
class FakeEnv:
    root: Path
    python: str
    site: Path

    def dist(
        self,
        name: str,
        version: str,
        files: Mapping[str, str | bytes] | None = None,
        *,
        requires: Iterable[str] = (),
        top_level: Iterable[str] = (),
        record: bool = True,
        where: Path | None = None,
        extra_record: Iterable[str] = (),
        metadata: str | None = None,
    ) -> Path:
        """A distribution: its files (path -> content) and a dist-info whose RECORD lists them."""
        base = where or self.site
        files = dict(files or {})
        for rel, content in files.items():
            path = base / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content.encode() if isinstance(content, str) else content)
        info = base / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True, exist_ok=True)
        meta = (
            metadata
            if metadata is not None
            else (
                f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                + "".join(f"Requires-Dist: {r}\n" for r in requires)
            )
        )
        (info / "METADATA").write_text(meta)
        (info / "INSTALLER").write_text("pip\n")
        if top_level:
            (info / "top_level.txt").write_text("\n".join(top_level) + "\n")
        if record:
            rows = [f"{rel},{_hash(base / rel)},{(base / rel).stat().st_size}" for rel in files]
            rows += list(extra_record)
            rows += [f"{info.name}/METADATA,,", f"{info.name}/RECORD,,"]
            (info / "RECORD").write_text("\n".join(rows) + "\n")
        return info

    def fixture(
        self, dirname: str, *, keep: Callable[[str], bool] = lambda rel: True, skip_files: Iterable[str] = ()
    ) -> Path:
        """Install a real wheel's metadata from the fixtures, creating the files its RECORD lists (empty)."""
        src = FIXTURES / dirname
        dst = self.site / dirname
        shutil.copytree(src, dst)
        skipped = set(skip_files)
        lines = (src / "RECORD").read_text().splitlines()
        kept = []
        for line in lines:
            rel = line.split(",", 1)[0]
            if not rel or rel.startswith(dirname) or not keep(rel):
                continue
            kept.append(line)
            if rel in skipped:
                continue
            path = self.site / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()  # an empty .pth adds nothing to the path
        (dst / "RECORD").write_text("\n".join([*kept, f"{dirname}/RECORD,,"]) + "\n")
        return dst

    def torch(self, version: str = "2.11.0+cu130", cuda: str | None = "13.0") -> None:
        files = {
            "torch/__init__.py": "",
            "torch/version.py": f"__version__ = {version!r}\ncuda = {cuda!r}\nhip = None\n",
            "torch/lib/libc10.so": b"\x7fELF...St7__cxx11...",
        }
        self.dist("torch", version.split("+")[0], files, top_level=["torch"])

    def cutlass_dsl(self, *, core: bool = True, pth: bool = True, cuda_libs: tuple[str, ...] = ("cu13",)) -> None:
        """FA4's CuTe DSL runtime as its wheels lay it out: cutlass under dsl_packages, put on the path by a .pth."""
        pkgs = "nvidia_cutlass_dsl/dsl_packages"
        self.dist(
            "nvidia-cutlass-dsl",
            "4.8.1",
            {"nvidia_cutlass_dsl_packages.pth": f"./{pkgs}\n"} if pth else {},
            requires=[
                "nvidia-cutlass-dsl-libs-base==4.8.1",
                "nvidia-cutlass-dsl-libs-cu12==4.8.1",
                'nvidia-cutlass-dsl-libs-cu13==4.8.1; extra == "cu13"',
            ],
        )
        for cu in cuda_libs:  # installed with [cu13], pip puts libs-cu13 where the default would be libs-cu12
            self.dist(
                f"nvidia-cutlass-dsl-libs-{cu}", "4.8.1", {f"nvidia_cutlass_dsl/{cu}/lib/libcute_dsl_runtime.so": ""}
            )
        self.dist(
            "nvidia-cutlass-dsl-libs-base",
            "4.8.1",
            {f"{pkgs}/cutlass/_mlir/__init__.py": ""},
            top_level=["nvidia_cutlass_dsl"],
        )
        if core:
            self.dist(
                "nvidia-cutlass-dsl-libs-core",
                "4.8.1",
                {f"{pkgs}/cutlass/__init__.py": "", f"{pkgs}/cutlass/cute/__init__.py": ""},
                top_level=["nvidia_cutlass_dsl"],
            )
        for name, mod in (
            ("quack-kernels", "quack"),
            ("apache-tvm-ffi", "tvm_ffi"),
            ("torch-c-dlpack-ext", "torch_c_dlpack_ext"),
        ):
            # The versions of the wheels staged for the H200 (tvm-ffi's is a post-release, as on PyPI).
            version = {"quack": "0.6.5", "tvm_ffi": "0.1.15.post2"}.get(mod, "0.1.15")
            self.dist(name, version, {f"{mod}/__init__.py": ""}, top_level=[mod])
        for name in ("einops", "typing-extensions"):
            self.dist(name, "4.12.0", {f"{name.replace('-', '_')}.py": ""})

    def fa4(self, **kw: bool) -> None:
        self.cutlass_dsl(**kw)
        self.fixture("flash_attn_4-4.0.0b36.dist-info")

    def fa2(self, version: str = "2.8.3", *, with_cute: bool = True, native: bool = True) -> None:
        files: dict[str, str | bytes] = {
            "flash_attn/__init__.py": f"__version__ = {version!r}\n",
            "flash_attn/flash_attn_interface.py": "",
        }
        if with_cute:  # flash-attn <= 2.8.3.post1 ships an old flash_attn/cute snapshot
            files["flash_attn/cute/__init__.py"] = '__version__ = "0.1.0"\n'
            files["flash_attn/cute/interface.py"] = ""
        if native:
            files[f"flash_attn_2_cuda.cpython-{sys.version_info[0]}{sys.version_info[1]}-x86_64-linux-gnu.so"] = (
                b"\x7fELF"
            )
        self.dist(
            "flash-attn", version, files, top_level=["flash_attn", "flash_attn_2_cuda"], requires=["torch", "einops"]
        )

    def sgl_kernel(self, version: str = "0.4.10", torch_pin: str = "2.11.0", flash_ops: bool = True) -> None:
        files: dict[str, str | bytes] = {
            "sgl_kernel/__init__.py": "",
            "sgl_kernel/flash_attn.py": "",
            "sgl_kernel/sm90/common_ops.abi3.so": b"\x7fELF",
        }
        if flash_ops:
            files["sgl_kernel/flash_ops.abi3.so"] = b"\x7fELF"
        self.dist("sglang-kernel", version, files, requires=[f"torch=={torch_pin}"])

    def sglang(
        self,
        version: str = "0.5.23",
        *,
        vendored_fa4: bool = True,
        reads_override: bool = False,
        accepted: tuple[int, ...] = (3, 4),
    ) -> None:
        select = "\n".join(
            f"        {'if' if i == 0 else 'elif'} self.fa_impl_ver == {v}:\n            pass"
            for i, v in enumerate(accepted)
        )
        backend = (
            f"class FlashAttentionBackend:\n    def __init__(self, fa_impl_ver=3):\n{select}\n        else:\n"
            "            raise ValueError(f'Invalid version: {self.fa_impl_ver=}')\n"
        )
        environ = "SGLANG_USE_SGL_FA3_KERNEL = EnvBool(True)\n" + (
            "SGLANG_FLASHATTENTION_VERSION = EnvInt(None)\n" if reads_override else ""
        )
        files: dict[str, str | bytes] = {
            "sglang/__init__.py": "",
            "sglang/srt/__init__.py": "",
            "sglang/srt/environ.py": environ,
            "sglang/srt/layers/__init__.py": "",
            "sglang/srt/layers/attention/__init__.py": "",
            "sglang/srt/layers/attention/flashattention_backend.py": backend,
            "sglang/kernels/__init__.py": "",
            "sglang/kernels/ops/__init__.py": "",
            "sglang/kernels/ops/attention/__init__.py": "",
            "sglang/kernels/ops/attention/flash_attention_v4.py": "",
        }
        if vendored_fa4:
            files["sglang/kernels/ops/attention/flash_attn/__init__.py"] = ""
            files["sglang/kernels/ops/attention/flash_attn/cute/__init__.py"] = ""
            files["sglang/kernels/ops/attention/flash_attn/cute/interface.py"] = ""
        self.dist(
            "sglang",
            version,
            files,
            top_level=["sglang"],
            requires=["sglang-kernel==0.4.10", "flash-attn-4>=4.0.0b18", "torch"],
        )


def _hash(path: Path) -> str:
    digest = hashlib.sha256(path.read_bytes()).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def make_env(root: Path) -> FakeEnv:
    """A real venv without pip: its interpreter reports its own isolated site-packages."""
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    return FakeEnv(root, str(venv / "bin" / "python"), site)


def fake_nvidia_smi(bindir: Path, rows: Iterable[str], driver: str = "580.159.04") -> dict[str, str]:
    """An nvidia-smi on PATH that answers the GPU query like a real one; returns the env to use."""
    bindir.mkdir(parents=True, exist_ok=True)
    script = bindir / "nvidia-smi"
    body = "\n".join(f"echo '{r}, {driver}'" for r in rows)
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return {"PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}


H200 = "0, GPU-5f1e2c3a-0000-4000-8000-000000000000, NVIDIA H200, 9.0, 143771"
A100 = "0, GPU-a100a100-0000-4000-8000-000000000000, NVIDIA A100-SXM4-80GB, 8.0, 81920"
T4 = "0, GPU-7474aaaa-0000-4000-8000-000000000000, Tesla T4, 7.5, 15360"
B200 = "0, GPU-b200b200-0000-4000-8000-000000000000, NVIDIA B200, 10.0, 183359"
