"""The set-up: what to build for this machine, and the edits made to llama.cpp's
source before it is built. Stdlib only: it runs before the virtual environment exists."""
