"""GPU proof of the static extension inspection: build a real torch CUDA extension for chosen archs, predict with
check_binaries, then import it and launch its kernel to see what really happens. Needs nvcc, torch with CUDA
and a GPU. Run:  python benchmarks/binary_gpu_proof.py 8.0 9.0a 8.0+PTX   (TORCH_CUDA_ARCH_LIST values)

Seen on an H200 (torch 2.11.0+cu130, nvcc 13.0, glibc 2.39), 2026-12-02:
  9.0a     -> binary.archs ok (sm_90a, runs on 9.0 only); real run: ran
  8.0      -> binary.no_kernel_image fail; real run: "CUDA error: no kernel image is available for execution on
              the device"
  8.0+PTX  -> binary.archs info (only by JIT on GPU 0); real run: ran
  Each extension had 14 undefined c10/at/torch symbols, all found in the real libtorch (no undefined_symbol
  finding); check_binaries took 5-8 ms. With no GPU and --gpu-arch sm_100,sm_90, the 9.0a build fails for sm_100.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = r"""
#include <torch/extension.h>
__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }
torch::Tensor twice(torch::Tensor x) {
  k<<<1, x.numel()>>>(x.data_ptr<float>());
  auto err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "CUDA error: ", cudaGetErrorString(err));
  return x;
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("twice", &twice); }
"""
RUN = (
    "import torch, flash_attn_2_cuda as m; x = torch.ones(32, device='cuda'); m.twice(x); "
    "torch.cuda.synchronize(); print('ran', x[0].item())"
)


def build(archs: str, where: str) -> str:
    """One fresh process per build: torch's loader renames a second module of the same name."""
    os.makedirs(where)
    with open(os.path.join(where, "ext.cu"), "w") as fh:
        fh.write(SRC)
    code = (
        "from torch.utils.cpp_extension import load; "
        f"load('flash_attn_2_cuda', [{os.path.join(where, 'ext.cu')!r}], build_directory={where!r}, "
        "is_python_module=False)"
    )
    subprocess.run([sys.executable, "-c", code], env={**os.environ, "TORCH_CUDA_ARCH_LIST": archs}, check=True)
    return sorted(glob.glob(os.path.join(where, "flash_attn_2_cuda*.so")))[-1]


def site_with(so: str, site: str) -> None:
    tag = f"cpython-{sys.version_info[0]}{sys.version_info[1]}-x86_64-linux-gnu"
    name = f"flash_attn_2_cuda.{tag}.so"
    os.makedirs(os.path.join(site, "flash_attn"))
    shutil.copy(so, os.path.join(site, name))
    open(os.path.join(site, "flash_attn", "__init__.py"), "w").close()
    info = os.path.join(site, "flash_attn-2.8.3.dist-info")
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as fh:
        fh.write("Metadata-Version: 2.1\nName: flash-attn\nVersion: 2.8.3\nRequires-Dist: torch\n")
    with open(os.path.join(info, "RECORD"), "w") as fh:
        fh.write(f"{name},,\nflash_attn/__init__.py,,\nflash_attn-2.8.3.dist-info/METADATA,,\n")


def predict(site: str) -> None:
    sys.path.insert(0, ROOT)
    from fa_doctor.commands.check import CheckOptions, gather
    from fa_doctor.diagnose.checks.binary import check_binaries
    from fa_doctor.diagnose.derive.inventory import assess_all
    from fa_doctor.probes.modules import by_stem, listdir

    listdir.cache_clear()
    by_stem.cache_clear()
    os.environ["PYTHONPATH"] = site  # the target interpreter (this one) sees the fake site first
    facts = gather(CheckOptions(python=sys.executable), {})
    del os.environ["PYTHONPATH"]
    for f in check_binaries(facts, assess_all(facts), None):
        print(f"  predicted: {f.id} {f.severity.value}: {f.detail.splitlines()[0][:240]}")


def main() -> None:
    root = tempfile.mkdtemp()
    for i, archs in enumerate(sys.argv[1:] or ["9.0a", "8.0", "8.0+PTX"]):
        where = os.path.join(root, f"b{i}")
        site = os.path.join(root, f"site{i}")
        site_with(build(archs, where), site)
        print(f"TORCH_CUDA_ARCH_LIST={archs}")
        predict(site)
        run = subprocess.run(
            [sys.executable, "-c", RUN], env={**os.environ, "PYTHONPATH": site}, capture_output=True, text=True
        )
        print("  real run:", ((run.stdout + run.stderr).strip().splitlines() or ["(nothing)"])[-1][:240])


if __name__ == "__main__":
    main()
