# Set everything up (once) and run the whole test suite with lint, the import
# contracts and mypy: python -m vllmchat.setup test [PYTEST ARGS].
$ErrorActionPreference = "Stop"
. (Join-Path $PSScriptRoot "python.ps1")
Set-Location (Split-Path -Parent $PSScriptRoot)
& $Python[0] @PythonArgs -m vllmchat.setup test @args
exit $LASTEXITCODE
