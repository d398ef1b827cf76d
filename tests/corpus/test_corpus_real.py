"""Log files written by real Kafka brokers, read whole and checked against their manifest.

Two sources, one check:

* every ``.log`` / ``.log.swap`` (and KRaft ``*.checkpoint`` snapshot with figures) under the
  shared corpus ``SHARED_CORPUS/real`` (skipped when that directory is absent), with the
  expected figures parsed from its MANIFEST.md bullet lines;
* a small set of copies in tests/data/real, only from repositories whose LICENSE is Apache-2.0
  (see tests/data/real/README.md), with their MANIFEST bullet lines hard-coded in ``COPIES`` so
  CI runs without the shared corpus.

For each file: strict deep validation passes over the file and over memory and counts every
batch, every record decodes, nothing trails the last batch, and the batch and record counts,
offset range, codec counts, transactional/control batches, control types, producer ids, header
count, null values and leader epochs equal the manifest's.
"""

from __future__ import annotations

import ast
import collections
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import DATA, SHARED_CORPUS

from kafkalog import FileRecords, MemoryRecords

REAL = SHARED_CORPUS / "real"
COPIES_DIR = DATA / "real"

# -- the manifest ------------------------------------------------------------------------------

_REPO = re.compile(r"^## (\S+)\s*$")
_SOURCE = re.compile(r"^- Source: (\S+), commit `([0-9a-f]{40})`")
_LICENCE = re.compile(r"^- Licence: (.*)$")
_PARTITION = re.compile(r"^- `([^`]+)/` \(from ")
_FILE = re.compile(r"^  - (\S+): (\d+) B; (.*)$")
_COUNTS = re.compile(r"^(\d+) batches/messages, (\d+) records$")
_OFFSETS = re.compile(r"^offsets (?:(-?\d+)\.\.(-?\d+)|empty)$")
_OPTIONAL = {
    "transactional": re.compile(r"^(\d+) transactional$"),
    "control": re.compile(r"^(\d+) control \(types (\{.*\})\)$"),
    "producer_ids": re.compile(r"^producer ids (\[.*\])$"),
    "headers": re.compile(r"^(\d+) headers$"),
    "null_values": re.compile(r"^(\d+) null values$"),
    "leader_epochs": re.compile(r"^(\d+) leader epochs$"),
}


@dataclass
class Expected:
    """What a manifest bullet says about one record file. Zero counts are left out of the
    bullets, so an absent item means zero (one leader epoch at most)."""

    size: int
    magics: set[int]
    codecs: dict[str, int]
    batches: int
    records: int
    offsets: tuple[int, int] | None
    transactional: int = 0
    control: int = 0
    control_types: dict[int, int] = field(default_factory=dict)
    producer_ids: list[int] = field(default_factory=list)
    headers: int = 0
    null_values: int = 0
    leader_epochs: int | None = None  # None: not stated (at most one)


def parse_bullet(line: str) -> Expected:
    """Parse the part after ``<name>: `` of a record-file bullet, e.g.
    ``1398 B; v2; none:12,gzip:2; 14 batches/messages, 14 records; offsets 0..13; 14 headers``."""
    m = re.match(r"^(\d+) B; (.*)$", line)
    assert m, f"not a record-file bullet: {line!r}"
    size = int(m.group(1))
    parts = m.group(2).split("; ")
    magic, codecs, counts, offsets, *rest = parts
    magics = set() if magic == "-" else {int(magic.removeprefix("v"))}
    codec_counts = {} if codecs == "-" else {k: int(v) for k, v in (c.split(":") for c in codecs.split(","))}
    mc = _COUNTS.match(counts)
    mo = _OFFSETS.match(offsets)
    assert mc and mo, f"unparsable bullet {line!r}"
    exp = Expected(
        size=size,
        magics=magics,
        codecs=codec_counts,
        batches=int(mc.group(1)),
        records=int(mc.group(2)),
        offsets=None if mo.group(1) is None else (int(mo.group(1)), int(mo.group(2))),
    )
    for item in rest:
        for name, rx in _OPTIONAL.items():
            mi = rx.match(item)
            if mi:
                break
        else:
            raise AssertionError(f"unknown item {item!r} in bullet {line!r}")
        if name == "control":
            exp.control = int(mi.group(1))
            exp.control_types = {int(k): v for k, v in ast.literal_eval(mi.group(2)).items()}
        elif name == "producer_ids":
            exp.producer_ids = list(ast.literal_eval(mi.group(1)))
        else:
            setattr(exp, name, int(mi.group(1)))
    return exp


@dataclass
class ManifestEntry:
    repo: str
    source: str
    commit: str
    licence: str
    bullet: str  # the text after "<name>: "


