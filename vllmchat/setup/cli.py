"""``python -m vllmchat.setup``: the set-up, its plan, and the test and launch commands.

    python -m vllmchat.setup [run|dev|llama]     set up .venv (run: the app; dev: and the
                                                 test tools; llama: only llama.cpp)
    python -m vllmchat.setup --plan [--json] [--platform P]
                                                 the decisions, without building
    python -m vllmchat.setup test [PYTEST ARGS]  set up dev, then lint, import contracts,
                                                 mypy and pytest
    python -m vllmchat.setup launch [APP ARGS]   set up run, then start vllmchat

``VLLMCHAT_BACKEND=cuda|vulkan|metal|hip|cpu`` forces a backend, ``VLLMCHAT_VENV`` the
venv's folder, ``VLLMCHAT_WHEEL_CACHE`` the wheel cache, ``CMAKE_ARGS`` extra flags.
Stdlib only until the venv exists. Bad input ends in one message with its fix.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from vllmchat.setup.plan import make_plan
from vllmchat.setup.steps import PROFILES, Setup, SetupError, nproc, run, say
from vllmchat.setup.targets import PLATFORMS

ROOT = Path(__file__).resolve().parents[2]
INTERRUPTED = (
    "interrupted; nothing half-done was kept (stamps are written after each step, "
    "wheels enter the cache whole): run the same command again to go on"
)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    for stream in (sys.stdout, sys.stderr):  # a user folder's letters on any console
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    try:
        if argv[:1] == ["test"]:
            return test_command(argv[1:])
        if argv[:1] == ["launch"]:
            return launch_command(argv[1:])
        return _setup_or_plan(argv)
    except SetupError as error:
        say(str(error))
        return error.code
    except KeyboardInterrupt:
        say(INTERRUPTED)
        return 130
    except BrokenPipeError:  # the reader went away (``| head``)
        return 0
    except OSError as error:
        where = f" ({error.filename})" if error.filename else ""
        say(
            f"{error.strerror or error}{where}: free disk space or fix the folder's "
            "permissions, then run the set-up again"
        )
        return 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m vllmchat.setup",
        description="Set vllmchat up in a project-local virtual environment.",
        epilog="also: `test [PYTEST ARGS]` and `launch [APP ARGS]`",
    )
    parser.add_argument("profile", nargs="?", default="run", choices=PROFILES)
    parser.add_argument("--plan", action="store_true", help="show the decisions; build nothing")
    parser.add_argument("--json", action="store_true", help="the plan as JSON (implies --plan)")
    parser.add_argument(
        "--platform", choices=sorted(PLATFORMS), help="plan for this platform's facts"
    )
    return parser


def _setup_or_plan(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.plan or args.json or args.platform:
        target = PLATFORMS[args.platform] if args.platform else None
        plan = make_plan(target, os.environ.get("VLLMCHAT_BACKEND"))
        print(json.dumps(plan.to_dict(), indent=2) if args.json else plan.to_text())
        return 0 if plan.choice.ok else 2
    return setup(args.profile)


def _as_root_with_apt() -> bool:
    return hasattr(os, "getuid") and os.getuid() == 0 and shutil.which("apt-get") is not None


_APT_UPDATED: list[bool] = []  # apt's lists are read once a run


def _apt_install(packages: list[str]) -> None:
    say(f"installing with apt: {' '.join(packages)}")
    if not _APT_UPDATED:
        run(["apt-get", "update", "-qq"], "apt-get update")
        _APT_UPDATED.append(True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    run(["apt-get", "install", "-y", "-qq", *packages], "apt-get install", env=env, quiet=True)


def setup(profile: str, root: Path = ROOT) -> int:
    """Set up ``profile`` in the venv; 0 when done."""
    plan = make_plan(requested=os.environ.get("VLLMCHAT_BACKEND"))
    choice = plan.choice
    if not choice.ok:
        raise SetupError(choice.error or "no backend", code=2)
    say(f"llama.cpp backend {choice.backend}: {choice.reason}")
    for note in choice.notes:
        print(f"  note: {note}", file=sys.stderr)
    if choice.apt_packages:
        if not _as_root_with_apt():
            packages = " ".join(choice.apt_packages)
            raise SetupError(
                f"the {choice.backend} build needs: sudo apt-get install {packages}", code=2
            )
        _apt_install(list(choice.apt_packages))
    steps = Setup(
        root, os.environ.get("VLLMCHAT_VENV") or ".venv", plan.target.system, dict(os.environ)
    )
    steps.ensure_venv()
    pyver = steps.pyver()
    steps.install_llama(choice.backend, " ".join(choice.cmake_args), plan.cudacxx, pyver)
    if profile == "llama":
        return 0
    steps.install_app(profile)
    if profile == "dev":
        steps.install_server(pyver)
    steps.demo_model()
    steps.voice_models()
    if sys.platform.startswith("linux"):
        _system_libraries(steps, profile)
    return 0


def _system_libraries(steps: Setup, profile: str) -> None:
    """The system libraries every Qt file the app loads needs (read with ``ldd``: the
    window's xcb plugin, image formats, Qt Multimedia), and desktop-file-utils (the
    tests). Installed with apt as root; else the one command is said."""
    check = [steps.vpy, "-m", "vllmchat.core.machine.qt_check"]
    tried: set[str] = set()
    for _round in range(3):  # a library installed can reveal what it loads in turn
        found = subprocess.run(
            [*check, "--apt-packages"], capture_output=True, text=True, cwd=steps.root, check=False
        )
        missing = [p for p in found.stdout.split() if p not in tried]
        if profile == "dev" and not shutil.which("desktop-file-validate"):
            missing.append("desktop-file-utils")
        if not missing:
            break
        if not _as_root_with_apt():
            if shutil.which("apt-get"):
                say(f"Qt needs system libraries: sudo apt-get install {' '.join(missing)}")
            else:
                subprocess.run(check, cwd=steps.root, check=False)
            return
        _apt_install_each(missing)
        tried.update(missing)
    subprocess.run(check, cwd=steps.root, check=False)  # says what is still missing


def _apt_install_each(packages: list[str]) -> None:
    """Install ``packages``; where apt refuses the lot, each on its own, so that one
    name apt does not know costs only itself (the check then says what is left)."""
    try:
        _apt_install(packages)
    except SetupError:
        for package in packages:
            try:
                _apt_install([package])
            except SetupError:
                say(f"apt could not install {package}")


def _venv_tool(name: str) -> str:
    venv = ROOT / (os.environ.get("VLLMCHAT_VENV") or ".venv")
    if sys.platform == "win32":
        return str(venv / "Scripts" / f"{name}.exe")
    return str(venv / "bin" / name)


def _exec(argv: list[str], env: dict[str, str]) -> int:
    """Become ``argv`` (POSIX), or run it and pass its exit code on (Windows)."""
    sys.stdout.flush()
    sys.stderr.flush()
    if os.name == "posix":
        os.execve(argv[0], argv, env)
    return subprocess.run(argv, env=env, check=False).returncode


def test_command(pytest_args: list[str]) -> int:
    """Set up dev, then ruff (lint and format), the import contracts, mypy and pytest."""
    setup("dev")
    os.chdir(ROOT)
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    for tool in (
        ["ruff", "check", "."],
        ["ruff", "format", "--check", "."],
        ["lint-imports"],
        ["mypy"],
    ):
        done = subprocess.run([_venv_tool(tool[0]), *tool[1:]], env=env, cwd=ROOT, check=False)
        if done.returncode != 0:
            return done.returncode
    return _exec([_venv_tool("python"), "-m", "pytest", *test_workers(pytest_args)], env)


def test_workers(pytest_args: list[str]) -> list[str]:
    """``pytest_args`` with one pytest-xdist worker per core (at most 4), unless they say
    how many: the suite waits on one core much of the time (Qt, Whisper, the server's
    loop), and each worker's engines get their share of the cores (tests/conftest.py)."""
    told = any(a.startswith(("-n", "--numprocesses")) for a in pytest_args)
    workers = min(4, nproc())
    if told or workers < 2 or "no:xdist" in pytest_args:
        return pytest_args
    return ["-n", str(workers), "--dist", "load", *pytest_args]


def launch_command(app_args: list[str]) -> int:
    """Set up run, then start vllmchat."""
    setup("run")
    return _exec([_venv_tool("vllmchat"), *app_args], dict(os.environ))
