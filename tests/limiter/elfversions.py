"""ELF version needs of a built file, read with pyelftools (a well-kept ELF
reader: the alternative, parsing .gnu.version_r by hand, is more code to trust)."""

from __future__ import annotations

import re
from pathlib import Path

from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection
from elftools.elf.relocation import RelocationSection
from elftools.elf.sections import SymbolTableSection

#: The newest glibc symbol version a library may need (CentOS 7's glibc).
BASELINE = (2, 17)


def version_needs(path: Path) -> dict[str, set[str]]:
    """Each needed file's version names, from the library's .gnu.version_r."""
    needs: dict[str, set[str]] = {}
    with path.open("rb") as f:
        for section in ELFFile(f).iter_sections():
            if isinstance(section, GNUVerNeedSection):
                for verneed, auxes in section.iter_versions():
                    assert verneed.name is not None  # a version need always names its file
                    needs.setdefault(verneed.name, set()).update(a.name for a in auxes)
    return needs


def glibc_version(name: str) -> tuple[int, ...] | None:
    """(2, 34) for GLIBC_2.34; None for other names (GLIBC_PRIVATE, GCC_3.0)."""
    m = re.fullmatch(r"GLIBC_(\d+(?:\.\d+)*)", name)
    return tuple(int(x) for x in m.group(1).split(".")) if m else None


def too_new(path: Path, baseline: tuple[int, ...]) -> list[str]:
    """The file's glibc version needs past ``baseline``, as ``file: GLIBC_x.y``."""
    return sorted(
        f"{file}: {name}"
        for file, names in version_needs(path).items()
        for name in names
        if (v := glibc_version(name)) is not None and v > baseline
    )


def dynamic_entries(path: Path) -> tuple[list[str], set[str]]:
    """The library's DT_NEEDED names and the names of its undefined dynamic symbols."""
    with path.open("rb") as f:
        elf = ELFFile(f)
        needed: list[str] = []
        for section in elf.iter_sections():
            if isinstance(section, DynamicSection):
                # pyelftools sets a DT_NEEDED tag's `needed` with setattr: not in its types.
                tags = section.iter_tags()
                needed += [t.needed for t in tags if t.entry.d_tag == "DT_NEEDED"]  # type: ignore[attr-defined]
        dynsym = elf.get_section_by_name(".dynsym")
        assert isinstance(dynsym, SymbolTableSection)
        undefined = {s.name for s in dynsym.iter_symbols() if s["st_shndx"] == "SHN_UNDEF"}
    return needed, undefined


def null_plt_relocations(path: Path) -> int:
    """Entries of type R_X86_64_NONE (0) in .rela.plt: ld.so refuses to load such a
    file ("unexpected PLT reloc type 0x00")."""
    with path.open("rb") as f:
        section = ELFFile(f).get_section_by_name(".rela.plt")
        if not isinstance(section, RelocationSection):
            return 0
        return sum(1 for r in section.iter_relocations() if r["r_info_type"] == 0)
