"""``python -m vllmchat.core.machine.qt_check``: can Qt's xcb window plugin load here?

``--apt-packages`` prints the Debian/Ubuntu packages to install (nothing when
every library is found); ``--quiet`` only sets the exit code; by default the
advice is printed. Exit code 0 when the plugin's libraries are all found.
"""

from __future__ import annotations

import argparse
import sys

from vllmchat.core.machine.qt_runtime import XCB_APT_PACKAGES, check_plugin


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="qt_check")
    parser.add_argument("--apt-packages", action="store_true")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    if not sys.platform.startswith("linux"):
        return 0
    check = check_plugin("xcb")
    if args.apt_packages:
        if check.missing:
            print(" ".join(sorted({*XCB_APT_PACKAGES, *check.apt_packages})))
    elif not args.quiet and not check.ok:
        print(check.advice(), file=sys.stderr)
    return 0 if check.ok else 1


if __name__ == "__main__":
    sys.exit(main())
