"""Compiled kernels without loading numba in every process: an ahead-of-time build kept beside the sources.

A `KernelSet` is a few numba functions a reader calls from Python. `KernelSet.load` gives them as an extension
module that numba built ahead of time (`numba.pycc`) from the kernels' source text, once per text: importing it takes
a millisecond and loads neither numba nor LLVM. Loading numba and its cached code instead costs about 0.9 s in each
process on the 2-core machine (`import numba` 0.5 s, the dispatchers 0.15 s, the cached machine code 0.4 s), more
than the compiled pass saves on a dump.json of 30 MB, and a comparison reads its two runs in two processes.

The first `load` of a new source text builds the module (numba and a C compiler: about a minute on a 2-core
machine; a lock lets one process build while another waits) into ``__pycache__`` beside the sources, else into the
user's cache folder. Where it cannot be built (no compiler, nowhere to write) the failure is remembered beside it and
numba's just-in-time dispatchers are used, as before: the same machine code, loaded at the cost above.
``GRAPHCMP_AHEAD_OF_TIME=0`` asks for those. `build_detached` runs a build in a process of its own at the lowest
priority, which outlives the one that starts it (the command line's, once a command has read without the kernels).

An extension built ahead of time checks no argument type (a wrong dtype reads memory wrongly): each call is
checked here against the export's signature first, a few microseconds per call.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.machinery
import importlib.util
import operator
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

__all__ = ["AHEAD_OF_TIME_ENV", "KernelSet", "build_detached", "sources"]

AHEAD_OF_TIME_ENV = "GRAPHCMP_AHEAD_OF_TIME"
"""Environment variable: ``0`` loads numba's just-in-time dispatchers instead of the module built ahead of time."""

Signature = tuple[str, tuple[str, ...]]
"""A kernel's return type and argument types as numba writes them: ``("i8", ("u1[::1]", "i8[:, ::1]", "i8"))``.
Arrays are C-contiguous (``[::1]``, ``[:, ::1]``); a read-only array may be passed where one is read only."""


@dataclass
class KernelSet:
    """Kernels called from Python, loaded once per process (`load`).

    `source` is the module that defines the kernels: its text and that of every module of the package it imports
    (at the top, as kernels' modules do) name the build. `signatures` are the kernels' (one each); `dispatchers`
    imports numba and gives each kernel's dispatcher by the same names.
    """

    name: str
    source: Path
    signatures: Mapping[str, Signature]
    dispatchers: Callable[[], Mapping[str, Any]]
    flags: Mapping[str, Any] = field(default_factory=dict)
    """numba's compiler flags for the exported functions, which the build otherwise compiles with its defaults (no
    ``nogil``, Python's error model): ``{"release_gil": True, "error_model": "numpy"}`` for kernels that threads
    call at once. The functions they call keep their own options (``fastmath``, ...)."""
    host_cpu: bool = False
    """Build for this machine's processor (its vector instructions: what numba's just-in-time code uses) instead of
    any x86-64. The build is then named by the processor too, so that machines sharing a folder never load one
    another's (an unknown instruction kills the process) nor remove it as older."""
    _loaded: Any = field(default=None, repr=False)
    _key: str = field(default="", repr=False)

    def built(self) -> bool:
        """Whether `load` would import a module built ahead of time, without building it (a few milliseconds)."""
        if self._loaded is not None:
            return isinstance(self._loaded, _Checked)
        if os.environ.get(AHEAD_OF_TIME_ENV) == "0":
            return False
        module_name = self._module_name()
        return any(_file(folder, module_name).is_file() for folder in _folders(self.source.parent))

    def buildable(self) -> bool:
        """Whether `load` would build the set now: not built yet, `can_build`, and no other process is `building`
        it (a few milliseconds)."""
        return not self.built() and self.can_build() and not self.building()

    def can_build(self) -> bool:
        """Whether the set is or can be built ahead of time: not declined (``GRAPHCMP_AHEAD_OF_TIME=0``), no build of
        this source text failed before, and a folder to build it in can be written; else `load` gives numba's
        dispatchers."""
        if os.environ.get(AHEAD_OF_TIME_ENV) == "0":
            return False
        module_name = self._module_name()
        folders = _folders(self.source.parent)
        return not any((folder / f"{module_name}.failed").exists() for folder in folders) and any(
            map(_writable, folders))

    def building(self) -> bool:
        """Whether another process holds the set's build lock: it is building it, or waits to load it."""
        module_name = self._module_name()
        return any(_held(folder / f"{module_name}.lock") for folder in _folders(self.source.parent))

    def load(self, *, build: bool = True) -> Any:
        """The kernels as attributes: of the module built ahead of time (built now when missing, unless not `build`),
        else numba's."""
        if self._loaded is None:
            self._loaded = self._load() if build or self.built() else _Jit(self.dispatchers())
        return self._loaded

    def _load(self) -> Any:
        if os.environ.get(AHEAD_OF_TIME_ENV) == "0":
            return _Jit(self.dispatchers())
        module_name = self._module_name()
        folders = _folders(self.source.parent)
        for folder in folders:
            if (built := _import(folder, module_name)) is not None:
                return _Checked(built, self.signatures)
        for folder in folders:
            if (folder / f"{module_name}.failed").exists():
                return _Jit(self.dispatchers())
            with contextlib.suppress(OSError), _locked(folder / f"{module_name}.lock"):  # held from before numba
                # loads, so that `buildable` tells another process at once that the set is being built
                built = _import(folder, module_name) or _build(folder, module_name, self)
                return _Jit(self.dispatchers()) if built is None else _Checked(built, self.signatures)
        return _Jit(self.dispatchers())

    def _module_name(self) -> str:
        if not self._key:
            self._key = self.key()
        return f"_{self.name}_{_processor()}_{self._key}" if self.host_cpu else f"_{self.name}_{self._key}"

    def key(self) -> str:
        """What names a build: the sources' text, the signatures, the interpreter and the machine."""
        flags = f" {sorted(self.flags.items())}" if self.flags else ""  # a set without flags keeps its earlier key
        digest = hashlib.sha256(f"{importlib.machinery.EXTENSION_SUFFIXES[0]} {self.signatures}{flags}".encode())
        # the suffix names the interpreter, its version and the machine: cpython-311-x86_64-linux-gnu
        for path in sorted(sources(self.source)):
            digest.update(path.read_bytes())
        return digest.hexdigest()[:16]


