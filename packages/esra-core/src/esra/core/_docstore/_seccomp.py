"""The system-call filter of a sandbox child: what a parser taken over by its document is refused.

A child forked by the sandbox server (``_sandbox_server``) installs it first thing, before it
reads the document: a seccomp-BPF program (``prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER)``,
after ``PR_SET_NO_NEW_PRIVS``), built here with ``struct`` and installed with ``ctypes``, that
the kernel runs on every system call the child makes from then on, and that it can never lift.

It allows by default and refuses what reading a PDF or a DOCX never does, with ``EPERM``:

* the network: ``socket``, ``socketpair``, ``connect``, ``bind``, ``listen``, ``accept``,
  ``accept4``, ``sendto``, ``sendmsg``, ``sendmmsg`` (a child holds no socket, and can make
  none, so it has no peer, new or old);
* other programs and processes: ``execve``, ``execveat``, ``fork``, ``vfork``, and ``clone``
  unless it starts a thread (``CLONE_THREAD``, and no new namespace): the server ends
  whatever a child forks, but only when the child ends; refused, a child can start nothing
  (no fork bomb, no helper outliving its limits);
* reaching into other processes: ``ptrace``, ``process_vm_readv``/``writev``,
  ``pidfd_getfd``, ``pidfd_send_signal``, and ``kill``, ``tkill``, ``tgkill``,
  ``rt_sigqueueinfo``, ``rt_tgsigqueueinfo`` and ``prlimit64`` aimed at any process but the
  child itself (its server, or the worker that owns it, run as the same user);
* the kernel's larger surfaces: ``mount`` and the new mount API, ``umount2``,
  ``pivot_root``, ``chroot``, ``unshare``, ``setns``, ``bpf``, ``perf_event_open``,
  ``userfaultfd``, ``keyctl``, ``add_key``, ``request_key``, ``kexec_load``,
  ``kexec_file_load``, ``init_module``, ``finit_module``, ``delete_module``, and io_uring
  (whose operations open, read and connect without a system call of their own);
* changing files: ``open``/``openat`` with ``O_WRONLY``, ``O_RDWR``, ``O_CREAT`` or
  ``O_TRUNC`` in their flags (Linux truncates even a file opened read-only with
  ``O_TRUNC``), ``creat``, ``truncate``, and every call that creates, removes, renames, links,
  or changes the mode, owner, times or extended attributes of a file; ``ioctl(TIOCSTI)``
  (typing into a terminal).

Two are refused with ``ENOSYS`` instead, because they pass their flags in a structure a
filter cannot read: ``openat2`` and ``clone3``. ``ENOSYS`` is what an older kernel answers,
so the C library falls back to ``openat`` and ``clone``, whose flags are checked above —
threads still start. Reading files (the lazy imports), ``mmap``, ``brk``, threads, pipes,
writing to the descriptors the child holds (its answer pipe), and its own exit stay allowed;
so do signals a child sends itself (a crash's ``abort``). Which files a child may read is
the file restriction's to say (``_landlock``, applied just before this filter).

A system call of another ABI than the one the filter was built for (32-bit calls through
``int 0x80`` on x86-64, x32 calls) kills the child: only hostile code makes them.

Built for x86-64 and AArch64 (their system-call numbers differ: AArch64 has the generic
table, without ``open``, ``fork`` and the other calls its ``*at`` forms replace). On any
other architecture, or a kernel that refuses the filter, children run without it
(``unavailable`` says why; the server says so once), held by their limits and the
subreaper alone: extraction never fails for want of a filter.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform
import struct
import sys
from collections.abc import Mapping
from typing import Any

__all__ = ["confine", "unavailable"]

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2

# <linux/seccomp.h>: what the filter answers.
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_RET_ALLOW = 0x7FFF0000
_DENY = _RET_ERRNO | errno.EPERM
_ABSENT = _RET_ERRNO | errno.ENOSYS

# <linux/filter.h>: the classic BPF instructions the program uses.
_LOAD_WORD = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JUMP_EQUAL = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JUMP_AT_LEAST = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JUMP_ANY_BIT = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RETURN = 0x06  # BPF_RET | BPF_K

# struct seccomp_data: the call's number, its ABI, then six 64-bit arguments. Both
# architectures are little-endian: an argument's low 32 bits come first.
_NUMBER_OFFSET = 0
_ARCH_OFFSET = 4


def _argument(index: int) -> int:
    """The offset of argument ``index``'s low 32 bits (all the kernel reads of an int)."""
    return 16 + 8 * index


