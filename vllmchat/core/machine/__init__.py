"""What this machine is: GPUs, toolkits, the llama.cpp backend to build, Qt's runtime libraries.

Standard library only: ``scripts/setup.sh`` runs these modules with the system
Python before the virtual environment exists.
"""
