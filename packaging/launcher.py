"""Entry point of the bundled app (PyInstaller)."""

import multiprocessing
import sys

if __name__ == "__main__":
    multiprocessing.freeze_support()  # the engine process is spawned from this executable
    from vllmchat.main import main

    sys.exit(main())
