"""``python -m vllmchat.setup``: set vllmchat up, or show the plan (``--plan``).

This module and the package's ``__init__`` files are kept to syntax every Python
from 2.7 on can read (no annotations, f-strings or ``from __future__`` imports):
an older Python must get as far as the version check and say what to install.
"""

import sys

MINIMUM = (3, 10)


def refusal(version, executable, platform):  # type: (tuple[object, ...], str, str) -> str | None
    """The message for a Python older than ``MINIMUM`` (None when it is new enough)."""
    if tuple(version[:2]) >= MINIMUM:
        return None
    if platform.startswith("win"):
        fix = (
            "install Python 3.10 or newer (winget install Python.Python.3.12, or python.org), "
            "then run: scripts\\setup.ps1"
        )
    elif platform == "darwin":
        fix = (
            "install Python 3.10 or newer (python.org, or brew install python@3.12), "
            "then run: PYTHON=python3.12 scripts/setup.sh"
        )
    else:
        fix = (
            "install Python 3.10 or newer (Debian/Ubuntu: sudo apt-get install python3 "
            "python3-venv; or python.org), then run: PYTHON=python3.12 scripts/setup.sh"
        )
    found = ".".join(str(part) for part in version[:3])
    text = "vllmchat set-up: vllmchat needs Python 3.10 or newer; {0} is Python {1}.\n  fix: {2}"
    return text.format(executable or "this Python", found, fix)


if __name__ == "__main__":
    if not __package__:  # run as a file (scripts/run.sh): import vllmchat from its checkout
        import os

        sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    message = refusal(sys.version_info, sys.executable, sys.platform)
    if message:
        sys.stderr.write(message + "\n")
        sys.exit(2)
    from vllmchat.setup.cli import main

    sys.exit(main(sys.argv[1:]))
