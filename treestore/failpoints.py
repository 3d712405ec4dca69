"""Named points where a test can stop a running load (or follower, sweep, gc), to kill
it there.

When ``TREESTORE_FAILPOINT`` names the point reached, the process writes its
pid to the file ``TREESTORE_FAILPOINT_MARKER`` and sleeps, waiting to be
killed. With ``TREESTORE_FAILPOINT_ONCE`` set, only the first arrival stops
(a test can interrupt it and go on). Unset (always, outside tests), a
failpoint costs one dict lookup.
"""

from __future__ import annotations

import os
import time

__all__ = ["failpoint"]


def failpoint(name: str) -> None:
    """Stop here (write the marker, then sleep) if ``TREESTORE_FAILPOINT`` is ``name``."""
    if os.environ.get("TREESTORE_FAILPOINT") != name:
        return
    marker = os.environ.get("TREESTORE_FAILPOINT_MARKER")
    if marker and os.environ.get("TREESTORE_FAILPOINT_ONCE") and os.path.exists(marker):
        return  # stop only the first time the point is reached
    if marker and not os.path.exists(marker):  # the first process to arrive names itself
        temp = f"{marker}.{os.getpid()}"
        with open(temp, "w") as handle:
            handle.write(str(os.getpid()))
        os.replace(temp, marker)
    time.sleep(3600)