_AUDIT_ARCH_X86_64 = 0xC000003E
_AUDIT_ARCH_AARCH64 = 0xC00000B7
# x32 calls carry this bit in their number, under x86-64's ABI value.
_X32_SYSCALL_BIT = 0x40000000

_O_WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC
_CLONE_THREAD = 0x00010000
# CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET.
_CLONE_NEW_NAMESPACES = 0x7E020000
_TIOCSTI = 0x5412


class _Architecture:
    """One architecture's ABI value and system-call numbers (None: it has no such call)."""

    def __init__(self, audit: int, numbers: Mapping[str, int | None], *, x32: bool) -> None:
        self.audit, self.numbers, self.x32 = audit, numbers, x32


# Refused with EPERM whatever their arguments.
_REFUSED = (
    "socket",
    "socketpair",
    "connect",
    "bind",
    "listen",
    "accept",
    "accept4",
    "sendto",
    "sendmsg",
    "sendmmsg",
    "execve",
    "execveat",
    "fork",
    "vfork",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    "pidfd_send_signal",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "creat",
    "truncate",
    "unlink",
    "unlinkat",
    "rename",
    "renameat",
    "renameat2",
    "mkdir",
    "mkdirat",
    "rmdir",
    "link",
    "linkat",
    "symlink",
    "symlinkat",
    "mknod",
    "mknodat",
    "chmod",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "chown",
    "fchown",
    "lchown",
    "fchownat",
    "setxattr",
    "lsetxattr",
    "fsetxattr",
    "removexattr",
    "lremovexattr",
    "fremovexattr",
    "utime",
    "utimes",
    "futimesat",
    "utimensat",
    "name_to_handle_at",
    "open_by_handle_at",
)
# Refused with ENOSYS: their flags are in a structure (see the module docstring).
_ABSENT_CALLS = ("openat2", "clone3")
# Allowed only aimed at the child itself: the argument holding the target process.
_SELF_ONLY = {"kill": 0, "tkill": 0, "tgkill": 0, "rt_sigqueueinfo": 0, "rt_tgsigqueueinfo": 0}
# Refused when their flags (the argument given) hold a writing flag.
_OPENING = {"open": 1, "openat": 2}

