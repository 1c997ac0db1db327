"""Files and folders named on the command line: checked at parse time, outputs prepared
before the work, and read failures turned into one line naming the option.

Standard library only: ``arkgpu --help`` stays fast.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arkgpu.cli.argtypes import ArgType, CliError

STDOUT = "-"
"""The output path that means standard output."""


@dataclass(frozen=True)
class Output:
    """An output file named on the command line; ``-`` is standard output."""

    path: Path | None
    """The file to write, or None for standard output."""

    @property
    def to_stdout(self) -> bool:
        """True when the output goes to standard output."""
        return self.path is None

    def prepare(self) -> None:
        """Create the file's folder (before the work starts)."""
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def write_json(self, doc: Any) -> None:
        """Write ``doc`` as indented JSON, to the file or to standard output."""
        text = json.dumps(doc, indent=2) + "\n"
        if self.path is None:
            sys.stdout.write(text)
        else:
            self.path.write_text(text, encoding="utf-8")

    def __str__(self) -> str:
        return STDOUT if self.path is None else str(self.path)


@dataclass(frozen=True)
class OutputDir:
    """An output folder named on the command line, created before the work starts."""

    path: Path
    """The folder."""

    def prepare(self) -> None:
        """Create the folder."""
        self.path.mkdir(parents=True, exist_ok=True)


def prepare_outputs(args: argparse.Namespace) -> None:
    """Create the folders of every output option in ``args``."""
    for value in vars(args).values():
        if isinstance(value, Output | OutputDir):
            value.prepare()


def _input_file(text: str) -> Path:
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: is a folder, expected a file")
    _readable(path, text)
    if path.stat().st_size == 0:
        raise argparse.ArgumentTypeError(f"{text}: the file is empty")
    return path


input_file = ArgType(_input_file, ("{missing}", "{dir}", "{empty}"), "file")
"""An argparse type: an existing, readable, non-empty regular file."""


def _input_dir(text: str) -> Path:
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: is a file, expected a folder")
    _readable(path, text)
    return path


input_dir = ArgType(_input_dir, ("{missing}", "{file}"), "folder")
"""An argparse type: an existing, readable folder."""


def _input_path(text: str) -> Path:
    return _input_dir(text) if Path(text).is_dir() else _input_file(text)


input_path = ArgType(_input_path, ("{missing}", "{empty}"), "path")
"""An argparse type: an existing folder, or a readable non-empty file."""


def _readable(path: Path, text: str) -> None:
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text}: no such file or folder")
    if not os.access(path, os.R_OK):
        raise argparse.ArgumentTypeError(f"{text}: not readable (permission denied)")


def _output_file(text: str) -> Output:
    if text == STDOUT:
        return Output(None)
    return Output(_writable(Path(text), text))


output_file = ArgType(_output_file, ("{dir}", "{file}/x.json"), "output file")
"""An argparse type: a file to write (``-`` for standard output)."""


def _file_output(text: str) -> Output:
    if text == STDOUT:
        raise argparse.ArgumentTypeError("expected a file path, not '-' (standard output)")
    return Output(_writable(Path(text), text))


file_output = ArgType(_file_output, ("-", "{dir}", "{file}/x.png"), "output file")
"""An argparse type: a file to write (a figure, a model), not standard output."""


def _output_dir(text: str) -> OutputDir:
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: is a file, expected a folder")
    if path.is_dir():
        if not os.access(path, os.W_OK):
            raise argparse.ArgumentTypeError(f"{text}: not writable (permission denied)")
        return OutputDir(path)
    _creatable(path, text)
    return OutputDir(path)


output_dir = ArgType(_output_dir, ("{file}", "{file}/sub"), "output folder")
"""An argparse type: a folder to write into (created if missing)."""


def _writable(path: Path, text: str) -> Path:
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: is a folder, expected a file path")
    if path.exists():
        if not os.access(path, os.W_OK):
            raise argparse.ArgumentTypeError(f"{text}: not writable (permission denied)")
        return path
    _creatable(path, text)
    return path


def _creatable(path: Path, text: str) -> None:
    """Check that the nearest existing folder above ``path`` is a writable folder."""
    parent = path.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: {parent} is a file, not a folder")
    if not os.access(parent, os.W_OK):
        raise argparse.ArgumentTypeError(f"{text}: cannot create it in {parent} (not writable)")


@contextmanager
def reading(what: str, path: Path | str) -> Iterator[None]:
    """Turn a failure to read or parse ``path`` into a one-line error naming ``what``."""
    try:
        yield
    except UnicodeDecodeError:
        raise CliError(f"{what} {path}: not a text file (cannot decode it as UTF-8)") from None
    except (ValueError, KeyError, OSError) as exc:
        raise CliError(f"{what}: {_reason(exc, path)}") from None


def _reason(exc: Exception, path: Path | str) -> str:
    """The error's text, naming ``path`` once."""
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        return f"{exc.filename}: {exc.strerror}"
    text = str(exc.args[0] if isinstance(exc, KeyError) and exc.args else exc)
    return text if str(path) in text else f"{path}: {text}"
