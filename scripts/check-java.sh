#!/bin/sh
# Stops with one clear sentence when Java 17+ (needed by Spark) or Python 3.11+ is missing.
if ! command -v java >/dev/null 2>&1; then
    echo "treestore needs Java 17 or newer for Spark, and no 'java' is on PATH: install OpenJDK 17+ (for example 'apt-get install openjdk-17-jre-headless') and run this again." >&2
    exit 1
fi
version=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\)[^"]*".*/\1/p' | head -n 1)
if [ -z "$version" ] || [ "$version" -lt 17 ] 2>/dev/null; then
    echo "treestore needs Java 17 or newer for Spark, but 'java' on PATH is version ${version:-unknown}: install OpenJDK 17+ and put it first on PATH." >&2
    exit 1
fi
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "treestore needs Python 3.11 or newer as 'python3': install it and run this again." >&2
    exit 1
fi