def build_detached(entry: str) -> bool:
    """Run `entry` (``"package.module:function"``, a function that loads kernel sets) in a process of its own at the
    lowest priority, detached from this one and its terminal: it builds what is missing while this process ends.

    The graphcmp of this process is the one imported there (its folder first on the path, and the working folder:
    ``-c`` puts that first, and another checkout may be where the command ran). A build it starts is
    written under another name and renamed, under the set's lock (`KernelSet.load`): a process that needs the set
    meanwhile waits for it, and one killed half way leaves nothing behind. Whether the process was started.
    """
    import subprocess  # only here: every reading process imports this module

    module, function = entry.split(":")
    package_root = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH")
    code = f"import os; os.nice(19); from {module} import {function}; {function}()"
    try:
        subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True, cwd=package_root,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join([package_root, *([path] if path else [])])})
    except (OSError, ValueError):  # no interpreter to start (an embedded one): the set is built when a read needs it
        return False
    return True


_IMPORT = re.compile(rb"^(?:from|import) (graphcmp(?:\.\w+)*)", re.MULTILINE)


def sources(module: Path) -> set[Path]:
    """The file `module` and the files of every module of its package it imports at the top of the file, and of
    theirs in turn (the package's ``__init__`` files aside)."""
    root = next(parent for parent in module.resolve().parents if parent.name == "graphcmp").parent
    found: set[Path] = set()
    todo = [module.resolve()]
    while todo:
        path = todo.pop()
        if path in found or not path.is_file():
            continue
        found.add(path)
        for name in _IMPORT.findall(path.read_bytes()):
            todo.append(root.joinpath(*name.decode().split(".")).with_suffix(".py"))
    return found


@functools.cache
def _processor() -> str:
    """A short name of this machine's processor model and its instruction sets (Linux's ``/proc/cpuinfo``; elsewhere
    what `platform` knows)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            lines = [line for line in info.read().splitlines() if line.startswith(("model name", "flags"))][:2]
        identity = "\n".join(lines)
    except OSError:
        import platform  # only where there is no /proc/cpuinfo: every reading process imports this module

        identity = f"{platform.machine()} {platform.processor()}"
    return hashlib.sha256(identity.encode()).hexdigest()[:8]


def _folders(beside: Path) -> list[Path]:
    """Where builds are kept, in order: beside the sources, else the user's cache folder (when there is a home)."""
    folders = [beside / "__pycache__"]
    with contextlib.suppress(RuntimeError, KeyError):
        folders.append(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "graphcmp")
    return folders


def _file(folder: Path, module_name: str) -> Path:
    return folder / f"{module_name}{importlib.machinery.EXTENSION_SUFFIXES[0]}"


def _import(folder: Path, module_name: str) -> ModuleType | None:
    path = _file(folder, module_name)
    if not path.is_file():
        return None
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        return None
    try:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except ImportError:
        return None
    return module


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    import fcntl  # POSIX only: a system without it (Windows) cannot fork either, and never reads two runs at once

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _writable(folder: Path) -> bool:
    """Whether a build could be written into `folder`: it, or the nearest folder above it that exists, is writable."""
    while not folder.exists() and folder.parent != folder:
        folder = folder.parent
    return folder.is_dir() and os.access(folder, os.W_OK)


def _held(path: Path) -> bool:
    """Whether another process holds the lock at `path` (`_locked`): it is building the set."""
    try:
        import fcntl
    except ImportError:  # no POSIX locks: `_locked` cannot build there either
        return False
    try:
        with open(path, "rb") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(lock, fcntl.LOCK_UN)
    except BlockingIOError:
        return True
    except OSError:  # no lock file: nobody has started a build there
        return False
    return False