def parse_manifest(text: str) -> dict[str, ManifestEntry]:
    """``{"<repo>/<topic-partition>/<file>": entry}`` for every record-file bullet."""
    entries: dict[str, ManifestEntry] = {}
    repo = source = commit = licence = partition = None
    for line in text.splitlines():
        if m := _REPO.match(line):
            repo, source, commit, licence, partition = m.group(1), None, None, None, None
        elif m := _SOURCE.match(line):
            source, commit = m.group(1), m.group(2)
        elif (m := _LICENCE.match(line)) and repo:
            licence = m.group(1)
        elif m := _PARTITION.match(line):
            partition = m.group(1)
        elif (m := _FILE.match(line)) and repo and partition:
            name = m.group(1)
            entries[f"{repo}/{partition}/{name}"] = ManifestEntry(
                repo, source, commit, licence, line.split(": ", 1)[1]
            )
    return entries


def is_apache(licence: str | None) -> bool:
    return bool(licence) and "Apache License Version 2.0" in licence


#: Where the shared MANIFEST is wrong, checked against the raw bytes independently of kafkalog.
#: BiggerBrain lsx1-0: the bullet lists producer ids [0..5] (its own notes say "0,1,2"), but
#: the 14 batch headers (struct ">qiibIhiqqqhii" at positions 0, 97, ..., 1281) hold producer
#: ids -1, 0, 1, ..., 12: thirteen distinct idempotent producers.
ERRATA: dict[str, dict] = {
    "BiggerBrain__kafka/lsx1-0/00000000000000000000.log": {"producer_ids": list(range(13))},
}


def expected_for(rel: str, bullet: str) -> Expected:
    exp = parse_bullet(bullet)
    for name, value in ERRATA.get(rel, {}).items():
        setattr(exp, name, value)
    return exp


# -- measuring a file --------------------------------------------------------------------------


@dataclass
class Measured:
    size: int
    magics: set[int]
    codecs: dict[str, int]
    batches: int
    records: int
    offsets: tuple[int, int] | None
    transactional: int
    control: int
    control_types: dict[int, int]
    producer_ids: list[int]
    headers: int
    null_values: int
    leader_epochs: int


def measure(path: Path) -> Measured:
    """Read ``path`` whole (validated, deep, strict) and count what the manifest counts."""
    size = path.stat().st_size
    with FileRecords.open(path) as fr:
        n_valid = fr.validate(deep=True)  # strict: a partial tail or a bad batch raises
        assert fr.valid_bytes == size, f"{size - fr.valid_bytes} trailing bytes after the last batch"
        magics: set[int] = set()
        codecs: collections.Counter[str] = collections.Counter()
        control_types: collections.Counter[int] = collections.Counter()
        pids: set[int] = set()
        epochs: set[int] = set()
        n_batches = n_records = txn = ctl = headers = nulls = 0
        first = last = None
        prev_offset = None
        position = 0
        for batch in fr.batches(validate=True, strict=True):
            assert batch.position == position, f"batch at {batch.position}, expected {position}"
            position += batch.size_in_bytes
            n_batches += 1
            magics.add(batch.magic)
            codecs[batch.compression.kafka_name] += 1
            txn += batch.is_transactional
            ctl += batch.is_control
            if batch.producer_id != -1:
                pids.add(batch.producer_id)
            epochs.add(batch.partition_leader_epoch)
            if first is None:
                first = batch.base_offset
            last = batch.last_offset
            records = batch.records()
            if batch.count is not None:
                assert len(records) == batch.count, f"batch at {batch.position}: count {batch.count}"
            for r in records:
                assert batch.base_offset <= r.offset <= batch.last_offset, f"record offset {r.offset} outside its batch"
                assert prev_offset is None or r.offset > prev_offset, f"offset {r.offset} after {prev_offset}"
                prev_offset = r.offset
                assert r.is_control == batch.is_control
                if r.is_control:
                    control_types[int(r.control_type)] += 1
                headers += len(r.headers)
                nulls += r.value is None
            n_records += len(records)
        assert n_valid == n_batches, f"validate() counted {n_valid} batches, iteration {n_batches}"
        assert position == size
    mr = MemoryRecords(path.read_bytes())
    assert mr.validate(deep=True) == n_batches
    assert sum(1 for _ in mr.records()) == n_records
    return Measured(
        size=size,
        magics=magics,
        codecs=dict(codecs),
        batches=n_batches,
        records=n_records,
        offsets=None if first is None else (first, last),
        transactional=txn,
        control=ctl,
        control_types=dict(control_types),
        producer_ids=sorted(pids),
        headers=headers,
        null_values=nulls,
        leader_epochs=len(epochs),
    )


