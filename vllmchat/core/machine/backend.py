"""Which llama.cpp backend to build, as a pure function of what was detected.

CUDA when an NVIDIA GPU and a CUDA toolkit are present, Metal on macOS, ROCm/HIP
when ``hipcc`` and an AMD GPU are present, Vulkan when a GPU and Vulkan's build
requirements are (or can be installed with apt), else the portable CPU build.
``VLLMCHAT_BACKEND`` forces one; a forced backend whose requirements are missing
is an error saying what to install, while auto-detection falls back to the CPU
and says why. The CPU side is always built portably (``GGML_NATIVE=OFF``: a
``-march=native`` build can die with SIGILL, e.g. where AMX is enabled).
"""

from __future__ import annotations

from dataclasses import dataclass, field

BACKENDS = ("cuda", "vulkan", "metal", "hip", "cpu")
PORTABLE_CPU_ARGS = ("-DGGML_NATIVE=OFF", "-DLLAVA_BUILD=ON")
VULKAN_APT_PACKAGES = ("libvulkan-dev", "glslc")
CUDA_HINT = (
    "install NVIDIA's CUDA toolkit (nvcc; Debian/Ubuntu: apt install nvidia-cuda-toolkit, "
    "or the cuda-toolkit package from NVIDIA) or point CUDA_HOME at it"
)
VULKAN_HINT = (
    "install the Vulkan headers and glslc (Debian/Ubuntu: apt install libvulkan-dev glslc)"
)
HIP_HINT = "install ROCm's HIP SDK (hipcc; see rocm.docs.amd.com) or point ROCM_PATH at it"


@dataclass(frozen=True)
class MachineFacts:
    """What detection found; every field is plain data so choices are testable."""

    system: str = "linux"  # platform.system().lower()
    nvidia_gpus: tuple[str, ...] = ()
    nvidia_compute_caps: tuple[str, ...] = ()  # e.g. ("9.0",)
    nvcc: str | None = None
    amd_gpus: int = 0
    hipcc: str | None = None
    amd_gfx: tuple[str, ...] = ()  # e.g. ("gfx1100",)
    other_gpus: int = 0  # Intel or unknown GPUs (render nodes)
    vulkan_headers: bool = False
    glslc: str | None = None
    apt_as_root: bool = False

    @property
    def any_gpu(self) -> bool:
        return bool(self.nvidia_gpus) or self.amd_gpus > 0 or self.other_gpus > 0

    @property
    def vulkan_ready(self) -> bool:
        return self.vulkan_headers and self.glslc is not None


@dataclass(frozen=True)
class BackendChoice:
    """The backend to build, its CMake flags, why, and what must be installed first."""

    backend: str
    cmake_args: tuple[str, ...]
    reason: str
    apt_packages: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def cuda_architectures(caps: tuple[str, ...]) -> str | None:
    """CMake's CUDA architectures for the local GPUs' compute capabilities ("8.6" -> "86")."""
    archs = sorted({c.replace(".", "") for c in caps if c.replace(".", "").isdigit()}, key=int)
    return ";".join(archs) or None


def _cuda(facts: MachineFacts, reason: str) -> BackendChoice:
    args = ["-DGGML_CUDA=on", *PORTABLE_CPU_ARGS]
    archs = cuda_architectures(facts.nvidia_compute_caps)
    if archs:
        args.append(f"-DCMAKE_CUDA_ARCHITECTURES={archs}")
    return BackendChoice("cuda", tuple(args), reason)


def _vulkan(facts: MachineFacts, reason: str) -> BackendChoice:
    apt = () if facts.vulkan_ready else VULKAN_APT_PACKAGES
    return BackendChoice("vulkan", ("-DGGML_VULKAN=on", *PORTABLE_CPU_ARGS), reason, apt)


def _hip(facts: MachineFacts, reason: str) -> BackendChoice:
    args = ["-DGGML_HIP=on", *PORTABLE_CPU_ARGS]
    if facts.amd_gfx:
        args.append(f"-DAMDGPU_TARGETS={';'.join(sorted(set(facts.amd_gfx)))}")
    return BackendChoice("hip", tuple(args), reason)


