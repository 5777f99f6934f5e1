"""``python -m vllmchat``."""

import sys

from vllmchat.cli import main

if __name__ == "__main__":
    sys.exit(main())
