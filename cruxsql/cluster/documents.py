"""Documents across the fleet: every node's sealed segments (and vector sidecars) in the JetStream object
store `CRUXSQL_<group>_DOCS`, and the fleet's manifest in the key-value bucket `CRUXSQL_<group>_SEGMENTS`
(key `manifest`, the same bytes as a node's `MANIFEST.json`, with the BLAKE3 of every file).

A node seals a segment locally, uploads its files, then replaces the fleet's manifest only if it is
still the revision the node pulled (so two nodes never hand out one segment number); the loser pulls
the winner's segment and seals again. Every node pulls before it reads or writes documents: it fetches
the files it lacks, checks each against the manifest's BLAKE3 and refuses (never indexes) one that does
not match. Erasure pushes a manifest without the erased segments, then deletes their objects with every
chunk message securely deleted (bytes overwritten on every replica's store), and gets every replica's
Raft log of the object store's stream past them (raftlog.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, cast

import blake3
import nats.js.errors
from nats.js import api

from ..documents.replica import ReplicaMoved
from ..documents.segments import (
    Manifest,
    SegmentError,
    SegmentInfo,
    encode_manifest,
    load_manifest,
    parse_manifest,
    save_manifest,
    segment_files,
    write_sidecar,
)
from .link import ClusterLink
from .raftlog import note, scrub_raft_logs

MANIFEST_KEY = "manifest"
SCRUB_OBJECT = "raft-scrub"
"""The chunk subject `$O.<bucket>.C.raft-scrub` carries the Raft log scrub's filler: no object's chunks
(an object's chunk subject ends with its NUID)."""


def objects_bucket(group: str) -> str:
    return f"CRUXSQL_{group}_DOCS"


def manifest_bucket(group: str) -> str:
    return f"CRUXSQL_{group}_SEGMENTS"


class FleetSegments:
    """A node's SegmentReplica (see `cruxsql.documents.replica`)."""

    def __init__(self, link: ClusterLink, group: str, replicas: int, store_dirs: Optional[list[Path]] = None) -> None:
        self.link, self.group, self.replicas, self.store_dirs = link, group, replicas, store_dirs or []
        self._revision = 0      # of the fleet's manifest at this node's last pull (0: none yet)

    # --- buckets ---------------------------------------------------------------------------------

    async def _objects(self) -> Any:
        js = self.link._js
        try:
            return await js.object_store(objects_bucket(self.group))
        except nats.js.errors.BucketNotFoundError:
            return await js.create_object_store(objects_bucket(self.group), api.ObjectStoreConfig(
                storage=api.StorageType.FILE, replicas=self.replicas))

    async def _manifests(self) -> Any:
        js = self.link._js
        try:
            return await js.key_value(manifest_bucket(self.group))
        except nats.js.errors.BucketNotFoundError:
            return await js.create_key_value(bucket=manifest_bucket(self.group), history=1,
                                             replicas=self.replicas, storage=api.StorageType.FILE)

    def _fleet_manifest(self) -> tuple[Optional[bytes], int]:
        async def read() -> tuple[Optional[bytes], int]:
            kv = await self._manifests()
            try:
                entry = await kv.get(MANIFEST_KEY)
            except nats.js.errors.KeyNotFoundError:
                return None, 0
            return entry.value or b"", entry.revision or 0
        return self.link._retry(read)

    def fetch(self, name: str) -> bytes:
        async def get() -> bytes:
            return (await (await self._objects()).get(name)).data or b""
        try:
            return self.link._retry(get)
        except nats.js.errors.NotFoundError:
            raise SegmentError(f"segment file {name} is not in the object store {objects_bucket(self.group)}") from None

    def object_names(self) -> list[str]:
        """The files the fleet's object store holds (deleted objects left out), sorted."""
        async def names() -> list[str]:
            try:
                return sorted(info.name for info in await (await self._objects()).list(ignore_deletes=True))
            except nats.js.errors.NotFoundError:
                return []
        return self.link._retry(names)

    def upload(self, name: str, data: bytes) -> None:
        async def put() -> None:
            await (await self._objects()).put(name, data)
        self.link._retry(put)

    def erase(self, name: str) -> None:
        """Delete an object: each chunk message securely deleted first, then the object's entry."""
        async def erase() -> None:
            store = await self._objects()
            try:
                info = await store.get_info(name)
            except nats.js.errors.NotFoundError:
                return
            chunks = f"$O.{objects_bucket(self.group)}.C.{info.nuid}"
            while True:
                try:
                    msg = await self.link._js.get_last_msg(store._stream, chunks)
                except nats.js.errors.NotFoundError:
                    break
                # nats-py types every reply field optional; a stored message always has its sequence
                await self.link._js.delete_msg(store._stream, cast(int, msg.seq))
            await store.delete(name)
        self.link._retry(erase)

    # --- the SegmentReplica protocol -------------------------------------------------------------

    def pull(self, directory: Path) -> int:
        data, revision = self._fleet_manifest()
        self._revision = revision
        if data is None:
            return 0
        fleet = parse_manifest(data, f"the fleet's manifest ({manifest_bucket(self.group)})")
        local = load_manifest(directory)
        have = {info.segment_id: info for info in local.segments}
        kept, refused = [], []
        for info in fleet.segments:
            if have.get(info.segment_id) == info and all((directory / n).exists() for n in segment_files(info)):
                kept.append(info)
                continue
            problem = self._fetch_verified(directory, info)
            if problem:
                refused.append(problem)
            else:
                kept.append(info)
        dropped = len({i.segment_id for i in local.segments} - {i.segment_id for i in fleet.segments})
        pulled = Manifest(fleet.next_seq, kept)
        if pulled != local:
            save_manifest(directory, pulled)
        if refused:
            raise SegmentError("; ".join(refused))
        return dropped

    def _fetch_verified(self, directory: Path, info: SegmentInfo) -> Optional[str]:
        """Fetch one segment's files into `directory` if each matches its BLAKE3; else the refusal."""
        fetched = {}
        for name, expected in segment_files(info).items():
            data = self.fetch(name)
            digest = blake3.blake3(data).hexdigest()
            if digest != expected:
                return (f"segment file {name} from the object store has BLAKE3 {digest}, not the manifest's "
                        f"{expected}: refused, not indexed")
            fetched[name] = data
        directory.mkdir(parents=True, exist_ok=True)
        for name, data in fetched.items():
            write_sidecar(directory, name, data)
        return None

    def push(self, directory: Path, manifest: Manifest, added: list[SegmentInfo],
             removed: list[SegmentInfo]) -> None:
        for info in added:
            for name in segment_files(info):
                self.upload(name, (directory / name).read_bytes())
        body = encode_manifest(manifest)

        async def replace() -> int:
            """The new revision, or 0 when the manifest is no longer the revision pulled."""
            kv = await self._manifests()
            try:
                if self._revision == 0:
                    return await kv.create(MANIFEST_KEY, body)
                return await kv.update(MANIFEST_KEY, body, last=self._revision)
            except nats.js.errors.KeyWrongLastSequenceError:
                return 0
        revision = self.link._run(replace())
        if revision == 0:
            for info in added:  # named by no manifest (a fresh segment id): leave no orphan behind
                for name in segment_files(info):
                    self.erase(name)
            raise ReplicaMoved(f"another node changed the fleet's manifest ({manifest_bucket(self.group)})")
        self._revision = revision
        for info in removed:
            for name in segment_files(info):
                self.erase(name)
        if removed:  # their chunks' bytes out of every replica's Raft log too
            bucket = objects_bucket(self.group)
            note(scrub_raft_logs(self.link, f"OBJ_{bucket}", f"$O.{bucket}.C.{SCRUB_OBJECT}", self.store_dirs))