def check_against(path: Path, exp: Expected) -> None:
    got = measure(path)
    mismatches = []
    for name in (
        "size", "magics", "codecs", "batches", "records", "offsets", "transactional",
        "control", "control_types", "producer_ids", "headers", "null_values",
    ):  # fmt: skip
        e, a = getattr(exp, name), getattr(got, name)
        if e != a:
            mismatches.append(f"{name}: manifest says {e!r}, kafkalog read {a!r}")
    if exp.leader_epochs is None:
        if got.leader_epochs > 1:
            mismatches.append(f"leader_epochs: manifest states none (<= 1), kafkalog read {got.leader_epochs}")
    elif exp.leader_epochs != got.leader_epochs:
        mismatches.append(f"leader_epochs: manifest says {exp.leader_epochs}, kafkalog read {got.leader_epochs}")
    assert not mismatches, f"{path}:\n  " + "\n  ".join(mismatches)


# -- a. the whole shared corpus ----------------------------------------------------------------


def _shared_files() -> list[str]:
    if not REAL.is_dir():
        return []
    found = [*REAL.rglob("*.log"), *REAL.rglob("*.log.swap"), *REAL.rglob("*-*.checkpoint")]
    return sorted(str(p.relative_to(REAL)) for p in found if p.is_file())


SHARED_FILES = _shared_files()
_NO_SHARED = "shared corpus ../shared/corpus/real is absent"


