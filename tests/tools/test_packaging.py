"""What a wheel carries beside the code (issue 19): the license, the trove classifiers, and
types a type checker can see."""

from __future__ import annotations

import sys
import typing
from pathlib import Path

import pytest

import kafkalog
from kafkalog import RecordColumns

ROOT = Path(__file__).resolve().parents[2]

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")


def test_the_license_is_apache_2_in_full() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License\n                           Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text and "APPENDIX: How to apply the Apache License" in text


def test_the_project_metadata_names_license_classifiers_and_urls() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    meta = project["project"]
    # PEP 639: an SPDX expression (setuptools >= 77 refuses a License classifier beside it)
    assert meta["license"] == "Apache-2.0" and meta["license-files"] == ["LICENSE"]
    assert not any(c.startswith("License ::") for c in meta["classifiers"])
    assert "Typing :: Typed" in meta["classifiers"]
    assert meta["authors"] and meta["urls"]
    assert meta["version"] == kafkalog.__version__


def test_record_columns_declares_every_column_for_type_checkers() -> None:
    """``mypy --strict`` saw no attribute of RecordColumns: ``__slots__`` declares no type."""
    hints = typing.get_type_hints(RecordColumns)
    assert set(RecordColumns.__slots__) <= set(hints)
    assert hints["offset"] == typing.get_type_hints(RecordColumns)["batch_index"]
    assert type(None) in typing.get_args(hints["header_offsets"])  # None without headers
    assert type(None) not in typing.get_args(hints["key_data"])
