"""``kafkalog.columnar.interleave``: records rendered piece by piece, through Arrow's take and
through the numpy gather, against a plain Python join."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog.columnar import interleave as il
from kafkalog.columnar.columns import binary_from_list

entries = st.lists(st.one_of(st.none(), st.binary(max_size=12)), min_size=1, max_size=30)


def reference(n, pieces) -> bytes:
    out = []
    for i in range(n):
        for p in pieces:
            if isinstance(p, bytes):
                out.append(p)
            elif isinstance(p, il.Slices):
                item = bytes(p.data[p.offsets[i]:p.offsets[i + 1]])
                out.append(item or (p.empty if p.empty is not None else b""))
            elif isinstance(p, list):
                out.append(p[i])
            elif isinstance(p, il.Packed):
                out.append(p.values[i:i + 1].tobytes())
            else:
                out.append(b"%d" % p[i])
    return b"".join(out)


def _row(p, i: int):
    """Piece ``p`` cut to record ``i`` alone (for the per-record reference)."""
    if isinstance(p, il.Slices):
        a, b = int(p.offsets[i]), int(p.offsets[i + 1])
        return il.Slices(np.array([0, b - a], np.int64), p.data[a:b], p.empty)
    if isinstance(p, il.Packed):
        return il.Packed(p.values[i:i + 1])
    return p[i:i + 1]


@pytest.mark.parametrize("path", ["arrow", "numpy"])
@given(data=st.data())
def test_interleave_is_the_join_of_the_pieces(path, data) -> None:
    values = data.draw(entries)
    n = len(values)
    offsets, blob, _ = binary_from_list(values)
    pieces = []
    for kind in data.draw(st.lists(st.sampled_from(["const", "slices", "empty", "ints", "packed", "list"]), min_size=1,
                                   max_size=6)):
        if kind == "const":
            pieces.append(data.draw(st.binary(max_size=4)))
        elif kind in ("slices", "empty"):
            pieces.append(il.Slices(offsets, blob, b"NULL" if kind == "empty" else None))
        elif kind == "ints":
            pieces.append(np.array(data.draw(st.lists(st.integers(-2**63, 2**63 - 1), min_size=n, max_size=n)), np.int64))
        elif kind == "packed":
            pieces.append(il.Packed(np.array(data.draw(st.lists(st.integers(-2**31, 2**31 - 1), min_size=n, max_size=n)),
                                             ">i4")))
        else:
            pieces.append(data.draw(st.lists(st.binary(max_size=5), min_size=n, max_size=n)))
    if path == "arrow":
        pytest.importorskip("pyarrow")
        got = il._by_arrow(n, [il._as_slices(p) if isinstance(p, (list, il.Packed)) else p for p in pieces],
                           il._arrow_take())[0]
    else:
        got = il._by_numpy(n, [il._as_slices(p) if isinstance(p, (list, il.Packed)) else p for p in pieces])[0]
    assert bytes(got) == reference(n, pieces)
    data, bounds = il.interleave_records(n, pieces)
    assert [bytes(data[a:b]) for a, b in zip(bounds.tolist(), bounds[1:].tolist())] == [
        reference(1, [p if isinstance(p, bytes) else _row(p, i) for p in pieces]) for i in range(n)]


def test_pieces_must_have_every_record() -> None:
    with pytest.raises(ValueError, match="2 entries, not 3"):
        il.interleave(3, [np.array([1, 2], np.int64)])
    assert il.interleave(0, [b"x"]) == b""


def _quoted(data: bytes) -> bytes:
    return b'"' + data.replace(b"\\", b"\\\\").replace(b'"', b'\\"') + b'"'


@pytest.mark.parametrize("path", ["arrow", "numpy"])
@given(values=st.lists(st.one_of(st.none(), st.binary(max_size=8), st.sampled_from([b"plain", b"a\"b", b"\x01"])),
                       min_size=1, max_size=30))
def test_json_strings_escape_only_what_must_be(path, values) -> None:
    offsets, data, valid = binary_from_list(values)
    pieces = [b"<", *il.json_strings(offsets, data, valid, _quoted), b">"]
    n = len(values)
    if path == "arrow":
        pytest.importorskip("pyarrow")
        got = il._by_arrow(n, pieces, il._arrow_take())[0]
    else:
        got = il._by_numpy(n, pieces)[0]
    assert bytes(got) == b"".join(b"<" + (b"null" if v is None else _quoted(v)) + b">" for v in values)
