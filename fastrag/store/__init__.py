"""The store layer: Arrow chunk segments, snapshots, the manifest, documents, ingestion, sources."""

from .chunks import ChunkStore
from .ingest import BuildProgress
from .snapshots import SnapshotInfo

__all__ = ["BuildProgress", "ChunkStore", "SnapshotInfo"]
