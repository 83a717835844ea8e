"""The ways an FA version gets into a process: import names, distributions, supported compute capabilities (read
in the released wheels' RECORDs, flash-attention's hopper/setup.py and flash_attn/cute, SGLang's and vLLM's gates)."""

from __future__ import annotations

from dataclasses import dataclass

from fa_doctor.catalog import names


@dataclass(frozen=True, slots=True)
class Implementation:
    """One way of getting an FA version into a process."""

    key: str  # stable id used in findings and JSON: fa2, fa3-sgl, fa3, fa4, fa4-sglang, vllm-fa
    version: int  # FA major version it implements (2, 3 or 4)
    label: str
    distributions: tuple[str, ...]  # normalised names, preferred first
    module: str  # what a server imports
    native: tuple[str, ...] = ()  # compiled modules that must exist beside it (dotted)
    majors: frozenset[int] = frozenset()  # compute-capability majors it can run on
    capabilities: frozenset[tuple[int, int]] = frozenset()  # exact (major, minor) when narrower
    min_torch_cuda: tuple[int, int] | None = None
    note: str = ""

    def supports(self, capability: tuple[int, int]) -> bool:
        return capability in self.capabilities if self.capabilities else capability[0] in self.majors

    @property
    def capability_text(self) -> str:
        exact = [f"{a}.{b}" for a, b in sorted(self.capabilities)]
        return ", ".join(exact or [f"{m}.x" for m in sorted(self.majors)])


FA2 = Implementation(
    key="fa2",
    version=2,
    label=f"FA2 ({names.FLASH_ATTN})",
    distributions=(names.FLASH_ATTN,),
    module="flash_attn",
    native=("flash_attn_2_cuda",),
    # flash-attn 2.8.3.post2 setup.py's cc_flag: sm_80, sm_90, and with CUDA >= 12.8 sm_100 and sm_120; no sm_110,
    # no PTX (sm_80's cubin also runs on 8.6/8.9, sm_100's on 10.3, sm_120's on 12.1).
    majors=frozenset({8, 9, 10, 12}),
    note="release wheels carry sm_80/sm_90 (+sm_100/sm_120 when built with CUDA >= 12.8), no sm_110, no PTX",
)
# flash-attn ships a flash_attn/cute of its own (an old FA4) through at least this release: 21 flash_attn/cute files
# in flash_attn-2.8.3.post2.tar.gz's SOURCES.txt, installed by its find_packages(). Installed after flash-attn-4, it
# overwrites FA4's files.
FA2_SHIPS_CUTE_THROUGH = "2.8.3.post2"
FA3_SGL = Implementation(
    key="fa3-sgl",
    version=3,
    label=f"FA3 (sgl_kernel.flash_attn from {names.SGLANG_KERNEL})",
    distributions=names.SGL_KERNELS,
    module="sgl_kernel.flash_attn",
    native=("sgl_kernel.flash_ops",),
    # flash_ops ships cubins sm_80, sm_86, sm_90a only; SGLang's own gate is major in {8, 9}.
    majors=frozenset({8, 9}),
    min_torch_cuda=(12, 3),
)
FA3 = Implementation(
    key="fa3",
    version=3,
    label=f"FA3 (flash_attn_interface from {names.FLASH_ATTN_3})",
    distributions=(names.FLASH_ATTN_3, names.FLASHATTN_HOPPER),
    module="flash_attn_interface",
    majors=frozenset({8, 9}),
    note="hopper/ build: sm_80 and sm_90a cubins, no sm_100/sm_120, no PTX",
)
FA4 = Implementation(
    key="fa4",
    version=4,
    label=f"FA4 (flash_attn.cute from {names.FLASH_ATTN_4})",
    distributions=(names.FLASH_ATTN_4, *names.FA4_ALIASES),
    module="flash_attn.cute",
    # 4.0.0b36 ships flash_fwd_sm90.py, flash_fwd_sm100.py and flash_fwd_sm120.py (sm_12x too).
    majors=frozenset({8, 9, 10, 11, 12}),
    note="JIT-compiled by the CuTe DSL on first call",
)
FA4_SGLANG = Implementation(
    key="fa4-sglang",
    version=4,
    # SGLang's own vendored copy, or (SGLang 0.5.3rc2-0.5.8.post1) the copy inside the sgl-kernel wheel it calls
    # with ver=4: SglangFacts.fa4_module / fa4_from say which (catalog/servers.py).
    label="FA4 (SGLang's bundled copy)",
    distributions=(names.SGLANG,),
    module="sglang.kernels.ops.attention.flash_attn.cute",
    majors=frozenset({8, 9, 10, 11, 12}),
    note="sm_12x goes through flash_attention_v4_sm120",
)
VLLM_FA = Implementation(
    key="vllm-fa",
    version=2,
    label="vLLM's bundled vllm_flash_attn",
    distributions=(names.VLLM, names.VLLM_FLASH_ATTN),
    module="vllm.vllm_flash_attn",
    majors=frozenset({8, 9, 10, 11, 12}),
)

IMPLEMENTATIONS: tuple[Implementation, ...] = (FA2, FA3_SGL, FA3, FA4, FA4_SGLANG, VLLM_FA)
BY_KEY = {impl.key: impl for impl in IMPLEMENTATIONS}
