"""What to install, named exactly for each operating system: one source for the set-up,
the backend choice and ``vllmchat doctor``.

``system`` is ``platform.system().lower()``: "linux", "windows" or "darwin". The
Linux texts name Debian/Ubuntu packages; the Windows and macOS ones name the
vendor's installer (and its ``winget`` / ``xcode-select`` command where one exists).
"""

from __future__ import annotations

VS_BUILD_TOOLS = (
    'Visual Studio Build Tools 2022 with the "Desktop development with C++" workload '
    "(winget install Microsoft.VisualStudio.2022.BuildTools --override "
    '"--passive --wait --add Microsoft.VisualStudio.Workload.VCTools --includeRecommended"'
    ", or visualstudio.microsoft.com/downloads), then open a new terminal"
)
XCODE_CLT = "the Xcode command-line tools: xcode-select --install"

_HINTS: dict[str, dict[str, str]] = {
    "compiler": {
        "linux": "a C/C++ compiler: sudo apt-get install build-essential "
        "(Fedora: sudo dnf install gcc-c++)",
        "windows": VS_BUILD_TOOLS,
        "darwin": XCODE_CLT,
    },
    "cuda": {
        "linux": "install NVIDIA's CUDA toolkit (nvcc; Debian/Ubuntu: apt install "
        "nvidia-cuda-toolkit, or the cuda-toolkit package from NVIDIA) or point CUDA_HOME at it",
        "windows": "install NVIDIA's CUDA Toolkit for Windows (developer.nvidia.com/cuda-downloads;"
        " it sets CUDA_PATH) after the Visual Studio Build Tools, then open a new terminal",
        "darwin": "CUDA does not exist on macOS: the Metal build is used",
    },
    "vulkan": {
        "linux": "install the Vulkan headers and glslc (Debian/Ubuntu: apt install "
        "libvulkan-dev glslc)",
        "windows": "install the Vulkan SDK from LunarG (vulkan.lunarg.com/sdk/home; it sets "
        "VULKAN_SDK and puts glslc on PATH), then open a new terminal",
        "darwin": "on macOS the Metal build is used (Vulkan needs MoltenVK; not supported here)",
    },
    "driver": {
        "linux": "install the NVIDIA driver (Debian: apt install nvidia-driver; Ubuntu: "
        "ubuntu-drivers install), then reboot",
        "windows": "install the NVIDIA driver (nvidia.com/drivers, or the GeForce/NVIDIA app); "
        "nvidia-smi must answer",
        "darwin": "macOS has no NVIDIA driver: the Metal build is used",
    },
    "venv": {
        "linux": "install Python's venv module: sudo apt-get install python3-venv "
        "(the one for this Python's version, e.g. python3.12-venv)",
        "windows": "repair the Python installation (its installer's Modify: pip and the "
        "venv module)",
        "darwin": "install Python 3.10 or newer from python.org or Homebrew (brew install "
        "python@3.12), whose venv module works",
    },
}


def install_hint(what: str, system: str) -> str:
    """The exact thing to install for ``what`` ("compiler", "cuda", "vulkan", "driver",
    "venv") on ``system``; other Unix systems get Linux's text. (Python itself is named
    in ``vllmchat/setup/__main__.py``, which old Pythons must be able to read.)"""
    texts = _HINTS[what]
    return texts.get(system, texts["linux"])


def setup_command(system: str, backend: str | None = None) -> str:
    """The set-up command as typed on ``system``, forcing ``backend`` when given."""
    if system == "windows":
        forced = f'$env:VLLMCHAT_BACKEND="{backend}"; ' if backend else ""
        return forced + "scripts\\setup.ps1"
    return (f"VLLMCHAT_BACKEND={backend} " if backend else "") + "scripts/setup.sh"
