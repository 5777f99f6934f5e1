# Set up vllmchat in a project-local virtual environment (.venv) on Windows (or
# wherever PowerShell runs): python -m vllmchat.setup, stdlib only.
#   usage: scripts\setup.ps1 [run|dev|llama]    (--plan [--json] shows the decisions)
# $env:PYTHON picks the Python; $env:VLLMCHAT_BACKEND="cuda|vulkan|cpu" forces a backend.
$ErrorActionPreference = "Stop"
. (Join-Path $PSScriptRoot "python.ps1")
Set-Location (Split-Path -Parent $PSScriptRoot)
& $Python[0] @PythonArgs -m vllmchat.setup @args
exit $LASTEXITCODE