# <asm/unistd_64.h> (x86-64) and <asm-generic/unistd.h> (AArch64); the calls numbered from
# 424 on have one number on every architecture. AArch64 lacks the calls that its *at forms
# replace, and fork and vfork (its C library forks with clone).
_NUMBERS: dict[str, tuple[int | None, int | None]] = {
    "socket": (41, 198),
    "socketpair": (53, 199),
    "connect": (42, 203),
    "bind": (49, 200),
    "listen": (50, 201),
    "accept": (43, 202),
    "accept4": (288, 242),
    "sendto": (44, 206),
    "sendmsg": (46, 211),
    "sendmmsg": (307, 269),
    "execve": (59, 221),
    "execveat": (322, 281),
    "fork": (57, None),
    "vfork": (58, None),
    "clone": (56, 220),
    "clone3": (435, 435),
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "pidfd_getfd": (438, 438),
    "pidfd_send_signal": (424, 424),
    "kill": (62, 129),
    "tkill": (200, 130),
    "tgkill": (234, 131),
    "rt_sigqueueinfo": (129, 138),
    "rt_tgsigqueueinfo": (297, 240),
    "prlimit64": (302, 261),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "chroot": (161, 51),
    "unshare": (272, 97),
    "setns": (308, 268),
    "open_tree": (428, 428),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "mount_setattr": (442, 442),
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "userfaultfd": (323, 282),
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "open": (2, None),
    "openat": (257, 56),
    "openat2": (437, 437),
    "creat": (85, None),
    "truncate": (76, 45),
    "unlink": (87, None),
    "unlinkat": (263, 35),
    "rename": (82, None),
    "renameat": (264, 38),
    "renameat2": (316, 276),
    "mkdir": (83, None),
    "mkdirat": (258, 34),
    "rmdir": (84, None),
    "link": (86, None),
    "linkat": (265, 37),
    "symlink": (88, None),
    "symlinkat": (266, 36),
    "mknod": (133, None),
    "mknodat": (259, 33),
    "chmod": (90, None),
    "fchmod": (91, 52),
    "fchmodat": (268, 53),
    "fchmodat2": (452, 452),
    "chown": (92, None),
    "fchown": (93, 55),
    "lchown": (94, None),
    "fchownat": (260, 54),
    "setxattr": (188, 5),
    "lsetxattr": (189, 6),
    "fsetxattr": (190, 7),
    "removexattr": (197, 14),
    "lremovexattr": (198, 15),
    "fremovexattr": (199, 16),
    "utime": (132, None),
    "utimes": (235, None),
    "futimesat": (261, None),
    "utimensat": (280, 88),
    "name_to_handle_at": (303, 264),
    "open_by_handle_at": (304, 265),
    "ioctl": (16, 29),
}

_ARCHITECTURES = {
    "x86_64": _Architecture(
        _AUDIT_ARCH_X86_64, {name: pair[0] for name, pair in _NUMBERS.items()}, x32=True
    ),
    "aarch64": _Architecture(
        _AUDIT_ARCH_AARCH64, {name: pair[1] for name, pair in _NUMBERS.items()}, x32=False
    ),
}


def _instruction(code: int, k: int, jump_true: int = 0, jump_false: int = 0) -> bytes:
    """One ``struct sock_filter``; jumps count the instructions skipped."""
    return struct.pack("=HBBI", code, jump_true, jump_false, k)


def _on(number: int | None, body: list[bytes]) -> list[bytes]:
    """``body`` (which ends in a return) for system call ``number``; nothing where the
    architecture has no such call. Expects the call's number loaded."""
    if number is None:
        return []
    return [_instruction(_JUMP_EQUAL, number, 0, len(body)), *body]


def _answer(verdict: int) -> list[bytes]:
    return [_instruction(_RETURN, verdict)]


def _unless_any_bit(argument: int, bits: int) -> list[bytes]:
    """Refuse when ``argument`` has any of ``bits``, else allow."""
    return [
        _instruction(_LOAD_WORD, _argument(argument)),
        _instruction(_JUMP_ANY_BIT, bits, 0, 1),
        _instruction(_RETURN, _DENY),
        _instruction(_RETURN, _RET_ALLOW),
    ]


def _unless_equal_to(argument: int, refused: int) -> list[bytes]:
    """Refuse when ``argument`` is ``refused``, else allow."""
    return [
        _instruction(_LOAD_WORD, _argument(argument)),
        _instruction(_JUMP_EQUAL, refused, 0, 1),
        _instruction(_RETURN, _DENY),
        _instruction(_RETURN, _RET_ALLOW),
    ]


def _only_equal_to(argument: int, *allowed: int) -> list[bytes]:
    """Allow when ``argument`` is one of ``allowed``, else refuse."""
    checks = [
        _instruction(_JUMP_EQUAL, value, len(allowed) - index, 0)
        for index, value in enumerate(allowed)
    ]
    return [
        _instruction(_LOAD_WORD, _argument(argument)),
        *checks,
        _instruction(_RETURN, _DENY),
        _instruction(_RETURN, _RET_ALLOW),
    ]


