"""The file restriction of a sandbox child: what a parser taken over by its document may read.

The system-call filter (``_seccomp``) leaves a child no way to send anything anywhere but
its answer — and its answer is stored as the tenant's text, searchable by that tenant. So a
child able to read what the worker's user reads could answer with ``/proc/<worker>/environ``
(the host's database passwords and key-encryption keys, same user, dumpable), the embedded
default's ``state.db`` (every tenant's documents), configuration, or any tenant's files.

Each child therefore restricts itself with Landlock (Linux 5.13 and later) before it reads
its document: a ruleset that handles every file-system right the kernel's Landlock ABI
knows, and grants only ``READ_FILE`` and ``READ_DIR`` beneath the directories a Python
child needs for its lazy imports (``readable_directories``):

* the interpreter's library directories — the standard library, its extension modules and
  site-packages, of the environment and of the base installation (``sysconfig``); not the
  prefixes themselves, which on a distribution's Python are ``/usr`` or ``/usr/local``
  (whose ``etc`` holds configuration);
* every directory the server imported code from (``import_roots``): the entries of the
  import path that hold its code, and an editable install's source directory. Not the
  path's other entries: the working directory, which ``python -m`` and ``-c`` put first on
  it, the owner's script directory, or a stray ``PYTHONPATH`` entry — a worker started in
  its data directory would otherwise grant its children ``state.db``. A child importing a
  module first skips a directory it may not list, as Python skips one it cannot read;
* the directory of every shared library mapped into the server, as ``/proc/self/maps``
  lists them before any child is forked: where the C library and its neighbours live, so
  that an extension module imported first in a child finds the libraries it links. A
  mapped file that is no shared object (a deleted temporary file, a locale archive) is left
  out: a child has those mapped already.

No ``/proc``, ``/etc``, ``/tmp``, home or data directory: nothing else can be opened, nor
any directory listed, and a file cannot be written, created, removed, renamed, linked or
truncated anywhere, nor a device's ``ioctl`` used (the filter refuses most of that too).
Files opened before the restriction — the child's answer pipe, ``/dev/null`` as its
standard streams — stay usable. ``EXECUTE`` is not granted: Landlock checks it where a
file is opened to be executed (``execve``), not where a shared library is mapped
executable (``dlopen`` opens it to read, then maps it), so imports need only
``READ_FILE`` — and no child may run a program. Where the ABI has them, TCP's ``bind`` and
``connect`` are handled with no rule (refused twice, with the filter), and the child is
scoped: it may signal, or reach through an abstract UNIX socket, no process outside its
own Landlock domain. Landlock also keeps it from tracing any process outside its domain,
so no other process's memory or ``/proc`` files are within reach either.

The server builds the ruleset once (``prepare``): it opens each directory (``O_PATH``),
adds its rule, and closes it again — the ruleset holds what it needs. Each child then only
calls ``landlock_restrict_self`` (``confine``) and closes the ruleset: a child that kept
the server's ruleset open could add rules to it, for every later child. A restriction can
only ever be tightened, never lifted, by the child or anything it starts.

Where Landlock is missing (an older kernel, one built without it, or it is not enabled at
boot) ``prepare`` raises ``LandlockUnavailableError`` saying why; children then run without
it, and the server says so once, as it does for the filter. Extraction never fails for
want of a restriction.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform
import re
import sys
import sysconfig
from collections.abc import Iterable, Mapping
from types import ModuleType
from typing import Any, NamedTuple

__all__ = [
    "ACCESS_FS",
    "ACCESS_NET",
    "CREATE_RULESET_VERSION",
    "NUMBERS",
    "READABLE",
    "RULE_PATH_BENEATH",
    "SCOPE",
    "Handled",
    "LandlockUnavailableError",
    "Ruleset",
    "abi",
    "confine",
    "handled",
    "import_roots",
    "path_beneath",
    "prepare",
    "readable_directories",
    "ruleset_attr",
]

# The system calls, numbered alike on every architecture but Alpha (all from 424 on are).
NUMBERS = {"landlock_create_ruleset": 444, "landlock_add_rule": 445, "landlock_restrict_self": 446}
# <linux/landlock.h>.
CREATE_RULESET_VERSION = 1 << 0
RULE_PATH_BENEATH = 1
ACCESS_FS = {
    "EXECUTE": 1 << 0,
    "WRITE_FILE": 1 << 1,
    "READ_FILE": 1 << 2,
    "READ_DIR": 1 << 3,
    "REMOVE_DIR": 1 << 4,
    "REMOVE_FILE": 1 << 5,
    "MAKE_CHAR": 1 << 6,
    "MAKE_DIR": 1 << 7,
    "MAKE_REG": 1 << 8,
    "MAKE_SOCK": 1 << 9,
    "MAKE_FIFO": 1 << 10,
    "MAKE_BLOCK": 1 << 11,
    "MAKE_SYM": 1 << 12,
    "REFER": 1 << 13,
    "TRUNCATE": 1 << 14,
    "IOCTL_DEV": 1 << 15,
}
ACCESS_NET = {"BIND_TCP": 1 << 0, "CONNECT_TCP": 1 << 1}
SCOPE = {"ABSTRACT_UNIX_SOCKET": 1 << 0, "SIGNAL": 1 << 1}
# The ABI each right first appeared in (the rest of ACCESS_FS: ABI 1).
_FS_SINCE = {"REFER": 2, "TRUNCATE": 3, "IOCTL_DEV": 5}
_NET_SINCE = 4
_SCOPE_SINCE = 6
# All a child is granted, beneath each readable directory (a file: READ_FILE alone).
READABLE = ACCESS_FS["READ_FILE"] | ACCESS_FS["READ_DIR"]

_PR_SET_NO_NEW_PRIVS = 38
# A shared object's file name: ``libc.so.6``, ``etree.cpython-311-x86_64-linux-gnu.so``.
_SHARED_OBJECT = re.compile(r"\.so(?:\.|$)")
_DELETED = " (deleted)"


class Handled(NamedTuple):
    """What a ruleset handles: refused unless a rule grants it (``scoped``: refused
    outright, outside the child's domain)."""

    fs: int
    net: int
    scoped: int


def handled(version: int) -> Handled:
    """Every right Landlock ABI ``version`` (1 or later) knows; for an ABI later than this
    module knows, every right it knows."""
    if version < 1:
        msg = f"no Landlock ABI {version}"
        raise ValueError(msg)
    fs = sum(bit for name, bit in ACCESS_FS.items() if _FS_SINCE.get(name, 1) <= version)
    net = sum(ACCESS_NET.values()) if version >= _NET_SINCE else 0
    scoped = sum(SCOPE.values()) if version >= _SCOPE_SINCE else 0
    return Handled(fs, net, scoped)


def ruleset_attr(version: int) -> bytes:
    """``struct landlock_ruleset_attr`` for ABI ``version``: ``handled_access_fs``, then
    ``handled_access_net`` (ABI 4) and ``scoped`` (ABI 6), each a ``__u64``, as long as that
    ABI's kernel knows it to be (an older kernel refuses fields it does not know)."""
    rights = handled(version)
    fields = [rights.fs]
    if version >= _NET_SINCE:
        fields.append(rights.net)
    if version >= _SCOPE_SINCE:
        fields.append(rights.scoped)
    return b"".join(field.to_bytes(8, sys.byteorder) for field in fields)


def path_beneath(allowed: int, parent_fd: int) -> bytes:
    """``struct landlock_path_beneath_attr``: a ``__u64`` then an ``__s32``, packed (12
    bytes, no padding)."""
    return allowed.to_bytes(8, sys.byteorder) + parent_fd.to_bytes(4, sys.byteorder, signed=True)


class LandlockUnavailableError(Exception):
    """Landlock cannot restrict children here; the message says why."""


class Ruleset:
    """A ruleset the server built (``prepare``), held open for its children to apply."""

    def __init__(self, fd: int, version: int, directories: tuple[str, ...]) -> None:
        self.fd, self.abi, self.directories = fd, version, directories


@functools.cache
def _libc() -> Any:
    """The C library's ``syscall`` and ``prctl``, typed; looked up once, in the server, so
    that its children inherit them rather than each load them."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.argtypes = [ctypes.c_long] * 5
    libc.syscall.restype = ctypes.c_long
    libc.prctl.argtypes = [
        ctypes.c_int,
        ctypes.c_ulong,
        ctypes.c_ulong,
        ctypes.c_ulong,
        ctypes.c_ulong,
    ]
    libc.prctl.restype = ctypes.c_int
    return libc


def _call(name: str, *arguments: int) -> int:
    """System call ``name``; its answer, or -1 with ``ctypes.get_errno()`` set."""
    padded = (*arguments, 0, 0, 0, 0)[:4]
    return int(_libc().syscall(NUMBERS[name], *padded))


def _supported_platform() -> bool:
    return sys.platform.startswith("linux") and platform.machine() != "alpha"


def abi() -> int:
    """The kernel's Landlock ABI version; 0 where it has none."""
    if not _supported_platform():
        return 0
    return max(_call("landlock_create_ruleset", 0, 0, CREATE_RULESET_VERSION), 0)


def _absence() -> str:
    """Why ``abi()`` found no Landlock."""
    if not _supported_platform():
        return f"no Landlock on this platform ({sys.platform}, {platform.machine()})"
    if _call("landlock_create_ruleset", 0, 0, CREATE_RULESET_VERSION) >= 0:
        return "the kernel reports no Landlock ABI"
    code = ctypes.get_errno()
    if code == errno.ENOSYS:
        return "this kernel has no Landlock (Linux 5.13 or later, built with it)"
    if code == errno.EOPNOTSUPP:
        return "Landlock is not enabled in this kernel (its lsm= boot parameter)"
    return f"the kernel refused Landlock ({errno.errorcode.get(code, code)})"


def _refused(what: str) -> LandlockUnavailableError:
    code = ctypes.get_errno()
    return LandlockUnavailableError(f"{what}: {errno.errorcode.get(code, code)}")


def prepare(directories: Iterable[str]) -> Ruleset:
    """The ruleset granting reads beneath ``directories`` alone (those that exist), tried
    once in a forked process of its own.

    Raises:
        LandlockUnavailableError: the kernel has no Landlock, or refused the ruleset.
    """
    version = abi()
    if version < 1:
        raise LandlockUnavailableError(_absence())
    attr = ctypes.create_string_buffer(ruleset_attr(version))
    fd = _call("landlock_create_ruleset", ctypes.addressof(attr), len(attr.raw), 0)
    if fd < 0:
        raise _refused("the kernel refused the ruleset")
    granted: list[str] = []
    try:
        for directory in directories:
            if _add_rule(fd, directory):
                granted.append(directory)
        ruleset = Ruleset(fd, version, tuple(granted))
        _probe(ruleset)
    except BaseException:
        os.close(fd)
        raise
    return ruleset


def _add_rule(fd: int, path: str) -> bool:
    """Grant reading beneath ``path``; False when it cannot be reached (gone, or behind a
    directory this user may not search: no child could read it either)."""
    try:
        parent = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        # READ_DIR means nothing to a file (a zip on the import path), and the kernel
        # refuses a right a file cannot have.
        allowed = READABLE if os.path.isdir(path) else ACCESS_FS["READ_FILE"]
        rule = ctypes.create_string_buffer(path_beneath(allowed, parent))
        if _call("landlock_add_rule", fd, RULE_PATH_BENEATH, ctypes.addressof(rule), 0) != 0:
            raise _refused(f"the kernel refused the rule for {path}")
    finally:
        os.close(parent)
    return True


def _probe(ruleset: Ruleset) -> None:
    """Restrict a forked process of its own, which exits at once: children will not fail
    where the server could tell in advance."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the probe, which never returns
        os._exit(0 if _restrict(ruleset) else 1)
    _, status = os.waitpid(pid, 0)
    if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
        raise LandlockUnavailableError("the kernel refused to restrict a process")


def confine(ruleset: Ruleset) -> bool:
    """Restrict this process (a sandbox child) to ``ruleset``, for good, and close it;
    whether it is restricted (``prepare`` tried it in advance)."""
    try:
        return _restrict(ruleset)
    finally:
        # The ruleset is the server's: a child that kept it could add rules to it, and so
        # loosen every later child's restriction.
        os.close(ruleset.fd)


def _restrict(ruleset: Ruleset) -> bool:
    # Without it the kernel takes a restriction only from a privileged process; with it,
    # nothing this process executes can gain privileges (set-user-ID) past it.
    if _libc().prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False
    return _call("landlock_restrict_self", ruleset.fd, 0) == 0


def readable_directories() -> tuple[str, ...]:
    """What this process's children may read beneath (see the module docstring): the
    interpreter's library directories, the directories code was imported from, and those
    of the shared libraries mapped here — each once, none beneath another, and never the
    root directory, whatever code came from there: it would grant everything."""
    found = [
        *_library_directories(),
        *import_roots(sys.modules),
        *_shared_object_directories(),
    ]
    real = (os.path.realpath(path) for path in found if os.path.exists(path))
    return _outermost(path for path in real if path != os.path.sep)


def _library_directories() -> list[str]:
    """The standard library, its extension modules and site-packages, of this environment
    and of the installation it was made from."""
    base = {"base": sys.base_prefix, "platbase": sys.base_exec_prefix}
    names = ("stdlib", "platstdlib", "purelib", "platlib")
    return [
        paths[name]
        for paths in (sysconfig.get_paths(), sysconfig.get_paths(vars=base))
        for name in names
    ]


def import_roots(modules: Mapping[str, ModuleType | None]) -> set[str]:
    """The directories ``modules``' top-level modules and packages were imported from: the
    import path's entries that hold code, wherever the path's other entries point (see the
    module docstring), and an editable install's source directory, which its finder reaches
    without any entry."""
    roots: set[str] = set()
    for module in modules.values():
        spec = getattr(module, "__spec__", None)
        if spec is None or "." in spec.name:
            continue  # run as a script, or a submodule: its package says where it came from
        if spec.submodule_search_locations:  # a package: the directory holding it
            roots.update(
                os.path.dirname(os.path.realpath(p)) for p in spec.submodule_search_locations
            )
        elif spec.origin and os.path.isabs(spec.origin):  # a module file, not built in
            roots.add(os.path.dirname(os.path.realpath(spec.origin)))
    return roots


def _shared_object_directories() -> list[str]:
    """The directories of the shared libraries mapped into this process (none where there
    is no ``/proc``)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="surrogateescape") as maps:
            lines = maps.read().splitlines()
    except OSError:
        return []
    directories = []
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) < 6:
            continue  # anonymous memory
        path = fields[5]
        if (
            path.startswith("/")
            and not path.endswith(_DELETED)
            and _SHARED_OBJECT.search(os.path.basename(path))
        ):
            directories.append(os.path.dirname(path))
    return directories


def _outermost(paths: Iterable[str]) -> tuple[str, ...]:
    """``paths``, sorted, without repeats or any beneath another of them (its rule would
    add nothing)."""
    kept: list[str] = []
    for path in sorted(set(paths)):
        if not any(path == other or path.startswith(other.rstrip("/") + "/") for other in kept):
            kept.append(path)
    return tuple(kept)
