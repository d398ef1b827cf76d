"""The read-only commands (``dump``, ``verify``, ``stat``) on a remote path (``s3://...``,
``gs://...``; any filesystem fsspec knows, credentials from its usual configuration).

These commands read every byte of the files they check (CRCs, index entries against the log,
snapshots, checkpoints), so the files are fetched whole -- one request each -- into a private
temporary directory laid out as on the store (the partition directory's name carries the topic
and partition), checked there with the local code, and the temporary directory is removed
afterwards. Reports name the remote paths. Nothing is written to the store.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from typing import Any

from .. import SEGMENT_FILE, Storage, is_remote, normalize_path
from ..errors import KafkalogError


@contextlib.contextmanager
def local_view(path: str, storage_options: Mapping[str, Any] | None = None) -> Iterator[tuple[str, str]]:
    """``(local path, remote path)``: for a remote ``path``, a temporary local copy of what a
    read-only command reads there (a segment file: it and the files of the same segment; a
    directory: its tree); a local path is yielded as it is, twice.

    Raises:
        KafkalogError: nothing at the remote path.
    """
    if not is_remote(path):
        yield path, path
        return
    url = normalize_path(path)
    storage = Storage.for_path(url, storage_options)
    fs = storage.fs
    key = fs._strip_protocol(url)
    root = tempfile.mkdtemp(prefix="kafkalog-view-")
    try:
        name = posixpath.basename(key)
        if fs.isfile(key):
            parent = posixpath.dirname(key)
            local_dir = os.path.join(root, posixpath.basename(parent) or "partition")
            os.makedirs(local_dir)
            m = SEGMENT_FILE.match(name)
            prefix = m.group(1) if m else None
            for entry in fs.ls(parent, detail=True):
                other = posixpath.basename(entry["name"])
                if entry.get("type") == "file" and (other == name or (prefix and other.startswith(prefix + "."))
                                                   or other in ("leader-epoch-checkpoint", "partition.metadata")):
                    fs.get_file(entry["name"], os.path.join(local_dir, other))
            local = os.path.join(local_dir, name)
        else:
            keys = fs.find(key)
            if not keys:
                raise KafkalogError("no such file or directory", file=url)
            local = os.path.join(root, name or "root")
            for k in keys:
                rel = posixpath.relpath(k, key)
                target = os.path.join(local, *rel.split("/"))
                os.makedirs(os.path.dirname(target), exist_ok=True)
                fs.get_file(k, target)
        yield local, url
    finally:
        shutil.rmtree(root, ignore_errors=True)


def relabel(value: Any, local: str, url: str) -> Any:
    """``value`` (a report's dict, list or string) with the local copy's paths named as on the
    store."""
    if local == url:
        return value
    if isinstance(value, str):
        if value == local or value.startswith(local + os.sep):
            return url + value[len(local):].replace(os.sep, "/")
        return value.replace(local + os.sep, url + "/").replace(local, url)
    if isinstance(value, dict):
        return {k: relabel(v, local, url) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(relabel(v, local, url) for v in value)
    return value
