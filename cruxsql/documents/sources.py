"""Where ingested documents come from: markdown/text/JSON files and folders (walked like
`corecruxctl ingest`), or JSONL ingest requests.

Chunk ids are `"{doc_id}#{n}:{blake3(text)[:16]}"`, so re-ingesting an unchanged file is a no-op while
an edited file adds its changed chunks.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence, Union

import blake3

from ..errors import InvalidInput
from ..facts import json_input
from .chunking import chunk_markdown, chunk_plain_text, rust_trim
from .ingest import MAX_CHUNKS, MAX_DOCUMENTS, ChunkInput, DocumentInput

MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdown", ".mkd"})
TEXT_SUFFIXES = frozenset({".txt", ".text"})
JSON_SUFFIX = ".json"
# Directories `corecruxctl ingest` never walks into: hidden ones and build output.
SKIPPED_DIRECTORIES = frozenset({"node_modules", "target"})
BOM = "\ufeff"


@dataclass(frozen=True)
class SkippedFile:
    """A file the walk found but did not ingest, and why (shown to the operator as a warning)."""

    path: Path
    reason: str


def chunk_document(doc_id: str, text: str, markdown: bool) -> DocumentInput:
    """Chunk a whole document the way Crux does and give each chunk a content-derived id."""
    pieces = chunk_markdown(text) if markdown else chunk_plain_text(text)
    return DocumentInput(doc_id, [
        ChunkInput(f"{doc_id}#{n}:{blake3.blake3(piece.encode('utf-8')).hexdigest()[:16]}", piece)
        for n, piece in enumerate(pieces)
    ])


def _is_markdown(name: str) -> bool:
    return Path(name).suffix.lower() in MARKDOWN_SUFFIXES


def _supported(path: Path) -> bool:
    return path.suffix.lower() in MARKDOWN_SUFFIXES | TEXT_SUFFIXES | {JSON_SUFFIX}


def _skipped_directory(name: str) -> bool:
    """`skipped_directory_name`: hidden (`.git`, `.venv`, ...) or `node_modules` / `target`."""
    return name.startswith(".") or name in SKIPPED_DIRECTORIES


def _walk(directory: Path) -> Iterator[Path]:
    """`walk_directory`: entries by name, symlinks never followed, skipped directories not entered."""
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        if entry.is_symlink():
            continue
        if entry.is_dir():
            if not _skipped_directory(entry.name):
                yield from _walk(Path(entry.path))
        elif entry.is_file():
            yield Path(entry.path)


def _files(path: Path) -> Iterator[tuple[Path, str]]:
    """(file, doc_id) pairs: a file as given, or the supported files under a folder (relative ids)."""
    if path.is_file():
        yield path, path.as_posix()
    elif path.is_dir():
        for file in sorted(_walk(path)):
            if _supported(file):
                yield file, file.relative_to(path).as_posix()
    else:
        raise InvalidInput(f"{path}: no such file or folder")


def list_files(paths: Sequence[Path]) -> list[tuple[Path, str]]:
    return [pair for path in paths for pair in _files(path)]


def flatten_json_strings(text: str, where: str) -> str:
    """`flatten_json_strings`: every non-blank string value (trimmed), depth first in document order,
    joined by blank lines; keys, numbers, booleans and nulls are left out."""
    try:
        value = json_input.decode(text)
    except json_input.NotJson as exc:  # Crux's message (ingest.rs `document_from_file`)
        raise InvalidInput(f"invalid JSON in {where}: {exc}") from None
    strings: list[str] = []
    pending = [value]  # depth first without recursion: a value nested as deep as the decoder allows
    while pending:
        node = pending.pop()
        if isinstance(node, str):
            if rust_trim(node):
                strings.append(rust_trim(node))
        elif isinstance(node, (list, dict)):
            pending.extend(reversed(node if isinstance(node, list) else list(node.values())))
    return "\n\n".join(strings)


def read_file(path: Path, doc_id: str) -> Union[DocumentInput, SkippedFile]:
    """A file as `corecruxctl ingest` reads it: a file holding a NUL byte or bytes that are not UTF-8 is
    skipped (not an error), a leading U+FEFF is dropped, `.json` is flattened to its string values, and
    a file with no text left is skipped."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InvalidInput(f"{path}: {exc.strerror}") from None
    if b"\0" in data:
        return SkippedFile(path, "binary (holds a NUL byte)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return SkippedFile(path, f"not UTF-8 text (invalid byte at offset {exc.start})")
    text = text.removeprefix(BOM)
    if path.suffix.lower() == JSON_SUFFIX:
        text = flatten_json_strings(text, str(path))
    if not rust_trim(text):
        return SkippedFile(path, "no text")
    return chunk_document(doc_id, text, _is_markdown(path.name))


def read_jsonl(stream: Iterable[json_input.Text], where: str = "stdin") -> Iterator[DocumentInput]:
    """Documents from JSON Lines `{doc_id, chunks: [{chunk_id, text}]}` or `{doc_id, text}` (chunked here)."""
    for _, place, obj in json_input.read_lines(stream, where):
        if not isinstance(obj, dict) or not isinstance(obj.get("doc_id"), str):
            raise InvalidInput(f"{place}: expected an object with a string doc_id")
        doc_id = obj["doc_id"]
        if "chunks" in obj:
            chunks = obj["chunks"]
            if not isinstance(chunks, list) or not all(
                    isinstance(c, dict) and isinstance(c.get("chunk_id"), str) and isinstance(c.get("text"), str)
                    for c in chunks):
                raise InvalidInput(f"{place}: chunks must be a list of {{chunk_id, text}} strings")
            if not chunks:
                raise InvalidInput(f"{place}: document {doc_id!r} has no chunks")
            yield DocumentInput(doc_id, [ChunkInput(c["chunk_id"], c["text"]) for c in chunks])
        elif isinstance(obj.get("text"), str):
            yield chunk_document(doc_id, obj["text"], _is_markdown(doc_id))
        else:
            raise InvalidInput(f"{place}: needs either chunks or text")


def batches(documents: Iterable[DocumentInput]) -> Iterator[list[DocumentInput]]:
    """Group documents into ingest requests within Crux's limits (4096 documents, 65,536 chunks)."""
    batch: list[DocumentInput] = []
    chunks = 0
    for document in documents:
        if not document.chunks:
            continue
        if batch and (len(batch) == MAX_DOCUMENTS or chunks + len(document.chunks) > MAX_CHUNKS):
            yield batch
            batch, chunks = [], 0
        batch.append(document)
        chunks += len(document.chunks)
    if batch:
        yield batch
