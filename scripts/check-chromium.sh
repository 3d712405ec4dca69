#!/bin/sh
# The page's browser tests drive Debian's chromium headless: installs chromium and
# chromium-driver with apt-get when missing (as root, where apt is there), otherwise stops
# with one clear sentence saying what to install.
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
    exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Debian's chromium and chromium-driver for the page's browser tests" >&2
    if DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null ||
        { apt-get update -qq >/dev/null &&
          DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; }; then
        exit 0
    fi
    echo "treestore's browser tests need chromium and chromedriver, and 'apt-get install chromium chromium-driver' failed: install them and run this again." >&2
    exit 1
fi
echo "treestore's browser tests need chromium and /usr/bin/chromedriver: install them (for example 'sudo apt-get install chromium chromium-driver') and run this again, or run 'make test-fast'." >&2
exit 1
