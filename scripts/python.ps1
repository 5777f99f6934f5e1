# The Python that runs the set-up on Windows (dot-sourced by setup.ps1, test.ps1 and
# run.ps1): $env:PYTHON, else the py launcher's newest Python 3, else python3/python on
# PATH that is not the Microsoft Store's stand-in. Sets $Python (a command and its args).
function Find-VllmchatPython {
    if ($env:PYTHON) { return , @($env:PYTHON) }
    if (Get-Command py -ErrorAction SilentlyContinue) { return @("py", "-3") }
    foreach ($name in @("python3", "python")) {
        $found = Get-Command $name -CommandType Application -ErrorAction SilentlyContinue |
            Where-Object { $_.Source -notlike "*\WindowsApps\*" } | Select-Object -First 1
        if ($found) { return , @($found.Source) }
    }
    [Console]::Error.WriteLine("vllmchat set-up: no Python was found")
    [Console]::Error.WriteLine("  fix: install Python 3.10 or newer (winget install Python.Python.3.12, or python.org), then open a new terminal")
    exit 2
}
$Python = Find-VllmchatPython
$PythonArgs = @($Python | Select-Object -Skip 1)
