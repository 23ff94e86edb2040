"""Build and refresh `workspace.db` from a folder: files, symbols, imports, markdown sections, postings.

Incremental: a file whose (mtime, size) is unchanged is not read; a changed mtime rehashes
it; an equal hash reindexes nothing. BM25 postings come from the document lane's `index_segment`
(each file is a one-document segment), so the workspace has no second BM25.
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Callable, Optional

import apsw

from ..documents.postings import index_segment, postings_rows
from . import cochange, markdown
from .budget import estimate_tokens
from .outline import Import, outline
from .paths import Walker, language_of, path_class, read_text
from .ranking import identifier_parts
from .schema import meta, set_meta

Progress = Optional[Callable[[int, int], None]]
# Words with a lower→upper transition (parseHeader, HTTPClient is not one; ConvergenceGovernor is).
_CAMEL_WORDS = re.compile(r"\b[A-Za-z][A-Za-z0-9]*?[a-z0-9][A-Z][A-Za-z0-9]*\b")


@dataclass
class IndexReport:
    root: str
    files: int = 0
    added: int = 0
    changed: int = 0
    rehashed_unchanged: int = 0
    unchanged: int = 0
    removed: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0


def content_sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def bm25_text(rel: str, text: str) -> str:
    """What BM25 indexes for a file: its path words, its text, and the parts of camelCase identifiers."""
    camel = set(_CAMEL_WORDS.findall(text))
    extra = " ".join(" ".join(identifier_parts(word)) for word in sorted(camel))
    return f"{rel.replace('/', ' ').replace('.', ' ')}\n{text}\n{extra}"



class Indexer:
    def __init__(self, db: apsw.Connection, root: Path) -> None:
        self.db = db
        self.root = root.resolve()
        self._read_skips: list[tuple[str, str]] = []

    # ---- whole-folder pass --------------------------------------------------------------------

    def index(self, progress: Progress = None) -> IndexReport:
        started = time.perf_counter()
        report = IndexReport(str(self.root))
        walker = Walker(self.root)
        paths = list(walker.files())
        known = {path: (fid, mtime, size) for fid, path, mtime, size in
                 self.db.execute("SELECT file_id, path, mtime_ns, bytes FROM files")}
        with self.db:
            if meta(self.db, "root") != str(self.root):
                self.db.execute("DELETE FROM files")
                self.db.execute("DELETE FROM handles")
                self.db.execute("DELETE FROM cochange")
                set_meta(self.db, "cochange_head", "")
                known = {}
            set_meta(self.db, "root", str(self.root))
            self.db.execute("DELETE FROM skipped")
            for number, rel in enumerate(paths, start=1):
                outcome = self._index_file(rel, known.get(rel))
                if outcome == "skipped":
                    pass
                else:
                    setattr(report, outcome, getattr(report, outcome) + 1)
                if progress and (number % 50 == 0 or number == len(paths)):
                    progress(number, len(paths))
            present = set(paths)
            for rel, (fid, _, _) in known.items():
                if rel not in present:
                    self.db.execute("DELETE FROM files WHERE file_id=?", (fid,))
                    report.removed += 1
            for rel, reason in [(s.path, s.reason) for s in walker.skipped] + self._read_skips:
                self.db.execute("INSERT OR REPLACE INTO skipped(path, reason) VALUES (?, ?)", (rel, reason))
            self._read_skips.clear()
            self.resolve_imports()
            cochange.refresh(self.db, self.root)
            self._update_corpus()
        report.files = self.db.execute("SELECT count(*) FROM files").get
        for (reason,) in self.db.execute("SELECT reason FROM skipped"):
            key = reason.split(" (")[0]
            report.skipped[key] = report.skipped.get(key, 0) + 1
        report.seconds = time.perf_counter() - started
        return report

    def _index_file(self, rel: str, known: Optional[tuple[int, int, int]]) -> str:
        path = self.root / rel
        stat = path.stat()
        if known and known[1] == stat.st_mtime_ns and known[2] == stat.st_size:
            return "unchanged"
        data = path.read_bytes()
        sha = content_sha(data)
        if known:
            row = self.db.execute("SELECT sha FROM files WHERE file_id=?", (known[0],)).fetchone()
            if row and row[0] == sha:
                self.db.execute("UPDATE files SET mtime_ns=? WHERE file_id=?", (stat.st_mtime_ns, known[0]))
                return "rehashed_unchanged"
        text, reason = read_text(path)
        if text is None:
            if known:
                self.db.execute("DELETE FROM files WHERE file_id=?", (known[0],))
            self._read_skips.append((rel, reason or "unreadable"))
            return "skipped"
        self.store_file(rel, text, sha, stat.st_mtime_ns, len(data), known[0] if known else None)
        return "changed" if known else "added"

    def store_file(self, rel: str, text: str, sha: str, mtime_ns: int, size: int,
                   file_id: Optional[int] = None) -> int:
        """(Re)write every row of one file. Call inside a transaction."""
        lang = language_of(rel)
        cls = path_class(rel, "\n".join(text.splitlines()[:5]))
        structure = outline(text, lang)
        segment = index_segment([bm25_text(rel, text)], [""])
        if file_id is not None:
            self.db.execute("DELETE FROM files WHERE file_id=?", (file_id,))
        self.db.execute(
            "INSERT INTO files(file_id, path, lang, path_class, bytes, lines, sha, mtime_ns, tokens, length, approx) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (file_id, rel, lang, cls, size, len(text.splitlines()), sha, mtime_ns, estimate_tokens(text),
             int(segment.doc_lengths[0]), structure.approx))
        fid = file_id if file_id is not None else self.db.last_insert_rowid()
        approx = 1 if structure.approx else 0
        self.db.executemany(
            "INSERT INTO symbols VALUES (?,?,?,?,?,?,?,?,?,?)",
            [(fid, s.name, s.qualname, s.kind, s.start, s.end, s.signature, s.depth, s.doc, approx)
             for s in structure.symbols])
        self.db.executemany("INSERT INTO imports(file_id, module, line, resolved) VALUES (?,?,?,NULL)",
                            [(fid, _import_label(i), i.line) for i in structure.imports])
        if lang == "markdown":
            lines = text.splitlines()
            self.db.executemany(
                "INSERT INTO md_sections VALUES (?,?,?,?,?,?,?)",
                [(fid, s.level, s.title, s.slug, s.start, s.end,
                  estimate_tokens("\n".join(lines[s.start - 1:s.end]))) for s in markdown.sections(text)])
        self.db.executemany("INSERT INTO postings VALUES (?,?,?,?,?)",
                            [(term, fid, count, ids, tfs) for term, _, count, ids, tfs in postings_rows(fid, segment)])
        return fid

    # ---- imports ------------------------------------------------------------------------------

    def resolve_imports(self) -> None:
        """Resolve every import row against the current file set (Python modules, relative JS/C paths)."""
        files = {path: lang for path, lang in self.db.execute("SELECT path, lang FROM files")}
        modules = python_modules([p for p, lang in files.items() if lang == "python"])
        names = {target: name for name, target in sorted(modules.items(), reverse=True)}
        rows = list(self.db.execute(
            "SELECT imports.rowid, files.path, files.lang, module FROM imports JOIN files USING(file_id)"))
        for rowid, path, lang, label in rows:
            target = resolve_import(path, lang, label, modules, names, files)
            self.db.execute("UPDATE imports SET resolved=? WHERE rowid=?", (target, rowid))

    def _update_corpus(self) -> None:
        digest = hashlib.sha256()
        for path, sha in self.db.execute("SELECT path, sha FROM files ORDER BY path"):
            digest.update(f"{path}\0{sha}\n".encode())
        set_meta(self.db, "corpus", digest.hexdigest()[:16])

    # ---- freshness for verbs ------------------------------------------------------------------

    def refresh(self) -> int:
        """Re-read indexed files whose (mtime, size) changed since indexing; drop deleted ones.

        Verbs call this first so a file edited after `workspace index` is never served stale.
        Returns how many files were reindexed or removed.
        """
        touched = 0
        rows = list(self.db.execute("SELECT file_id, path, mtime_ns, bytes FROM files"))
        with self.db:
            for fid, rel, mtime, size in rows:
                path = self.root / rel
                try:
                    stat = path.stat()
                except FileNotFoundError:
                    self.db.execute("DELETE FROM files WHERE file_id=?", (fid,))
                    touched += 1
                    continue
                if stat.st_mtime_ns != mtime or stat.st_size != size:
                    if self._index_file(rel, (fid, mtime, size)) in {"changed", "skipped"}:
                        touched += 1
            if touched:
                self.resolve_imports()
                self._update_corpus()
        return touched


def _import_label(item: Import) -> str:
    """How an import is stored: Python `from . import x` as `.:x`, `from .a import b` as `.a:b`."""
    module = "." * item.level + item.module
    return module + (":" + ",".join(item.names) if item.names else "")


def python_modules(paths: list[str]) -> dict[str, str]:
    """Dotted module name → path; a package's name is relative to its first ancestor without __init__.py."""
    present = set(paths)
    modules: dict[str, str] = {}
    for path in sorted(paths):
        parts = list(PurePosixPath(path).with_suffix("").parts)
        package_parts: list[str] = []
        directory = PurePosixPath(path).parent
        while str(directory) not in {".", ""} and f"{directory.as_posix()}/__init__.py" in present:
            package_parts.insert(0, directory.name)
            directory = directory.parent
        name = parts[-1]
        dotted = ".".join(package_parts + ([] if name == "__init__" else [name]))
        if dotted:
            modules.setdefault(dotted, path)
    return modules


