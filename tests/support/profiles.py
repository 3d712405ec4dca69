"""How many examples a property test tries: Hypothesis profiles, chosen once per run.

``dev`` (the default) is what a developer's ``make test`` runs, ``ci`` explores twice as
far where CI runs (``CI=true``), ``fast`` a quarter as far for ``make test-fast`` (the
quick loop: every property still runs, and ``make test`` explores it in full), and
``fuzz`` is a long hunt, chosen by hand (``TREESTORE_HYPOTHESIS_PROFILE=fuzz``, which
also overrides ``CI``). Tests take the profile's count; a test that needs another says
why beside its ``@settings``. No profile has a deadline: times on a shared machine vary,
and a test that needs a hang guard sets its own.
"""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import settings

__all__ = ["EXAMPLES", "PROFILE_ENV", "chosen_profile", "register_profiles"]

EXAMPLES = {"fast": 25, "dev": 100, "ci": 200, "fuzz": 10_000}
"""Each profile's examples per property test."""
PROFILE_ENV = "TREESTORE_HYPOTHESIS_PROFILE"


def register_profiles() -> None:
    """Register the profiles of :data:`EXAMPLES` with Hypothesis."""
    for name, examples in EXAMPLES.items():
        settings.register_profile(name, max_examples=examples, deadline=None, print_blob=True)


def chosen_profile(env: Mapping[str, str]) -> str:
    """The profile a run with environment ``env`` uses.

    >>> chosen_profile({}), chosen_profile({"CI": "true"}), chosen_profile({"CI": "false"})
    ('dev', 'ci', 'dev')
    >>> chosen_profile({"CI": "true", "TREESTORE_HYPOTHESIS_PROFILE": "fuzz"})
    'fuzz'
    """
    if env.get(PROFILE_ENV):
        return env[PROFILE_ENV]
    return "ci" if env.get("CI", "").lower() in ("true", "1", "yes") else "dev"