def _build(folder: Path, module_name: str, kernels: KernelSet) -> ModuleType | None:
    """Build the kernels into `folder` (written under another name, then renamed: a reader never sees half a
    file); None, with the reason kept beside it, when that fails."""
    if sys.stderr.isatty():
        name = module_name.lstrip("_").rsplit("_", 1)[0]
        print(f"graphcmp: building the {name} kernels, once for this installation (about a minute)",
              file=sys.stderr, flush=True)
    import tempfile  # only to build: every reading process imports this module
    import warnings

    try:
        with warnings.catch_warnings(), tempfile.TemporaryDirectory(dir=folder) as scratch:
            warnings.simplefilter("ignore")  # numba says pycc is pending deprecation; it is what builds ahead of time
            from numba.pycc import CC

            builder = CC(module_name)
            builder.output_dir = scratch
            builder.verbose = False
            builder.target_cpu = "host" if kernels.host_cpu else ""
            dispatchers = kernels.dispatchers()
            for name, (returns, arguments) in kernels.signatures.items():
                builder.export(name, f"{returns}({', '.join(arguments)})")(dispatchers[name].py_func)
            with _quiet(), _exported_with(kernels.flags):
                builder.compile()
            os.replace(_file(Path(scratch), module_name), _file(folder, module_name))
    except Exception as error:  # no compiler, no numba.pycc, nowhere to write: numba's dispatchers instead
        with contextlib.suppress(OSError):
            (folder / f"{module_name}.failed").write_text(f"{type(error).__name__}: {error}\n")
        return None
    _remove_older(folder, module_name)
    return _import(folder, module_name)


@contextlib.contextmanager
def _exported_with(flags: Mapping[str, Any]) -> Iterator[None]:
    """numba's ahead-of-time compiler compiles the exported functions with `flags` set (it makes its flags itself,
    with numba's defaults, and has no option for them)."""
    from numba.pycc import compiler

    plain = compiler.Flags

    def made() -> Any:
        made_flags = plain()
        for name, value in flags.items():
            setattr(made_flags, name, value)
        return made_flags

    compiler.Flags = made
    try:
        yield
    finally:
        compiler.Flags = plain


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The C compiler's lines kept off the user's terminal (it writes to the process's descriptors)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(os.devnull, "wb") as null:
        os.dup2(null.fileno(), 1)
        os.dup2(null.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def _remove_older(folder: Path, module_name: str) -> None:
    """Builds of the same set from older source texts: never loaded again."""
    stem = module_name.rsplit("_", 1)[0] + "_"
    for path in folder.glob(f"{stem}*"):
        if not path.name.startswith(module_name):
            with contextlib.suppress(OSError):
                path.unlink()


class _Jit:
    """numba's dispatchers, by kernel name."""

    def __init__(self, dispatchers: Mapping[str, Any]) -> None:
        self.__dict__.update(dispatchers)


class _Checked:
    """The kernels of a module built ahead of time, each call's arguments checked against the kernel's signature."""

    def __init__(self, module: ModuleType, signatures: Mapping[str, Signature]) -> None:
        for name, (_, arguments) in signatures.items():
            setattr(self, name, _checking(name, getattr(module, name), [_argument(a) for a in arguments]))


def _argument(text: str) -> tuple[np.dtype, int] | str:
    """An array argument's dtype and dimensions; a scalar's type as numba writes it (``i8``, ``f8``)."""
    if "[" not in text:
        return text
    dtype, dimensions = text.split("[", 1)
    return np.dtype(dtype), dimensions.count(",") + 1


def _checking(name: str, kernel: Callable[..., Any], arguments: list[tuple[np.dtype, int] | str]) -> Callable:
    def checked(*args: Any) -> Any:
        if len(args) != len(arguments):
            raise TypeError(f"{name}: {len(args)} arguments given, {len(arguments)} expected")
        for k, (arg, expected) in enumerate(zip(args, arguments)):
            if isinstance(expected, str):  # a scalar: an integer, or a float where numba reads one
                if not expected.startswith("f"):
                    operator.index(arg)
                elif not isinstance(arg, float):
                    raise TypeError(f"{name}: argument {k} is {_described(arg)}, expected a float")
            elif not (isinstance(arg, np.ndarray) and arg.dtype == expected[0] and arg.ndim == expected[1]
                      and arg.flags.c_contiguous):
                raise TypeError(f"{name}: argument {k} is {_described(arg)}, expected a C-contiguous {expected[1]}-d "
                                f"{expected[0]} array")
        return kernel(*args)

    checked.__name__ = name
    return checked


def _described(arg: Any) -> str:
    if isinstance(arg, np.ndarray):
        return f"a {arg.ndim}-d {arg.dtype} array" + ("" if arg.flags.c_contiguous else " (not C-contiguous)")
    return type(arg).__name__
