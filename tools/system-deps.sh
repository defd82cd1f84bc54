#!/usr/bin/env bash
# Debian packages the test suite needs, installed when missing:
#   chromium, chromium-driver   the headless browser that opens the HTML report
#   r-base-core, r-base-dev     R, for the rpy2 bridge (rpy2 itself comes from PyPI)
#   r-cran-posterior            R's posterior package, for draws_df conversions
#   r-cran-bayesplot            to check that the draws plot with bayesplot directly
# Without root (or sudo) nothing is installed; the tests that need a missing package
# then skip with the reason, except under CI=true, where they fail.
set -euo pipefail
packages=(chromium chromium-driver r-base-core r-base-dev r-cran-posterior r-cran-bayesplot)
if ! command -v dpkg >/dev/null 2>&1; then
    echo "system-deps: not a Debian system; install ${packages[*]} by hand" >&2
    exit 0
fi
missing=()
for package in "${packages[@]}"; do
    dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ]; then
    sudo=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo=(sudo -n)
else
    echo "system-deps: missing ${missing[*]} and no root to install them" >&2
    exit 0
fi
echo "system-deps: installing ${missing[*]} from Debian" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
