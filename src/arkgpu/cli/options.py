"""The command line's one convention for options: checked types, inputs and outputs.

Every value a user types is checked while the arguments are parsed, before any work
starts; a bad one stops the command with one line that names the option and what it
accepts. Output paths are checked at parse time and their folders created before the
command runs (:func:`prepare_outputs`), so a long run never ends by failing to write.

This module imports only the standard library: ``arkgpu --help`` stays fast.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

T = TypeVar("T")

STDOUT = "-"
"""The output path that means standard output."""


class CliError(Exception):
    """A user error that the command line reports in one line, exit status 2."""


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


@dataclass(frozen=True)
class ArgType(Generic[T]):
    """An argparse type that knows values it refuses (the bad-input test feeds them).

    ``bad`` may hold placeholders the test fills with its files: ``{missing}`` (no such
    path), ``{dir}`` (a folder), ``{file}`` (a text file), ``{empty}`` (an empty file).
    """

    parse: Callable[[str], T]
    """Turns the text into the value; raises ``argparse.ArgumentTypeError``."""
    bad: tuple[str, ...]
    """Values ``parse`` refuses."""
    name: str = "value"
    """What argparse calls the type."""

    def __call__(self, text: str) -> T:
        return self.parse(text)


def prepare_outputs(args: argparse.Namespace) -> None:
    """Create the folders of every output option in ``args``."""
    for value in vars(args).values():
        if isinstance(value, Output | OutputDir):
            value.prepare()


def _fail(text: str, accepted: str, why: str = "") -> argparse.ArgumentTypeError:
    return argparse.ArgumentTypeError(f"expected {accepted}, got {text!r}{why}")


def _bounds_text(low: float | None, high: float | None, low_open: bool, kind: str) -> str:
    parts = []
    if low is not None:
        parts.append(f"{'>' if low_open else '>='} {low:g}")
    if high is not None:
        parts.append(f"<= {high:g}")
    return f"{kind} {' and '.join(parts)}".strip()


def integer(low: int | None = None, high: int | None = None) -> ArgType[int]:
    """An argparse type: an integer within ``[low, high]``."""
    accepted = _bounds_text(low, high, False, "an integer")

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise _fail(text, accepted) from None
        if (low is not None and value < low) or (high is not None and value > high):
            raise _fail(text, accepted)
        return value

    bad = ["abc", "1.5"]
    bad += [] if low is None else [str(low - 1)]
    bad += [] if high is None else [str(high + 1)]
    return ArgType(parse, tuple(bad), "integer")


def number(
    low: float | None = None, high: float | None = None, low_open: bool = False
) -> ArgType[float]:
    """An argparse type: a finite number above ``low`` (or at it unless ``low_open``)."""
    accepted = _bounds_text(low, high, low_open, "a number")

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise _fail(text, accepted) from None
        too_low = low is not None and (value <= low if low_open else value < low)
        if not math.isfinite(value) or too_low or (high is not None and value > high):
            raise _fail(text, accepted)
        return value

    bad = ["abc", "nan", "inf"]
    bad += [] if low is None else [f"{low:g}" if low_open else f"{low - 1:g}"]
    bad += [] if high is None else [f"{high * 2 + 1:g}"]
    return ArgType(parse, tuple(bad), "number")


def _seed_list(text: str) -> tuple[int, ...]:
    accepted = "seeds as N, N-M or N,M,... (integers >= 0)"
    seeds: list[int] = []
    for part in text.split(","):
        low, dash, high = part.strip().partition("-")
        try:
            first, last = int(low), int(high if dash else low)
        except ValueError:
            raise _fail(text, accepted) from None
        if first < 0:
            raise _fail(text, accepted, ": a seed is negative")
        if last < first:
            raise _fail(text, accepted, f": end before start in {part.strip()}")
        if last - first > 100_000:
            raise _fail(text, accepted, ": more than 100,000 seeds")
        seeds.extend(range(first, last + 1))
    return tuple(seeds)


seed_list = ArgType(_seed_list, ("5-1", "-5", "abc", "", "1,,2", "0-999999"), "seeds")
"""An argparse type: seeds as ``N``, ``N-M`` or ``N,M,...`` (each >= 0, ranges ascending)."""


def name_list(
    known: Callable[[], Sequence[str]], all_word: str | None = None, empty: bool = False
) -> ArgType[tuple[str, ...]]:
    """An argparse type: a comma list of names from ``known()`` (``all_word``: all of them;
    ``empty``: an empty text means none)."""

    def parse(text: str) -> tuple[str, ...]:
        names = known()
        if all_word is not None and text.strip() == all_word:
            return tuple(names)
        chosen = tuple(n.strip() for n in text.split(",") if n.strip())
        if empty and not text.strip():
            return ()
        unknown = [n for n in chosen if n not in names]
        if unknown or not chosen:
            extra = f", or {all_word!r}" if all_word else ""
            raise _fail(text, f"a comma list of {', '.join(names)}{extra}")
        return chosen

    return ArgType(parse, ("nosuch",) if empty else ("nosuch", ""), "names")


def number_list(low: float, high: float) -> ArgType[tuple[float, ...]]:
    """An argparse type: a comma list of numbers strictly between ``low`` and ``high``."""
    accepted = f"a comma list of numbers > {low:g} and < {high:g}"

    def parse(text: str) -> tuple[float, ...]:
        try:
            values = tuple(float(v) for v in text.split(","))
        except ValueError:
            raise _fail(text, accepted) from None
        if not all(low < v < high for v in values):
            raise _fail(text, accepted)
        return values

    return ArgType(parse, ("abc", f"{low:g}", f"{high:g}", "nan", ""), "numbers")


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


def _escaped(text: str) -> str:
    """``text`` safe in argparse help, which %-formats it."""
    return text.replace("%", "%%")


def json_option(parser: argparse.ArgumentParser, what: str, required: bool = False) -> None:
    """Add ``--json [PATH]``: write ``what`` as JSON to PATH (bare or ``-``: standard output)."""
    what = _escaped(what)
    parser.add_argument(
        "--json",
        dest="json_out",
        metavar="PATH",
        type=output_file,
        nargs=None if required else "?",
        const=None if required else Output(None),
        required=required,
        help=f"write {what} as JSON to PATH ('-' or no PATH: standard output, instead of "
        "the table); default: no JSON",
    )


def plot_option(parser: argparse.ArgumentParser, what: str) -> None:
    """Add ``--plot PATH``: draw ``what`` as a PNG at PATH (folders created)."""
    what = _escaped(what)
    parser.add_argument(
        "--plot",
        metavar="PATH",
        type=file_output,
        help=f"draw {what} as a PNG file at PATH (its folder is created); default: no figure",
    )


def jobs_option(parser: argparse.ArgumentParser, default: int | None) -> None:
    """Add ``--jobs N``: worker processes."""
    shown = "one per CPU" if default is None else str(default)
    parser.add_argument(
        "--jobs",
        metavar="N",
        type=integer(1, 256),
        default=default,
        help=f"worker processes, 1 to 256 (default: {shown})",
    )


def seeds_option(parser: argparse.ArgumentParser, default: str, flag: str = "--seeds") -> None:
    """Add a seed list option (N, N-M or N,M,...)."""
    parser.add_argument(
        flag,
        metavar="SEEDS",
        type=seed_list,
        default=seed_list(default),
        help=f"random seeds: N, N-M or N,M,... (integers >= 0; default: {default})",
    )


def seed_option(parser: argparse.ArgumentParser, default: int, what: str = "random seed") -> None:
    """Add ``--seed N`` (an integer >= 0)."""
    parser.add_argument(
        "--seed",
        metavar="N",
        type=integer(0),
        default=default,
        help=f"{what}, an integer >= 0 (default: {default})",
    )
