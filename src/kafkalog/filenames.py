"""Kafka's file names: ``<20-digit base offset>.log|.index|.timeindex|.txnindex``, producer
snapshots ``<offset>.snapshot``, and the transient suffixes ``.cleaned``, ``.swap`` and
``.deleted`` appended to a full name."""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = [
    "LOG_SUFFIX",
    "INDEX_SUFFIX",
    "TIME_INDEX_SUFFIX",
    "TXN_INDEX_SUFFIX",
    "SNAPSHOT_SUFFIX",
    "DELETED_SUFFIX",
    "CLEANED_SUFFIX",
    "SWAP_SUFFIX",
    "filename_prefix",
    "log_file",
    "offset_index_file",
    "time_index_file",
    "txn_index_file",
    "snapshot_file",
    "offset_from_file",
    "MAX_TOPIC_NAME_LENGTH",
    "validate_topic_name",
]

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"


def filename_prefix(offset: int) -> str:
    """The 20-digit zero-padded decimal offset Kafka names files with."""
    if offset < 0:
        raise ValueError(f"file names carry non-negative offsets, not {offset}")
    return f"{offset:020d}"


def _file(directory: str | os.PathLike, offset: int, suffix: str, extra: str) -> Path:
    return Path(directory) / f"{filename_prefix(offset)}{suffix}{extra}"


def log_file(directory: str | os.PathLike, offset: int, suffix: str = "") -> Path:
    return _file(directory, offset, LOG_SUFFIX, suffix)


def offset_index_file(directory: str | os.PathLike, offset: int, suffix: str = "") -> Path:
    return _file(directory, offset, INDEX_SUFFIX, suffix)


def time_index_file(directory: str | os.PathLike, offset: int, suffix: str = "") -> Path:
    return _file(directory, offset, TIME_INDEX_SUFFIX, suffix)


def txn_index_file(directory: str | os.PathLike, offset: int, suffix: str = "") -> Path:
    return _file(directory, offset, TXN_INDEX_SUFFIX, suffix)


def snapshot_file(directory: str | os.PathLike, offset: int) -> Path:
    return _file(directory, offset, SNAPSHOT_SUFFIX, "")


def offset_from_file(path: str | os.PathLike) -> int:
    """The offset a Kafka file name starts with (``00000000000000000042.log.swap`` -> 42).

    Raises:
        ValueError: the name does not start with an offset.
    """
    name = Path(path).name
    prefix = name.split(".", 1)[0]
    if not prefix.isdigit():
        raise ValueError(f"{name!r} is not named after an offset")
    return int(prefix)


#: Topic.MAX_NAME_LENGTH: 249, so that "-<partition>" still fits a 255-byte file name.
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+", re.ASCII)  # Kafka's Topic.LEGAL_CHARS


def validate_topic_name(name: str | None) -> str | None:
    """Kafka's ``Topic.validate``: None when ``name`` is a legal topic name, else why not (in
    Kafka's words).

    Legal names are 1 to 249 characters of ``[a-zA-Z0-9._-]`` other than ``.`` and ``..``, so
    no topic name can leave the log directory.
    """
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters, topic name: {name}"
    if not _LEGAL_TOPIC.fullmatch(name):
        return (
            f'Topic name "{name}" is illegal, it contains a character other than ASCII alphanumerics, '
            "'.', '_' and '-'"
        )
    return None