def resolve_import(path: str, lang: str, label: str, modules: dict[str, str], names: dict[str, str],
                   files: dict[str, str]) -> Optional[str]:
    """The workspace file an import names, or None (stdlib, third party, or not resolvable statically)."""
    if lang == "python":
        module, _, imported = label.partition(":")
        level = len(module) - len(module.lstrip("."))
        module = module.lstrip(".")
        if level:
            own = names.get(path)
            if own is None:
                return None
            package = own.split(".") if path.endswith("__init__.py") else own.split(".")[:-1]
            package = package[:len(package) - (level - 1)] if level > 1 else package
            module = ".".join(package + ([module] if module else []))
        for name in imported.split(",") if imported else []:
            if f"{module}.{name}" in modules:
                return modules[f"{module}.{name}"]
        return modules.get(module)
    if lang in {"javascript", "typescript"} and label.startswith("."):
        base = PurePosixPath(path).parent / label
        for candidate in (str(base), *(f"{base}{ext}" for ext in (".js", ".ts", ".tsx", ".jsx", ".mjs")),
                          f"{base}/index.js", f"{base}/index.ts"):
            normal = _normalise(candidate)
            if normal in files:
                return normal
        return None
    if lang in {"c", "cpp"}:
        for candidate in (str(PurePosixPath(path).parent / label), label):
            normal = _normalise(candidate)
            if normal in files:
                return normal
    return None


def _normalise(path: str) -> str:
    parts: list[str] = []
    for part in PurePosixPath(path).parts:
        if part == "..":
            if parts:
                parts.pop()
        elif part != ".":
            parts.append(part)
    return "/".join(parts)
