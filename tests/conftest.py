"""Suite-wide configuration: the leak scan, hypothesis runs derandomized under CI, and no
test leaving logging switched off.

``tests._leak_scan`` checks every response, fetched document, audit record and error the
suite makes ESRA produce, and fails the session on a leak; ``pytester`` lets a test run an
inner suite through it.

Locally, property tests explore new examples every run; under ``CI=true`` they use a fixed
derivation so a landing is judged on the same examples each time (a failure found locally is
fixed and kept as an explicit example, not discovered by chance on CI).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

pytest_plugins = ["pytester", "tests._leak_scan"]

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI") == "true":
    settings.load_profile("ci")


@pytest.fixture(autouse=True)
def _logging_left_on() -> Iterator[None]:
    """Fail the test that leaves logging disabled process-wide (``logging.disable``, as a
    sandbox reader does in the child it is meant for), rather than every later test that
    reads a log line, far from the cause."""
    yield
    silenced = logging.root.manager.disable
    if silenced:
        logging.disable(logging.NOTSET)
        pytest.fail(f"the test left logging disabled (logging.disable({silenced}))")
