"""The sandbox child's file restriction (``_landlock``), piece by piece: the rights its
ruleset handles on each Landlock ABI, the structures it hands the kernel, the kernel's own
numbers, and the directories it grants reading beneath."""

from __future__ import annotations

import os
import re
import sys
import sysconfig
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

from esra.core._docstore import _landlock

# Every right, by the ABI it first appeared in (Documentation/userspace-api/landlock.rst).
ABI_1_FS = 0x1FFF  # EXECUTE .. MAKE_SYM
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
TCP = 0b11  # BIND_TCP, CONNECT_TCP
SCOPES = 0b11  # ABSTRACT_UNIX_SOCKET, SIGNAL


@pytest.mark.parametrize(
    ("abi", "fs", "net", "scoped"),
    [
        (1, ABI_1_FS, 0, 0),
        (2, ABI_1_FS | REFER, 0, 0),
        (3, ABI_1_FS | REFER | TRUNCATE, 0, 0),
        (4, ABI_1_FS | REFER | TRUNCATE, TCP, 0),
        (5, ABI_1_FS | REFER | TRUNCATE | IOCTL_DEV, TCP, 0),
        (6, ABI_1_FS | REFER | TRUNCATE | IOCTL_DEV, TCP, SCOPES),
        (7, ABI_1_FS | REFER | TRUNCATE | IOCTL_DEV, TCP, SCOPES),
        (12, ABI_1_FS | REFER | TRUNCATE | IOCTL_DEV, TCP, SCOPES),  # a later kernel
    ],
)
def test_the_ruleset_handles_every_right_its_abi_knows(
    abi: int, fs: int, net: int, scoped: int
) -> None:
    assert _landlock.handled(abi) == (fs, net, scoped)
    attr = _landlock.ruleset_attr(abi)
    # handled_access_fs, then handled_access_net (ABI 4) and scoped (ABI 6): no field an
    # older kernel would refuse.
    fields = [fs] + ([net] if abi >= 4 else []) + ([scoped] if abi >= 6 else [])
    assert attr == b"".join(field.to_bytes(8, sys.byteorder) for field in fields)


def test_there_is_no_abi_0() -> None:
    with pytest.raises(ValueError, match="no Landlock ABI 0"):
        _landlock.handled(0)


def test_a_child_is_granted_reading_alone() -> None:
    reading = _landlock.ACCESS_FS["READ_FILE"] | _landlock.ACCESS_FS["READ_DIR"]
    assert reading == _landlock.READABLE
    assert not _landlock.READABLE & _landlock.ACCESS_FS["EXECUTE"]


def test_a_path_rule_is_packed_in_twelve_bytes() -> None:
    rule = _landlock.path_beneath(_landlock.READABLE, 7)
    assert len(rule) == 12
    assert rule == _landlock.READABLE.to_bytes(8, sys.byteorder) + (7).to_bytes(4, sys.byteorder)


_HEADER = Path("/usr/include/linux/landlock.h")


def test_the_constants_are_the_kernel_headers() -> None:
    """The rights, flags and structures are the installed uapi header's (those it defines: a
    right newer than the header is left out of the check)."""
    if not _HEADER.exists():
        pytest.skip(f"{_HEADER} is not installed")
    text = _HEADER.read_text()
    bits = {
        (kind, name): int(shift)
        for kind, name, shift in re.findall(
            r"#define\s+LANDLOCK_(ACCESS_FS|ACCESS_NET|SCOPE)_(\w+)\s+\(1ULL\s*<<\s*(\d+)\)", text
        )
    }
    ours = {
        **{("ACCESS_FS", name): bit for name, bit in _landlock.ACCESS_FS.items()},
        **{("ACCESS_NET", name): bit for name, bit in _landlock.ACCESS_NET.items()},
        **{("SCOPE", name): bit for name, bit in _landlock.SCOPE.items()},
    }
    known = {key: bit for key, bit in ours.items() if key in bits}
    assert known == {key: 1 << bits[key] for key in known}
    # ABI 1's thirteen at least: the check is never empty.
    assert {name for kind, name in known if kind == "ACCESS_FS"} >= {
        name for name, bit in _landlock.ACCESS_FS.items() if bit & ABI_1_FS
    }
    version = re.search(r"#define\s+LANDLOCK_CREATE_RULESET_VERSION\s+\(1U\s*<<\s*(\d+)\)", text)
    assert version is not None
    assert 1 << int(version.group(1)) == _landlock.CREATE_RULESET_VERSION
    assert re.search(rf"LANDLOCK_RULE_PATH_BENEATH\s*=\s*{_landlock.RULE_PATH_BENEATH}\b", text)
    # struct landlock_path_beneath_attr: a __u64 then an __s32, packed.
    beneath = re.search(r"struct landlock_path_beneath_attr \{(.*?)\}([^;]*);", text, re.S)
    assert beneath is not None
    fields = re.findall(r"^\s*(__[us]\d+)\s+(\w+);", beneath.group(1), re.M)
    assert fields == [("__u64", "allowed_access"), ("__s32", "parent_fd")]
    assert "packed" in beneath.group(2)
    ruleset = re.search(r"struct landlock_ruleset_attr \{(.*?)\};", text, re.S)
    assert ruleset is not None
    declared = re.findall(r"^\s*__u64\s+(\w+);", ruleset.group(1), re.M)
    assert declared == ["handled_access_fs", "handled_access_net", "scoped"][: len(declared)]


