"""Dropping every Linux capability in a sandbox child: a root server's child keeps none.

A sandbox child is forked from the sandbox server, which runs as whatever user the worker
runs as — in a container, often root, with root's capabilities. The child's other
containment (``_seccomp``, ``_landlock``) refuses system calls and paths, but a capability
is a privilege of its own: ``CAP_DAC_READ_SEARCH`` opens any file by handle
(``open_by_handle_at``) without a path for a path rule to see, ``CAP_SYS_PTRACE`` and
``CAP_KILL`` reach other users' processes, ``CAP_SYS_ADMIN`` a long list of the kernel's
larger surfaces. Parsing a PDF or a DOCX needs none of them.

So the child empties its permitted, effective and inheritable sets (``capset``) and its
ambient set (``prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)``) before it reads its
document. A process can never regain a capability it dropped without executing a program,
and the child cannot execute one. It stays root by user id — files root owns remain root's
by their mode bits — which is what the path rules are for.

For a child of a server that holds no capability (an ordinary user's), this changes nothing
and costs one system call.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from typing import Any

__all__ = ["drop_all", "prepare"]

# <linux/capability.h>: version 3 takes two 32-bit words per set (capabilities 0–63).
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4


class _Header(ctypes.Structure):
    """``struct __user_cap_header_struct``."""

    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _Data(ctypes.Structure):
    """``struct __user_cap_data_struct``: one 32-bit word of each set."""

    _fields_ = (
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    )


@functools.cache
def _libc() -> Any:
    """The C library (None where there is none). Looked up once, in the server, so that its
    children inherit it rather than each load it."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def prepare() -> None:
    """Look the C library up now (in the server), so that a child only calls into it."""
    _libc()


def drop_all() -> bool:
    """Drop every capability this process holds, for good; whether that succeeded (False
    off Linux, or where the kernel refused)."""
    libc = _libc()
    if libc is None:
        return False
    # The kernel would clear the ambient set as its capabilities leave the permitted set;
    # clearing it first says so instead of relying on that.
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = _Header(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_Data * 2)()
    return bool(libc.capset(ctypes.byref(header), data) == 0)