def _threads_only() -> list[bytes]:
    """``clone``'s flags (argument 0 on both): a thread, in no new namespace, or refused."""
    return [
        _instruction(_LOAD_WORD, _argument(0)),
        _instruction(_JUMP_ANY_BIT, _CLONE_NEW_NAMESPACES, 1, 0),
        _instruction(_JUMP_ANY_BIT, _CLONE_THREAD, 1, 0),
        _instruction(_RETURN, _DENY),
        _instruction(_RETURN, _RET_ALLOW),
    ]


def program(architecture: str, pid: int) -> bytes:
    """The filter for a child ``pid`` on ``architecture`` (``platform.machine()``)."""
    arch = _ARCHITECTURES[architecture]
    numbers = arch.numbers
    rules = [
        _instruction(_LOAD_WORD, _ARCH_OFFSET),
        _instruction(_JUMP_EQUAL, arch.audit, 1, 0),
        _instruction(_RETURN, _RET_KILL_PROCESS),
        _instruction(_LOAD_WORD, _NUMBER_OFFSET),
    ]
    if arch.x32:
        rules += [
            _instruction(_JUMP_AT_LEAST, _X32_SYSCALL_BIT, 0, 1),
            _instruction(_RETURN, _RET_KILL_PROCESS),
        ]
    for name in _REFUSED:
        rules += _on(numbers[name], _answer(_DENY))
    for name in _ABSENT_CALLS:
        rules += _on(numbers[name], _answer(_ABSENT))
    for name, argument in _OPENING.items():
        rules += _on(numbers[name], _unless_any_bit(argument, _O_WRITING))
    for name, argument in _SELF_ONLY.items():
        rules += _on(numbers[name], _only_equal_to(argument, pid))
    # prlimit64(0, ...) is the C library's setrlimit: the process itself.
    rules += _on(numbers["prlimit64"], _only_equal_to(0, 0, pid))
    rules += _on(numbers["clone"], _threads_only())
    rules += _on(numbers["ioctl"], _unless_equal_to(1, _TIOCSTI))
    rules += _answer(_RET_ALLOW)
    return b"".join(rules)


class _Program(ctypes.Structure):
    """``struct sock_fprog``."""

    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


_INSTRUCTION_SIZE = 8


def confine() -> bool:
    """Install the filter in this process (a sandbox child), for good; whether it was
    installed (never on an architecture it is not built for, nor where the kernel refuses
    it: ``unavailable`` tells that in advance)."""
    return _install()


def _install() -> bool:
    architecture = platform.machine()
    if architecture not in _ARCHITECTURES or struct.calcsize("P") != 8:
        return False
    code = program(architecture, os.getpid())
    prctl = _prctl()
    if prctl is None:
        return False
    # Without it the kernel takes a filter only from a privileged process; with it, nothing
    # this process executes can gain privileges (set-user-ID), which the filter relies on.
    if prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False
    instructions = ctypes.create_string_buffer(code, len(code))
    fprog = _Program(len(code) // _INSTRUCTION_SIZE, ctypes.addressof(instructions))
    return bool(prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0) == 0)


@functools.cache
def _prctl() -> Any:
    """The C library's ``prctl``, typed (None where there is none). Looked up once, in the
    server (``unavailable``), so that its children inherit it rather than each load it."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (AttributeError, OSError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl


def unavailable() -> str | None:
    """Why children cannot be filtered here, or None when they can: tried in a forked
    process of its own, which exits at once."""
    architecture = platform.machine()
    if not sys.platform.startswith("linux") or architecture not in _ARCHITECTURES:
        return f"no system-call filter for this platform ({sys.platform}, {architecture})"
    _prctl()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the probe, which never returns
        os._exit(0 if _install() else 1)
    _, status = os.waitpid(pid, 0)
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        return None
    return "the kernel refused the system-call filter"