def _cpu(reason: str, notes: tuple[str, ...] = ()) -> BackendChoice:
    return BackendChoice("cpu", PORTABLE_CPU_ARGS, reason, notes=notes)


def _forced(facts: MachineFacts, backend: str) -> BackendChoice:
    forced = f"VLLMCHAT_BACKEND={backend}"
    if backend == "cpu":
        return _cpu(f"{forced}: the portable CPU build")
    if backend == "cuda":
        if not facts.nvcc:
            return _failed(backend, f"{forced}, but no CUDA toolkit (nvcc) was found: {CUDA_HINT}")
        return _cuda(facts, f"{forced} (nvcc at {facts.nvcc})")
    if backend == "vulkan":
        if not facts.vulkan_ready and not facts.apt_as_root:
            have = {"headers": facts.vulkan_headers, "glslc": facts.glslc is not None}
            missing = " and ".join(name for name, ok in have.items() if not ok)
            return _failed(backend, f"{forced}, but Vulkan's {missing} missing: {VULKAN_HINT}")
        return _vulkan(facts, forced)
    if backend == "metal":
        if facts.system != "darwin":
            return _failed(backend, f"{forced}, but Metal exists only on macOS")
        return BackendChoice("metal", PORTABLE_CPU_ARGS, f"{forced} (llama.cpp's default on macOS)")
    if backend == "hip":
        if not facts.hipcc:
            return _failed(backend, f"{forced}, but no hipcc was found: {HIP_HINT}")
        return _hip(facts, f"{forced} (hipcc at {facts.hipcc})")
    return _failed(backend, f"VLLMCHAT_BACKEND={backend!r} is not one of {', '.join(BACKENDS)}")


def _failed(backend: str, error: str) -> BackendChoice:
    return BackendChoice(backend, (), "", error=error)


def choose_backend(facts: MachineFacts, requested: str | None = None) -> BackendChoice:
    """The backend to build on a machine with ``facts``; ``requested`` forces one."""
    requested = (requested or "").strip().lower()
    if requested and requested != "auto":
        return _forced(facts, requested)
    if facts.system == "darwin":
        return BackendChoice("metal", PORTABLE_CPU_ARGS, "macOS: Metal (llama.cpp's default there)")
    notes: list[str] = []
    if facts.nvidia_gpus:
        gpu = facts.nvidia_gpus[0]
        if facts.nvcc:
            return _cuda(facts, f"NVIDIA GPU ({gpu}) and a CUDA toolkit (nvcc at {facts.nvcc})")
        notes.append(f"NVIDIA GPU ({gpu}) but no CUDA toolkit: for CUDA, {CUDA_HINT}")
    if facts.amd_gpus:
        if facts.hipcc:
            return _hip(facts, f"AMD GPU and ROCm's hipcc at {facts.hipcc}")
        notes.append(f"AMD GPU but no hipcc: for ROCm, {HIP_HINT}")
    if facts.any_gpu:
        if facts.vulkan_ready:
            return _vulkan(facts, "a GPU, the Vulkan headers and glslc")
        if facts.apt_as_root:
            return _vulkan(facts, "a GPU; Vulkan's build requirements will be installed with apt")
        notes.append(f"a GPU but no Vulkan build requirements: for Vulkan, {VULKAN_HINT}")
        return _cpu("no GPU backend can be built here (see the notes)", tuple(notes))
    if facts.nvcc:
        notes.append(f"a CUDA toolkit ({facts.nvcc}) but no NVIDIA GPU")
    return _cpu("no GPU was found", tuple(notes))


def rebuild_advice(facts: MachineFacts) -> str:
    """The exact command that rebuilds llama.cpp for this machine's GPU (and what to install)."""
    choice = choose_backend(facts)
    if choice.backend != "cpu":
        return f"rebuild llama.cpp for the GPU: VLLMCHAT_BACKEND={choice.backend} scripts/setup.sh"
    wanted = "cuda" if facts.nvidia_gpus else "hip" if facts.amd_gpus else "vulkan"
    first = "; ".join(choice.notes)
    return f"{first}; then: VLLMCHAT_BACKEND={wanted} scripts/setup.sh"