@pytest.fixture(scope="module")
def manifest() -> dict[str, ManifestEntry]:
    path = REAL / "MANIFEST.md"
    if not path.is_file():
        pytest.skip(_NO_SHARED)
    return parse_manifest(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("rel", SHARED_FILES or [None], ids=lambda r: r or "absent")
def test_shared_real_file(rel: str | None, manifest: dict[str, ManifestEntry]) -> None:
    """A broker-written file from the shared corpus reads cleanly and matches its manifest."""
    if rel is None:
        pytest.skip(_NO_SHARED)
    assert rel in manifest, f"{rel} has no bullet in MANIFEST.md"
    check_against(REAL / rel, expected_for(rel, manifest[rel].bullet))


def test_shared_manifest_lists_only_present_files(manifest: dict[str, ManifestEntry]) -> None:
    """Every record-file bullet in MANIFEST.md names a file that is there (and is tested)."""
    assert len(manifest) >= 40
    missing = [rel for rel in manifest if not (REAL / rel).is_file()]
    assert not missing, missing
    assert set(manifest) == set(SHARED_FILES)


def test_shared_corpus_covers_the_cases(manifest: dict[str, ManifestEntry]) -> None:
    """The shared corpus holds what the suite relies on: v1 data, a .log.swap, an empty .log,
    COMMIT markers and every codec but zstd (the Kafka 3.8 corpus covers zstd and ABORT)."""
    exps = {rel: parse_bullet(e.bullet) for rel, e in manifest.items()}
    assert any(1 in e.magics for e in exps.values())
    assert any(rel.endswith(".log.swap") for rel in exps)
    assert any(e.size == 0 for e in exps.values())
    assert any(e.control_types.get(1) for e in exps.values())
    assert {c for e in exps.values() for c in e.codecs} == {"none", "gzip", "snappy", "lz4"}


# -- b. the copies in tests/data/real ----------------------------------------------------------

#: Each copied file and its bullet, verbatim from the shared MANIFEST.md (all from repositories
#: whose LICENSE is Apache-2.0; sources and commits in tests/data/real/README.md).
COPIES: dict[str, str] = {
    # snappy v2 (xerial-framed), one header per record
    "seanorth__kafka-server/some-topic-0/00000000000000000000.log":
        "1989 B; v2; snappy:9; 9 batches/messages, 9 records; offsets 0..8; 9 headers",
    # gzip + none mixed, idempotent producers, leader epochs 0,1,3,5,6
    "BiggerBrain__kafka/lsx1-0/00000000000000000000.log":
        "1398 B; v2; none:12,gzip:2; 14 batches/messages, 14 records; offsets 0..13; "
        "producer ids [0, 1, 2, 3, 4, 5]; 14 headers; 5 leader epochs",
    # lz4 v2, two records per batch
    "mscaldas2012__kafka-connect-spooldir/_confluent-controlcenter-5-1-2-1-monitoring-trigger-event-rekey-0/"
    "00000000000000000000.log":
        "1080 B; v2; lz4:11; 11 batches/messages, 22 records; offsets 0..21",
    "mscaldas2012__kafka-connect-spooldir/_confluent-command-0/00000000000000000000.log":
        "231 B; v2; lz4:1; 1 batches/messages, 2 records; offsets 0..1",
    # a log-cleaner run caught mid-way: the segment, its compacted .log.swap, the next segment
    "getachew015__kafka-broker/__consumer_offsets-13/00000000000000000000.log":
        "7802 B; v2; none:36; 36 batches/messages, 36 records; offsets 0..35",
    "getachew015__kafka-broker/__consumer_offsets-13/00000000000000000000.log.swap":
        "240 B; v2; none:2; 2 batches/messages, 2 records; offsets 16..35",
    "getachew015__kafka-broker/__consumer_offsets-13/00000000000000000036.log":
        "122 B; v2; none:1; 1 batches/messages, 2 records; offsets 36..37; 2 null values",
    # the zero-length segment
    "William0423__kafka/__consumer_offsets-0/00000000000000000000.log":
        "0 B; -; -; 0 batches/messages, 0 records; offsets empty",
    # uncompressed v2 with batches of up to 30 records
    "William0423__kafka/debug_topic-0/00000000000000000000.log":
        "883 B; v2; none:3; 3 batches/messages, 40 records; offsets 0..39",
    # uncompressed v2 at some size: 147 batches, 862 records; then a batch of 7 tombstones
    "NikhilDighe9975__kafka_setup/__consumer_offsets-12/00000000000000000000.log":
        "64548 B; v2; none:147; 147 batches/messages, 862 records; offsets 0..861",
    "NikhilDighe9975__kafka_setup/__consumer_offsets-12/00000000000000000862.log":
        "317 B; v2; none:1; 1 batches/messages, 7 records; offsets 862..868; 7 null values",
    # idempotent producers with large ids
    "NikhilDighe9975__kafka_setup/nikhilDemo-0/00000000000000000000.log":
        "209 B; v2; none:3; 3 batches/messages, 3 records; offsets 0..2; producer ids [7000, 10000]",
}  # fmt: skip


@pytest.mark.parametrize("rel", sorted(COPIES))
def test_copied_real_file(rel: str) -> None:
    """A copy in tests/data/real reads cleanly and matches its (hard-coded) manifest bullet."""
    path = COPIES_DIR / rel
    assert path.is_file(), f"missing copy {path}"
    check_against(path, expected_for(rel, COPIES[rel]))


def test_copies_are_exactly_the_table() -> None:
    """tests/data/real holds the files of COPIES and nothing else (besides its README), each
    named in the README."""
    present = {
        str(p.relative_to(COPIES_DIR)) for p in COPIES_DIR.rglob("*") if p.is_file() and p.name != "README.md"
    }
    assert present == set(COPIES)
    readme = (COPIES_DIR / "README.md").read_text(encoding="utf-8")
    for rel in COPIES:
        assert rel in readme, f"{rel} is not listed in tests/data/real/README.md"
    assert sum((COPIES_DIR / rel).stat().st_size for rel in COPIES) < 300_000


def test_copies_agree_with_shared_manifest(manifest: dict[str, ManifestEntry]) -> None:
    """Each copy is byte-identical to the shared file, its table bullet is the MANIFEST's
    verbatim, its repository is Apache-2.0 licensed, and the README names its commit."""
    readme = (COPIES_DIR / "README.md").read_text(encoding="utf-8")
    for rel, bullet in COPIES.items():
        entry = manifest[rel]
        assert entry.bullet == bullet, f"{rel}: table {bullet!r} != MANIFEST {entry.bullet!r}"
        assert is_apache(entry.licence), f"{rel}: {entry.repo} is not Apache-2.0 ({entry.licence})"
        assert entry.commit in readme and entry.source in readme, f"{rel}: source/commit missing from README"
        assert (COPIES_DIR / rel).read_bytes() == (REAL / rel).read_bytes(), f"{rel} differs from the shared file"


# -- the manifest parser itself ----------------------------------------------------------------


def test_parse_bullet() -> None:
    """The bullet parser reads every item and treats absent counts as zero."""
    e = parse_bullet(
        "29110 B; v2; none:8; 8 batches/messages, 8 records; offsets 0..7; 8 transactional; "
        "4 control (types {'1': 4}); producer ids [0]"
    )
    assert (e.size, e.magics, e.codecs, e.batches, e.records, e.offsets) == (29110, {2}, {"none": 8}, 8, 8, (0, 7))
    assert (e.transactional, e.control, e.control_types, e.producer_ids) == (8, 4, {1: 4}, [0])
    assert (e.headers, e.null_values, e.leader_epochs) == (0, 0, None)
    empty = parse_bullet("0 B; -; -; 0 batches/messages, 0 records; offsets empty")
    assert (empty.magics, empty.codecs, empty.offsets, empty.batches) == (set(), {}, None, 0)
    with pytest.raises(AssertionError):
        parse_bullet("10 B; v2; none:1; 1 batches/messages, 1 records; offsets 0..0; 3 surprises")
