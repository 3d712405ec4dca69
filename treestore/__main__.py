"""``python -m treestore``: the same as the ``treestore`` command."""

import sys

from treestore.errors import ShadowedPackageError
from treestore.packages import require_own_packages

try:
    require_own_packages()  # a user's shell.py or query.py in this folder: named, exit 2
except ShadowedPackageError as exc:
    sys.stderr.write(f"treestore: {exc}\n")
    sys.exit(2)

from shell.entry import run

run()
