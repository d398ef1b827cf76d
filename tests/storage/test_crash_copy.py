"""``crash_copy`` (the copy of a live log directory the crash tests reopen) survives the log's
background thread deleting or renaming files while it copies."""

from __future__ import annotations

import shutil

from test_log_crash import crash_copy


def test_crash_copy_tolerates_files_vanishing_mid_copy(tmp_path, monkeypatch) -> None:
    directory = tmp_path / "logdir" / "topic-0"
    directory.mkdir(parents=True)
    (directory / "00000000000000000000.log").write_bytes(b"data")
    (directory / "00000000000000000000.log.deleted").write_bytes(b"old")
    real = shutil.copy2

    def copy2(src, dst, **kw):
        # The background thread unlinks the .deleted segment after the listing, before its copy.
        if str(src).endswith(".deleted"):
            (directory / "00000000000000000000.log.deleted").unlink(missing_ok=True)
        return real(src, dst, **kw)

    monkeypatch.setattr(shutil, "copy2", copy2)
    copy = crash_copy(directory, tmp_path / "crashed")
    assert sorted(p.name for p in copy.iterdir()) == ["00000000000000000000.log"]
    assert (copy / "00000000000000000000.log").read_bytes() == b"data"
