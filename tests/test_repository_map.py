"""The repository stays as docs/ARCHITECTURE.md says: every path the map names exists and every package folder is
on it; OptimEP's C++ has no include loops between its files; each graph rewrite's report name is its file's name;
each kernel lives in the file its name or its kernel_list.inc section names."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAP = ROOT / "docs" / "ARCHITECTURE.md"
PATH_LIKE = re.compile(r"`([^`\s]+)`")
EXTENSIONS = (".py", ".cc", ".h", ".inc", ".md", ".toml", ".txt")
# The folders whose code is installed (pyproject.toml) or built (CMake), and where tests and benchmarks live.
PACKAGE_FOLDERS = ("common/", "exporter/", "optimizer/", "optimizer/passes/", "optimizer/quantization/", "ep_plugin/",
                   "ep_plugin/src/", "ep_plugin/src/ops/", "ep_plugin/src/rewrites/", "ep_plugin/kernels/",
                   "ep_plugin/tools/", "llm/", "pruning/", "serve/", "torch_backend/", "models/", "tests/", "benchmarks/", "examples/")
# Rewrites that share a file with another (both halves of the QDQ binary ops).
SHARED_FILES = {"qdq_adds": "qdq_binary", "qdq_muls": "qdq_binary"}


def _named_paths(text: str) -> list[str]:
    tokens = (t.rstrip(".,;:") for t in PATH_LIKE.findall(text))
    return [t for t in tokens if ("/" in t or t.endswith(EXTENSIONS)) and "://" not in t and not t.startswith("-")]


def test_every_path_the_map_names_exists():
    named = _named_paths(MAP.read_text())
    assert len(named) > 40, "the map names too few paths: write them repo-relative in backticks"
    missing = [p for p in named if not any((ROOT / candidate).exists() for candidate in _expansions(p))]
    assert not missing, f"docs/ARCHITECTURE.md names paths that do not exist: {missing}"


def _expansions(path: str) -> list[str]:
    """`ep_plugin/src/ops/conv_dw_pw.{h,cc}` names two files; a glob-free path names itself."""
    braces = re.fullmatch(r"(.*)\{([^}]*)\}(.*)", path)
    if braces is None:
        return [path.rstrip("/") or path]
    head, options, tail = braces.groups()
    return [head + option + tail for option in options.split(",")]


def test_every_package_folder_is_on_the_map():
    named = set(_named_paths(MAP.read_text()))
    absent = [f for f in PACKAGE_FOLDERS if f not in named and f.rstrip("/") not in named]
    assert not absent, f"docs/ARCHITECTURE.md does not name {absent}"
    assert all((ROOT / f).is_dir() for f in PACKAGE_FOLDERS)


def _includes(path: Path) -> list[Path]:
    found = re.findall(r'^\s*#include "([^"]+)"', path.read_text(errors="replace"), flags=re.M)
    return [(path.parent / f).resolve() for f in found]


def test_no_include_loops_between_files_of_the_ep():
    """A file and its header are one module (foo.h + foo.cc); no module reaches itself through its includes."""
    files = [p for p in (ROOT / "ep_plugin").rglob("*") if p.suffix in (".h", ".cc", ".inc")]
    module = lambda p: p.resolve().with_suffix("")  # noqa: E731
    edges: dict[Path, set[Path]] = {}
    for f in files:
        edges.setdefault(module(f), set()).update(module(t) for t in _includes(f) if t.exists() and module(t) != module(f))
    loops = []
    for start in edges:
        seen, stack = set(), [(start, [start])]
        while stack:
            node, trail = stack.pop()
            for nxt in edges.get(node, ()):
                if nxt == start:
                    loops.append(" -> ".join(str(p.relative_to(ROOT)) for p in [*trail, start]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*trail, nxt]))
    assert not loops, "include loops:\n" + "\n".join(sorted(set(loops))[:10])


def test_each_rewrite_lives_in_the_file_of_its_name():
    listed = re.findall(r'^\s*\{"([a-z_0-9]+)", ([a-z_0-9]+)', (ROOT / "ep_plugin/src/rewrites/rewrite_list.cc").read_text(),
                        flags=re.M)
    assert len(listed) > 20
    for name, function in listed:
        source = ROOT / "ep_plugin/src/rewrites" / f"{SHARED_FILES.get(name, name)}.cc"
        assert source.exists(), f"rewrite {name!r} has no file {source.relative_to(ROOT)}"
        assert re.search(rf"\b{function}\(Graph& g, RewriteContext& ctx\) \{{", source.read_text()), \
            f"{function} (rewrite {name!r}) is not defined in {source.relative_to(ROOT)}"


ISA_SUFFIXES = ("scalar", "avx2", "avxvnni", "avx512", "avx512vnni", "avx512bf16", "avx512vbmi", "amx")


def _kernel_rows() -> list[tuple[str, list[str]]]:
    """(symbol, the file stems its section names with `in stem_*.cc`) for every row of kernels/kernel_list.inc."""
    rows, section = [], []
    comment = ""
    for line in (ROOT / "ep_plugin/kernels/kernel_list.inc").read_text().splitlines():
        if line.startswith("//"):
            comment = comment + " " + line[2:] if section is None else line[2:]
            section = None
            continue
        if section is None:  # the comment block above these rows ended
            section = re.findall(r"(\w+)_\*\.cc", comment)
            comment = ""
        if line.startswith("OPTIM_KERNEL"):
            args = [a.strip() for a in line[line.index("(") + 1 : line.rindex(")")].split(",")]
            rows.append((args[3] if line.startswith("OPTIM_KERNEL_IF") else args[2], section))
    return rows


def test_each_kernel_lives_where_the_kernel_list_says():
    kernels = ROOT / "ep_plugin" / "kernels"
    sources = {p.stem: p.read_text() for p in kernels.glob("*.cc")}
    stem_of = lambda name: re.sub(r"_(%s)$" % "|".join(ISA_SUFFIXES), "", name)  # noqa: E731
    rows = _kernel_rows()
    assert len(rows) > 80
    lost = []
    for symbol, section_stems in rows:
        defined_in = [name for name, text in sources.items() if re.search(r"\b%s\(" % symbol, text) and name != "kernel_table"]
        named = [n for n in defined_in if (symbol + "_").startswith(stem_of(n)) or stem_of(n) in section_stems]
        if not named:
            lost.append(f"{symbol} (found in {defined_in})")
    assert not lost, f"kernels not in the file their name or their kernel_list.inc section names: {lost}"
