# A Start-menu shortcut for this user to the bundled vllmchat.exe (its icon is the
# exe's own, from vllmchat.ico). Remove it by deleting the .lnk file it prints.
param([Parameter(Mandatory = $true)][string]$Target)
$ErrorActionPreference = "Stop"
$programs = [Environment]::GetFolderPath("Programs")  # %APPDATA%\Microsoft\Windows\Start Menu\Programs
$link = Join-Path $programs "vllmchat.lnk"
$shell = New-Object -ComObject WScript.Shell
$shortcut = $shell.CreateShortcut($link)
$shortcut.TargetPath = $Target
$shortcut.WorkingDirectory = Split-Path -Parent $Target
$shortcut.IconLocation = "$Target,0"
$shortcut.Description = "Chat with local LLMs on llama.cpp"
$shortcut.Save()
Write-Output $link
