# Build the Windows bundle (run after scripts\setup.ps1 dev): dist\vllmchat\vllmchat.exe (the
# window) and vllmchat-console.exe (terminal chat, doctor). With -Shortcut, a Start-menu
# shortcut to it is made for this user.
param([switch]$Shortcut)
$ErrorActionPreference = "Stop"
Set-Location (Split-Path -Parent $PSScriptRoot)
$venv = if ($env:VLLMCHAT_VENV) { $env:VLLMCHAT_VENV } else { ".venv" }
$python = Join-Path $venv "Scripts\python.exe"
& $python -m pip install -q "pyinstaller>=6.10"
if ($LASTEXITCODE) { exit $LASTEXITCODE }
$env:QT_QPA_PLATFORM = "offscreen"
& $python packaging\icons.py build\icons | Out-Null
Remove-Item Env:QT_QPA_PLATFORM
& (Join-Path $venv "Scripts\pyinstaller.exe") --noconfirm --clean --log-level WARN `
    --distpath dist --workpath build\pyinstaller packaging\vllmchat.spec
if ($LASTEXITCODE) { exit $LASTEXITCODE }
$exe = (Resolve-Path "dist\vllmchat\vllmchat.exe").Path
Write-Output "bundle: $exe"
if ($Shortcut) { & (Join-Path $PSScriptRoot "windows-shortcut.ps1") -Target $exe }
