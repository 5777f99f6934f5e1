"""Which llama.cpp backend to build, as a pure function of what was detected.

CUDA when an NVIDIA GPU and a CUDA toolkit are present, Metal on Apple-silicon
macOS, ROCm/HIP when ``hipcc`` and an AMD GPU are present, Vulkan when a GPU and
Vulkan's build requirements are (or can be installed with apt), else the portable
CPU build. On Windows: CUDA with an NVIDIA GPU and the toolkit, else Vulkan when
its SDK is installed (``VULKAN_SDK``), else the CPU.
``VLLMCHAT_BACKEND`` forces one; a forced backend whose requirements are missing
is an error saying what to install, while auto-detection falls back to the CPU
and says why. The CPU side is always built portably (``GGML_NATIVE=OFF``: a
``-march=native`` build can die with SIGILL, e.g. where AMX is enabled).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vllmchat.core.machine.install_hints import install_hint, setup_command

BACKENDS = ("cuda", "vulkan", "metal", "hip", "cpu")
PORTABLE_CPU_ARGS = ("-DGGML_NATIVE=OFF", "-DLLAVA_BUILD=ON")
VULKAN_APT_PACKAGES = ("libvulkan-dev", "glslc")
CUDA_HINT = install_hint("cuda", "linux")
VULKAN_HINT = install_hint("vulkan", "linux")
HIP_HINT = "install ROCm's HIP SDK (hipcc; see rocm.docs.amd.com) or point ROCM_PATH at it"


@dataclass(frozen=True)
class MachineFacts:
    """What detection found; every field is plain data so choices are testable."""

    system: str = "linux"  # platform.system().lower()
    machine: str = ""  # platform.machine().lower(): "x86_64", "amd64", "arm64"
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

    @property
    def intel_mac(self) -> bool:
        return self.system == "darwin" and self.machine in ("x86_64", "amd64", "i386")


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


def _without_metal(choice: BackendChoice) -> BackendChoice:
    """A CPU build on macOS, where llama.cpp turns Metal on unless told not to."""
    return BackendChoice("cpu", (*choice.cmake_args, "-DGGML_METAL=OFF"), choice.reason)


def _forced(facts: MachineFacts, backend: str) -> BackendChoice:
    forced = f"VLLMCHAT_BACKEND={backend}"
    if backend == "cpu":
        choice = _cpu(f"{forced}: the portable CPU build")
        return _without_metal(choice) if facts.system == "darwin" else choice
    if backend == "cuda":
        if not facts.nvcc:
            hint = install_hint("cuda", facts.system)
            return _failed(backend, f"{forced}, but no CUDA toolkit (nvcc) was found: {hint}")
        cuda = _cuda(facts, f"{forced} (nvcc at {facts.nvcc})")
        if facts.nvidia_gpus:
            return cuda
        note = "no NVIDIA GPU answers here: the build runs only where one (and its driver) is"
        return BackendChoice(cuda.backend, cuda.cmake_args, cuda.reason, notes=(note,))
    if backend == "vulkan":
        if not facts.vulkan_ready and not facts.apt_as_root:
            have = {"headers": facts.vulkan_headers, "glslc": facts.glslc is not None}
            missing = " and ".join(name for name, ok in have.items() if not ok)
            hint = install_hint("vulkan", facts.system)
            return _failed(backend, f"{forced}, but Vulkan's {missing} missing: {hint}")
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
        if facts.intel_mac:
            reason = "an Intel Mac: the CPU build (llama.cpp's Metal is for Apple silicon)"
            return _without_metal(_cpu(reason))
        return BackendChoice("metal", PORTABLE_CPU_ARGS, "macOS: Metal (llama.cpp's default there)")
    if facts.system == "windows":
        return _windows(facts)
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
        notes.append(
            f"a CUDA toolkit ({facts.nvcc}) but no NVIDIA GPU: the CPU build is used; "
            f"if this machine has one, {install_hint('driver', facts.system)}"
        )
    return _cpu("no GPU was found", tuple(notes))


def _windows(facts: MachineFacts) -> BackendChoice:
    """CUDA with an NVIDIA GPU and the toolkit, else Vulkan with its SDK, else the CPU."""
    notes: list[str] = []
    if facts.nvidia_gpus:
        gpu = facts.nvidia_gpus[0]
        if facts.nvcc:
            return _cuda(facts, f"NVIDIA GPU ({gpu}) and a CUDA toolkit (nvcc at {facts.nvcc})")
        notes.append(
            f"NVIDIA GPU ({gpu}) but no CUDA toolkit: for CUDA, {install_hint('cuda', 'windows')}"
        )
    elif facts.nvcc:
        notes.append(
            f"a CUDA toolkit ({facts.nvcc}) but no NVIDIA GPU answers: "
            f"{install_hint('driver', 'windows')}"
        )
    if facts.vulkan_ready:
        return BackendChoice(
            "vulkan",
            ("-DGGML_VULKAN=on", *PORTABLE_CPU_ARGS),
            "the Vulkan SDK (VULKAN_SDK) and glslc",
            notes=tuple(notes),
        )
    notes.append(f"for a GPU build, {install_hint('vulkan', 'windows')}")
    return _cpu("no CUDA toolkit with an NVIDIA GPU, and no Vulkan SDK", tuple(notes))


def rebuild_advice(facts: MachineFacts) -> str:
    """The exact command that rebuilds llama.cpp for this machine's GPU (and what to install)."""
    choice = choose_backend(facts)
    if choice.backend != "cpu":
        command = setup_command(facts.system, choice.backend)
        return f"rebuild llama.cpp for the GPU: {command}"
    wanted = "cuda" if facts.nvidia_gpus else "hip" if facts.amd_gpus else "vulkan"
    first = "; ".join(choice.notes)
    return f"{first}; then: {setup_command(facts.system, wanted)}"
