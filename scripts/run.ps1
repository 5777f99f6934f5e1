# Set everything up (once) and start vllmchat on the demo model, in this folder:
# python vllmchat\setup\__main__.py launch [APP ARGS].
$ErrorActionPreference = "Stop"
. (Join-Path $PSScriptRoot "python.ps1")
$entry = Join-Path (Split-Path -Parent $PSScriptRoot) "vllmchat\setup\__main__.py"
& $Python[0] @PythonArgs $entry launch @args
exit $LASTEXITCODE
