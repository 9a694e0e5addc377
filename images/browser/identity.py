"""What the browser image holds, printed as JSON at build time (/opt/browser/identity.json):
Chromium's own `--version` and its Debian package, and the versions of the Python
distributions that drive it. runner.containers.browser.installed reads it back."""

import importlib.metadata
import json
import subprocess
import sys


def run(*argv: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True)
    return done.stdout.strip()


print(json.dumps({
    "format": 1,
    "chromium": run("/usr/bin/chromium", "--version"),
    "chromium_package": run("dpkg-query", "-W", "-f=${Version}", "chromium"),
    "executable": "/usr/bin/chromium",
    "playwright": importlib.metadata.version("playwright"),
    "pytest_playwright": importlib.metadata.version("pytest-playwright"),
    "pytest_base_url": importlib.metadata.version("pytest-base-url"),
    "pytest": importlib.metadata.version("pytest"),
    "python": sys.version.split()[0],
}, indent=1, sort_keys=True))
