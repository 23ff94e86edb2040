"""Where ingested documents come from: markdown/text files and folders, or JSONL ingest requests.

Chunk ids are `"{doc_id}#{n}:{blake3(text)[:16]}"`, so re-ingesting an unchanged file is a no-op while
an edited file adds its changed chunks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Iterable, Iterator, Sequence

import blake3

from ..errors import InvalidInput
from .chunking import chunk_markdown, chunk_plain_text
from .lane import MAX_CHUNKS, MAX_DOCUMENTS, ChunkInput, DocumentInput

MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdown", ".mkd"})
TEXT_SUFFIXES = frozenset({".txt", ".text"})


def chunk_document(doc_id: str, text: str, markdown: bool) -> DocumentInput:
    """Chunk a whole document the way Crux does and give each chunk a content-derived id."""
    pieces = chunk_markdown(text) if markdown else chunk_plain_text(text)
    return DocumentInput(doc_id, [
        ChunkInput(f"{doc_id}#{n}:{blake3.blake3(piece.encode('utf-8')).hexdigest()[:16]}", piece)
        for n, piece in enumerate(pieces)
    ])


def _is_markdown(name: str) -> bool:
    return Path(name).suffix.lower() in MARKDOWN_SUFFIXES


def _files(path: Path) -> Iterator[tuple[Path, str]]:
    """(file, doc_id) pairs: a file as given, or the markdown/text files under a folder (relative ids)."""
    if path.is_file():
        yield path, path.as_posix()
    elif path.is_dir():
        for file in sorted(p for p in path.rglob("*") if p.is_file()):
            relative = file.relative_to(path)
            if any(part.startswith(".") for part in relative.parts):
                continue
            if file.suffix.lower() in MARKDOWN_SUFFIXES | TEXT_SUFFIXES:
                yield file, relative.as_posix()
    else:
        raise InvalidInput(f"{path}: no such file or folder")


def list_files(paths: Sequence[Path]) -> list[tuple[Path, str]]:
    return [pair for path in paths for pair in _files(path)]


def read_file(path: Path, doc_id: str) -> DocumentInput:
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(f"{path}: not UTF-8 text") from None
    except OSError as exc:
        raise InvalidInput(f"{path}: {exc.strerror}") from None
    return chunk_document(doc_id, text, _is_markdown(path.name))


def read_jsonl(stream: IO[str], where: str = "stdin") -> Iterator[DocumentInput]:
    """Documents from JSON Lines `{doc_id, chunks: [{chunk_id, text}]}` or `{doc_id, text}` (chunked here)."""
    for line_no, line in enumerate(stream, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise InvalidInput(f"{where} line {line_no}: not JSON ({exc})") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("doc_id"), str):
            raise InvalidInput(f"{where} line {line_no}: expected an object with a string doc_id")
        doc_id = obj["doc_id"]
        if "chunks" in obj:
            chunks = obj["chunks"]
            if not isinstance(chunks, list) or not all(
                    isinstance(c, dict) and isinstance(c.get("chunk_id"), str) and isinstance(c.get("text"), str)
                    for c in chunks):
                raise InvalidInput(f"{where} line {line_no}: chunks must be a list of {{chunk_id, text}} strings")
            if not chunks:
                raise InvalidInput(f"{where} line {line_no}: document {doc_id!r} has no chunks")
            yield DocumentInput(doc_id, [ChunkInput(c["chunk_id"], c["text"]) for c in chunks])
        elif isinstance(obj.get("text"), str):
            yield chunk_document(doc_id, obj["text"], _is_markdown(doc_id))
        else:
            raise InvalidInput(f"{where} line {line_no}: needs either chunks or text")


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
