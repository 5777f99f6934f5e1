"""``python -m vllmchat.core.machine.qt_check``: can every Qt file the app loads find its
system libraries (the window's xcb plugin, image formats, Qt Multimedia)?

``--apt-packages`` prints the Debian/Ubuntu packages to install (nothing when every
library is found); ``--quiet`` only sets the exit code; ``--json`` prints each
part's missing libraries by file; by default the advice is printed. Exit code 0
when nothing is missing.
"""

from __future__ import annotations

import argparse
import json
import sys

from vllmchat.core.machine.qt_libraries import check_all


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="qt_check")
    parser.add_argument("--apt-packages", action="store_true")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not sys.platform.startswith("linux"):
        return 0
    checks = check_all()
    ok = all(c.ok for c in checks)
    if args.apt_packages:
        packages = sorted({p for c in checks for p in c.missing.apt_packages})
        if packages:
            print(" ".join(packages))
    elif args.json:
        found = {c.part: {str(f): list(m) for f, m in c.missing_by_file.items()} for c in checks}
        print(json.dumps(found, indent=2))
    elif not args.quiet and not ok:
        for check in checks:
            if not check.ok:
                print(check.advice(), file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
