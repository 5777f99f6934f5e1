"""``python -m vllmchat``."""

import sys

from vllmchat.main import main

if __name__ == "__main__":
    sys.exit(main())
