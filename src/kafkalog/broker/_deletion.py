"""Deleting partition directories Kafka's way (``LogManager.asyncDelete``): the directory is
first renamed ``<topic>-<partition>.<uuid>-delete`` (a durable rename: nothing of the topic is
ever served again, and the next start cannot mistake it for a partition), then removed in the
background. A start finds the ``-delete`` directories a crash left and removes them too."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from ..durable import fsync_dir
from ..filenames import SPECIAL_DIR, delete_dir_name, partition_of

_log = logging.getLogger(__package__)
_DELETE_KIND = "delete"


def is_delete_dir(name: str) -> bool:
    """Whether ``name`` is a partition directory renamed for deletion."""
    match = SPECIAL_DIR.match(name)
    return match is not None and match["kind"] == _DELETE_KIND


def finish_renames(log_dir: Path, directories: Iterable[Path]) -> list[Path]:
    """Rename partition directories of a topic whose deletion a crash interrupted (their logs
    never opened), then fsync ``log_dir`` once; returns the new paths."""
    renamed = []
    for directory in directories:
        found = partition_of(directory)
        assert found is not None
        target = log_dir / delete_dir_name(*found)
        os.rename(directory, target)
        renamed.append(target)
        _log.info("finishing an interrupted deletion: %s renamed %s", directory.name, target.name)
    if renamed:
        fsync_dir(log_dir)
    return renamed


def remove_deleted(directories: Iterable[Path]) -> None:
    """Remove ``-delete`` directories and make their removal durable (blocking; the broker runs
    it on its thread pool). A failure is logged: the next start tries again."""
    parents = set()
    for directory in directories:
        try:
            shutil.rmtree(directory)
        except FileNotFoundError:
            pass
        except OSError as e:
            _log.error("removing %s failed (the next start retries): %s", directory, e)
            continue
        parents.add(directory.parent)
        _log.info("deleted log directory %s", directory.name)
    for parent in parents:
        fsync_dir(parent)