@pytest.mark.parametrize(
    "header", ["/usr/include/x86_64-linux-gnu/asm/unistd_64.h", "/usr/include/asm-generic/unistd.h"]
)
def test_the_system_call_numbers_are_the_kernels(header: str) -> None:
    path = Path(header)
    if not path.exists():
        pytest.skip(f"{header} is not installed")
    defined = dict(re.findall(r"#define __NR_(landlock_\w+)\s+(\d+)", path.read_text()))
    if not defined:
        pytest.skip(f"{header} predates Landlock")
    assert {name: int(number) for name, number in defined.items()} == _landlock.NUMBERS


def _beneath(path: Path, directory: str) -> bool:
    return path == Path(directory) or Path(directory) in path.parents


def test_a_child_may_read_the_standard_library_and_nothing_of_the_host(tmp_path: Path) -> None:
    granted = _landlock.readable_directories()
    assert granted, "nothing granted: no import would work"
    stdlib = Path(os.path.realpath(sysconfig.get_paths()["stdlib"]))
    assert any(_beneath(stdlib, directory) for directory in granted)
    secrets = [
        Path("/"),
        Path("/etc/passwd"),
        Path("/proc/self/environ"),
        Path(os.path.realpath(tmp_path)) / "state.db",
    ]
    for secret in secrets:
        assert not any(_beneath(secret, directory) for directory in granted), secret
    # Each once, none beneath another.
    assert len(set(granted)) == len(granted)
    for directory in granted:
        assert not any(other != directory and _beneath(Path(directory), other) for other in granted)


def _module(name: str, origin: str, *, package: bool = False) -> ModuleType:
    module = ModuleType(name)
    locations = [os.path.dirname(origin)] if package else None
    module.__spec__ = SimpleNamespace(  # type: ignore[assignment]
        name=name, origin=origin, submodule_search_locations=locations
    )
    return module


def test_a_directory_is_granted_for_the_code_imported_from_it(tmp_path: Path) -> None:
    """Not for being on the import path: ``python -m`` and ``-c`` put the working directory
    first on it, and a worker started in its data directory would grant ``state.db``."""
    root = Path(os.path.realpath(tmp_path))
    modules = {
        "tool": _module("tool", str(root / "scripts" / "tool.py")),
        "esra": _module("esra", str(root / "src" / "esra" / "__init__.py"), package=True),
        # Says nothing of where they lie: built in, or a submodule (its package does).
        "sys": _module("sys", "built-in"),
        "esra.core": _module("esra.core", str(root / "elsewhere" / "core" / "__init__.py")),
        # ``python -m esra.core.x``: the module run, under its own name.
        "__main__": _module("esra.core.x", str(root / "src" / "esra" / "core" / "x.py")),
    }
    assert _landlock.import_roots(modules) == {str(root / "scripts"), str(root / "src")}


def test_the_working_directory_is_not_granted_for_being_on_the_import_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = Path(os.path.realpath(tmp_path)) / "data"
    data.mkdir()
    monkeypatch.chdir(data)
    monkeypatch.setattr(sys, "path", ["", str(data), *sys.path])
    assert not any(_beneath(data, directory) for directory in _landlock.readable_directories())


def test_the_root_directory_is_never_granted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever put it on the import path (a ``.pth`` file, ``PYTHONPATH``): it would grant
    everything."""
    monkeypatch.setattr(sys, "path", [*sys.path, "/"])
    assert "/" not in _landlock.readable_directories()
