"""``kafkalog consume`` (issue 28): kcat's consumer over a log directory.

The same records are read by kcat (Debian's 1.7.1 over librdkafka 2.0.2) from ``kafkalog
broker`` serving a copy of the directory, and by ``consume`` from the directory itself: the
output must be the same bytes for every format token, the delimiters, ``-Z``, ``-J`` (but for
``"broker"``, the broker's id there and -1 offline) and every ``-o`` form. Then what only the
offline reader does: read_committed over aborted transactions, control records, a torn tail,
an empty partition, ``--follow`` over a log being appended, rolled and cut by retention, decode
errors, usage errors; and every mode leaves the directory as it was.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import scaled, wait_until
from hypothesis import given
from hypothesis import strategies as st

from kafkalog import (
    Compression,
    ControlRecordType,
    Header,
    Log,
    LogConfig,
    RecordBatchBuilder,
)
from kafkalog.producer_state.manager import AppendOrigin
from kafkalog.tools import _consume, main
from kafkalog.tools._kcat_format import (
    KcatFormatError,
    parse_delim,
    parse_format,
    strtoul,
    unescape,
    yajl_string,
)

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
T0 = 1_700_000_000_000

#: Values and keys that exercise the renderings: null, empty, JSON escapes, control bytes,
#: invalid UTF-8, a delimiter inside, a percent sign.
ODD = [None, b"", b'quote " back \\ slash', b"ctl \x00\x01\x1f\x7f end", b"\xff\xfe not utf-8 \xc3", b"new\nline\ttab",
       b"100% sure", "unicode ✓ é".encode()]


def _append_batches(log: Log, topic_seed: int) -> None:
    """Every magic and codec; keys and values from ODD; headers with null and empty values."""
    n = 0
    combos = [(0, Compression.NONE), (0, Compression.GZIP), (1, Compression.NONE), (1, Compression.SNAPPY),
              (1, Compression.LZ4), (2, Compression.NONE), (2, Compression.GZIP), (2, Compression.SNAPPY),
              (2, Compression.LZ4), (2, Compression.ZSTD)]
    for magic, codec in combos:
        builder = RecordBatchBuilder(magic, codec)
        for i in range(4):
            key = ODD[(n + topic_seed) % len(ODD)]
            value = ODD[(n * 3 + 1) % len(ODD)]
            headers = ()
            if magic == 2 and i % 2:
                headers = (Header("h1", b"one"), Header("nul", None), Header("empty", b""), Header("q\"", b"a,b=c"))
            builder.append(key, value, timestamp=T0 + 10 * n, headers=headers)
            n += 1
        log.append(builder.build())


def build_logdir(root: Path) -> Path:
    """``mix-0`` (every magic and codec, odd bytes), ``mix-1``, ``other-0`` and an empty ``empty-0``."""
    logdir = root / "logs"
    for name, seed in (("mix-0", 0), ("mix-1", 3), ("other-0", 5)):
        log = Log.open(logdir / name, LogConfig(segment_bytes=1500))
        try:
            _append_batches(log, seed)
        finally:
            log.close()
    Log.open(logdir / "empty-0", LogConfig()).close()
    return logdir


def build_transactions(directory: Path) -> None:
    """A partition with a committed and an aborted transaction interleaved with plain records."""
    log = Log.open(directory, LogConfig())
    try:
        def plain(value: bytes) -> None:
            b = RecordBatchBuilder(2)
            b.append(b"k", value, timestamp=T0)
            log.append(b.build())

        def txn(pid: int, values: list[bytes]) -> None:
            b = RecordBatchBuilder(2, producer_id=pid, producer_epoch=0, base_sequence=0, is_transactional=True)
            for v in values:
                b.append(b"t", v, timestamp=T0)
            log.append(b.build())

        def end(pid: int, kind: ControlRecordType) -> None:
            marker = RecordBatchBuilder.end_transaction_marker(kind, producer_id=pid, producer_epoch=0,
                                                               coordinator_epoch=0, timestamp=T0)
            log.append(marker, origin=AppendOrigin.COORDINATOR)

        plain(b"p0")
        txn(7, [b"a0", b"a1"])
        txn(8, [b"c0"])
        plain(b"p1")
        end(7, ControlRecordType.ABORT)
        end(8, ControlRecordType.COMMIT)
        plain(b"p2")
    finally:
        log.close()


def consume(*argv: str) -> tuple[int, bytes, str]:
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="")
    err = io.StringIO()
    status = main(["consume", *argv], stdout=out, stderr=err)
    out.flush()
    return status, out.buffer.getvalue(), err.getvalue()


def digest(root: Path) -> dict[str, tuple]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            st = path.lstat()
            data = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
            out[str(path.relative_to(root))] = (st.st_size, st.st_mtime_ns, data)
    return out


@pytest.fixture(scope="module")
def logdir(tmp_path_factory) -> Path:
    return build_logdir(tmp_path_factory.mktemp("consume"))


# -- against kcat ---------------------------------------------------------------------------------

FORMATS = [
    "%t %p %o %T %K %k %S %s [%h]\\n",
    "%s\\n",
    "%k\\t%s\\n",
    "%R%s",
    "%%o=%o%%\\n",
    "lit\\x41\\x4g\\102\\0x41\\q\\xff\\r%o\\n",
    "%h|%K|%S\\n",
    "no newline %o",
]


@pytest.fixture(scope="module")
def broker(logdir, tmp_path_factory):
    if KCAT is None:
        pytest.skip("needs kcat (Debian: apt-get install kcat)")
    from kafkalog.broker import Broker

    served = tmp_path_factory.mktemp("served") / "logs"
    shutil.copytree(logdir, served)
    with Broker(served, config={"log.retention.check.interval.ms": "3600000", "log.cleaner.enable": "false"}) as b:
        yield b


def kcat(broker, topic: str, *args: str) -> bytes:
    r = subprocess.run([KCAT, "-b", broker.bootstrap, "-C", "-t", topic, "-e", "-q", *args], capture_output=True,
                       timeout=scaled(60), check=False)
    assert r.returncode == 0, r.stderr
    return r.stdout


def same_as_kcat(broker, logdir: Path, topic: str, partition: int, *args: str, json: bool = False) -> bytes:
    expected = kcat(broker, topic, "-p", str(partition), *args)
    status, got, err = consume(str(logdir), "-t", topic, "-p", str(partition), *args)
    assert status == 0, err
    if json:
        expected = expected.replace(b',"broker":0,', b',"broker":-1,')
    assert got == expected
    return got


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("partition", [0, 1])
def test_format_tokens_as_kcat(broker, logdir, fmt, partition) -> None:
    out = same_as_kcat(broker, logdir, "mix", partition, "-f", fmt)
    assert out or fmt.startswith("%R")


@pytest.mark.parametrize("args", [
    [], ["-Z"], ["-K", ":"], ["-Z", "-K", "\\t=>"], ["-D", "\\x1e"], ["-D", "%%|"], ["-Z", "-D", "--\\n", "-K", "\\x3a"],
    ["-c", "7"], ["-c", "0"], ["-o", "5"], ["-o", "end"], ["-o", "-3"], ["-o", "-1000"], ["-o", "beginning", "-c", "2"],
    ["-o", f"s@{T0 + 95}"], ["-o", f"s@{T0 + 95}", "-o", f"e@{T0 + 205}"], ["-o", f"e@{T0 + 50}"], ["-o", "s@0"],
    ["-o", f"s@{T0 + 10**9}"], ["-o", "e@0"], ["-o", "s@1"], ["-o", "e@1", "-f", "%o %T\\n"], ["-o", "abc"],
    ["-o", "-0"],
], ids=lambda a: " ".join(a) or "default")
def test_options_as_kcat(broker, logdir, args) -> None:
    same_as_kcat(broker, logdir, "mix", 0, *args)


@pytest.mark.parametrize("args", [["-J"], ["-J", "-Z"], ["-J", "-D", "\\r\\n"], ["-J", "-f", "%s\\n"], ["-J", "-f", "|%s"],
                                  ["-J", "-o", "-5", "-c", "3"]], ids=" ".join)
@pytest.mark.parametrize("topic", ["mix", "other"])
def test_json_envelopes_as_kcat(broker, logdir, args, topic) -> None:
    same_as_kcat(broker, logdir, topic, 0, *args, json=True)


def test_empty_partition_as_kcat(broker, logdir) -> None:
    assert same_as_kcat(broker, logdir, "empty", 0, "-J", json=True) == b""


def test_all_partitions_in_partition_order(logdir, broker) -> None:
    status, out, _ = consume(str(logdir), "-t", "mix", "-f", "%p %o\\n")
    assert status == 0
    lines = out.splitlines()
    assert lines == sorted(lines, key=lambda line: tuple(map(int, line.split())))
    # kcat interleaves partitions as they arrive: the same lines, in another order
    assert sorted(lines) == sorted(kcat(broker, "mix", "-f", "%p %o\\n").splitlines())
    # -c counts over all partitions
    assert consume(str(logdir), "-t", "mix", "-c", "45", "-f", "%p\\n")[1] == b"0\n" * 40 + b"1\n" * 5


# -- the format machinery against kcat's C ----------------------------------------------------------


def test_escapes_and_strtoul_follow_c() -> None:
    assert strtoul(b"0x1fz", 0, 0) == (0x1F, 4)
    assert strtoul(b"017", 0, 0) == (0o17, 3)
    assert strtoul(b"zz", 0, 16) == (0, 0)
    assert unescape(b"a\\x41\\x4g\\n\\q") == b"aA\x04g\nq"
    assert unescape(b"cut\\0here") == b"cut"  # kcat keeps each piece as a C string
    assert unescape(b"\\xff") == b"ff"  # kcat reads a hex number only after a decimal digit
    assert parse_delim(b"a\\tb\\x3a\\n") == b"a\tb:\n"
    with pytest.raises(KcatFormatError, match="expects hex number"):
        parse_delim(b"\\xg")
    with pytest.raises(KcatFormatError, match="Unsupported formatter: %x"):
        parse_format(b"%x")
    with pytest.raises(KcatFormatError, match="Empty formatter"):
        parse_format(b"abc%")
    assert yajl_string(b'"\\\x01\n/\xff') == b'"\\"\\\\\\u0001\\n/\xff"'


def _yajl_reference(data: bytes) -> bytes:
    """yajl's ``yajl_string_encode``, byte by byte."""
    named = {0x22: b'\\"', 0x5C: b"\\\\", 0x08: b"\\b", 0x0C: b"\\f", 0x0A: b"\\n", 0x0D: b"\\r", 0x09: b"\\t"}
    return b'"' + b"".join(named.get(c) or (b"\\u00%02X" % c if c < 32 else bytes([c])) for c in data) + b'"'


@given(st.binary(max_size=64) | st.lists(st.sampled_from([b"\\", b"u", b"0", b"1a", b"\x1a", b"x"])).map(b"".join))
def test_json_strings_are_yajls(data: bytes) -> None:
    assert yajl_string(data) == _yajl_reference(data)


def test_usage_errors_exit_2(logdir) -> None:
    for args in (["-f", "%x"], ["-f", "%"], ["-D", "\\xq"], ["-o", "stored"], ["-s", "value=xml"]):
        status, out, err = consume(str(logdir), "-t", "mix", *args)
        assert status == 2 and out == b"", (args, err)
    status, _, err = consume(str(logdir / "nowhere"))
    assert status == 1 and "nowhere" in err
    status, out, err = consume(str(logdir), "-t", "nosuch*")
    assert (status, out) == (1, b"") and "no partition matching nosuch*" in err


# -- offline only ------------------------------------------------------------------------------------


def test_read_committed_skips_aborted_transactions(tmp_path) -> None:
    build_transactions(tmp_path / "logs" / "tx-0")
    fmt = ["-f", "%o %s\\n"]
    assert consume(str(tmp_path / "logs"), "-t", "tx", *fmt)[1] == b"0 p0\n1 a0\n2 a1\n3 c0\n4 p1\n7 p2\n"
    committed = consume(str(tmp_path / "logs" / "tx-0"), "--isolation", "read_committed", *fmt)[1]
    assert committed == b"0 p0\n3 c0\n4 p1\n7 p2\n"
    shown = consume(str(tmp_path / "logs"), "-t", "tx", "--show-control", "-f", "%o %K %S\\n")[1]
    assert b"5 4 6\n6 4 6\n" in shown  # the markers: a 4-byte key, a 6-byte value


def test_torn_tail_and_timestamps_outside_the_log(tmp_path, logdir) -> None:
    copy = tmp_path / "logs"
    shutil.copytree(logdir, copy)
    whole = consume(str(copy), "-t", "mix", "-p", "0", "-J")[1]
    segment = sorted((copy / "mix-0").glob("*.log"))[-1]
    data = segment.read_bytes()
    with open(segment, "ab") as f:
        f.write(data[:40])  # a batch header and no more: a write in progress
    status, torn, err = consume(str(copy), "-t", "mix", "-p", "0", "-J")
    assert status == 0 and torn == whole, err
    # magic 0 messages have no timestamp: the first record at or after 1 is the first v1 one
    assert consume(str(copy), "-t", "mix", "-p", "0", "-o", "s@1", "-J")[1] == b"".join(whole.splitlines(True)[8:])
    assert consume(str(copy), "-t", "mix", "-p", "0", "-o", "s@0", "-J")[1] == whole  # kcat: 0 is no start time
    assert consume(str(copy), "-t", "mix", "-p", "0", "-o", f"s@{T0 + 10**9}")[1] == b""
    # e@1 stops at the first record with a timestamp at or after 1: the v0 ones (none, %T 0) come before
    assert consume(str(copy), "-t", "mix", "-p", "0", "-o", "e@1", "-f", "%o %T\\n")[1] == b"".join(
        b"%d 0\n" % i for i in range(8))


def test_decode_errors_are_reported_and_reading_goes_on(logdir) -> None:
    status, out, err = consume(str(logdir), "-t", "other", "-s", "value=string", "-f", "%o:%s\\n")
    assert status == 1
    assert "Failed to format message in other [0] at offset" in err and "not UTF-8" in err
    assert out.count(b"\n") >= 40 - err.count("% ERROR")  # the others printed
    status, out, err = consume(str(logdir), "-t", "other", "-s", "value=string", "-J", "-c", "40")
    assert out.count(b"\n") == 40 and b'"payload_error":' in out


def test_json_decoded_values_are_embedded(tmp_path) -> None:
    log = Log.open(tmp_path / "logs" / "j-0", LogConfig())
    b = RecordBatchBuilder(2)
    b.append(b"k", b'{"a": [1, 2], "b": "x"}', timestamp=T0)
    b.append(b"k", b"plain", timestamp=T0)
    log.append(b.build())
    log.close()
    status, out, err = consume(str(tmp_path / "logs"), "-t", "j", "-J", "-s", "value=json", "-s", "key=string")
    lines = out.splitlines()
    assert lines[0].endswith(b'"key":"k","payload":{"a":[1,2],"b":"x"}}')
    assert b'"payload":null,"payload_error":"' in lines[1] and status == 1 and "offset 1" in err


def test_follow_reads_appends_rolls_and_retention(tmp_path) -> None:
    directory = tmp_path / "logs" / "live-0"
    log = Log.open(directory, LogConfig(segment_bytes=600))
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="")
    err = io.StringIO()
    _consume.FOLLOW_STOP.clear()
    result = []
    reader = threading.Thread(target=lambda: result.append(main(
        ["consume", str(tmp_path / "logs"), "--follow", "--poll-interval", "20", "-f", "%o %s\\n"], stdout=out, stderr=err)))

    def printed() -> bytes:
        out.flush()
        return out.buffer.getvalue()

    try:
        def write(i: int) -> None:
            b = RecordBatchBuilder(2)
            b.append(b"k", b"value-%03d" % i, timestamp=T0 + i)
            log.append(b.build())

        for i in range(5):
            write(i)
        reader.start()
        wait_until(lambda: printed().count(b"\n") == 5, 30, "the first records")
        for i in range(5, 60):  # several rolls
            write(i)
        wait_until(lambda: printed().count(b"\n") == 60, 30, "the appended records")
        assert len(log.segments) > 3
        log.delete_records(55)
        log.delete_old_segments()  # retention removes the segments below the new log start
        for i in range(60, 70):
            write(i)
        wait_until(lambda: printed().count(b"\n") == 70, 30, "records after retention")
    finally:
        _consume.FOLLOW_STOP.set()
        reader.join(scaled(30))
        log.close()
    assert not reader.is_alive() and result == [0], err.getvalue()
    assert printed() == b"".join(b"%d value-%03d\n" % (i, i) for i in range(70))


def test_follow_changes_nothing_while_a_log_is_written(tmp_path) -> None:
    """Checksums around a --follow run while another thread appends through a Log: the reader
    adds nothing (the directory changes only as the writer changes it)."""
    directory = tmp_path / "logs" / "w-0"
    log = Log.open(directory, LogConfig(segment_bytes=800))
    try:
        for i in range(30):
            b = RecordBatchBuilder(2)
            b.append(None, b"x%d" % i, timestamp=T0 + i)
            log.append(b.build())
        log.flush()
        _consume.FOLLOW_STOP.clear()
        out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="")
        reader = threading.Thread(target=main, args=(["consume", str(directory), "--follow", "--poll-interval", "10",
                                                      "-J"],), kwargs={"stdout": out, "stderr": io.StringIO()})
        before = digest(tmp_path)
        reader.start()
        wait_until(lambda: out.flush() or out.buffer.getvalue().count(b"\n") == 30, 30, "the records")
        after_read = digest(tmp_path)
        _consume.FOLLOW_STOP.set()
        reader.join(scaled(30))
        assert after_read == before == digest(tmp_path)
    finally:
        log.close()


@pytest.mark.parametrize("args", [
    [], ["-J", "-Z"], ["-o", "-3", "-f", "%h %k %s\\n"], ["--isolation", "read_committed", "--show-control"],
    ["-o", "s@0", "-o", f"e@{T0 + 100}"], ["-c", "3"], ["-t", "*", "-J"],
])
def test_every_mode_is_read_only(tmp_path, logdir, args) -> None:
    copy = tmp_path / "logs"
    shutil.copytree(logdir, copy)
    build_transactions(copy / "tx-0")
    before = digest(tmp_path)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-m", "kafkalog", "consume", str(copy), *args], capture_output=True, env=env,
                       timeout=scaled(60), check=False)
    assert r.returncode == 0, r.stderr
    assert digest(tmp_path) == before


def test_stored_offsets_are_the_groups_commits(broker, logdir) -> None:
    """``-o stored -G g`` starts where group g committed (read from ``__consumer_offsets`` of
    the log directory), as kcat's ``-o stored -X group.id=g`` does through the broker; a
    partition without a commit starts at the end (librdkafka's auto.offset.reset=largest)."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g",
                                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[confluent_kafka.TopicPartition("mix", 0, 17)], asynchronous=False)
    finally:
        consumer.close()
    served = broker.log_dir
    status, got, err = consume(str(served), "-t", "mix", "-p", "0", "-o", "stored", "-G", "g", "-f", "%o\\n")
    # (kcat commits what it read: it runs second)
    expected = kcat(broker, "mix", "-p", "0", "-o", "stored", "-X", "group.id=g", "-f", "%o\\n")
    assert expected.split(b"\n")[0] == b"17"
    assert (status, got) == (0, expected), err
    status, got, err = consume(str(served), "-t", "mix", "-p", "1", "-o", "stored", "-G", "g")
    assert (status, got) == (0, b"") and "no committed offset" in err



def test_a_corrupt_batch_stops_the_read_with_its_file_and_position(tmp_path, logdir) -> None:
    copy = tmp_path / "logs"
    shutil.copytree(logdir, copy)
    whole = consume(str(copy), "-t", "other", "-f", "%o\\n")[1].splitlines()
    segment = sorted((copy / "other-0").glob("*.log"))[-1]
    data = bytearray(segment.read_bytes())
    data[len(data) - 20] ^= 0xFF  # inside the last batch: its CRC no longer matches
    segment.write_bytes(bytes(data))
    status, out, err = consume(str(copy), "-t", "other", "-f", "%o\\n")
    assert status == 1
    assert str(segment) in err and "position" in err, err
    printed = out.splitlines()
    assert printed == whole[:len(printed)] and len(printed) < len(whole)


def test_progress_line_on_a_terminal(logdir) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    err = Tty()
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="")
    assert main(["consume", str(logdir), "-t", "*"], stdout=out, stderr=err) == 0
    assert "consume [" in err.getvalue() and err.getvalue().endswith("\r")  # drawn, then blanked
    status, _, err_text = consume(str(logdir), "-t", "*")  # not a terminal: nothing
    assert status == 0 and err_text == ""


def test_follow_ends_at_the_count_and_at_the_stop_time(tmp_path) -> None:
    """``--follow`` with ``-c`` ends once the count is printed, and with ``e@`` once every
    partition reached the stop time, both while the writer goes on."""
    directory = tmp_path / "logs" / "f-0"
    log = Log.open(directory, LogConfig(segment_bytes=700))
    _consume.FOLLOW_STOP.clear()
    runs: dict[str, tuple] = {}

    def run(name: str, *args: str) -> threading.Thread:
        def target() -> None:
            runs[name] = consume(str(tmp_path / "logs"), "--follow", "--poll-interval", "10", "-f", "%o\\n", *args)
        thread = threading.Thread(target=target)
        thread.start()
        return thread

    try:
        for i in range(3):
            b = RecordBatchBuilder(2)
            b.append(None, b"v", timestamp=T0 + i)
            log.append(b.build())
        threads = [run("count", "-c", "8"), run("stop", "-o", f"e@{T0 + 10}")]
        for i in range(3, 20):
            b = RecordBatchBuilder(2)
            b.append(None, b"v", timestamp=T0 + i)
            log.append(b.build())
        for t in threads:
            t.join(scaled(30))
            assert not t.is_alive()
    finally:
        _consume.FOLLOW_STOP.set()
        log.close()
    assert runs["count"][:2] == (0, b"".join(b"%d\n" % i for i in range(8)))
    assert runs["stop"][:2] == (0, b"".join(b"%d\n" % i for i in range(10)))


def test_ctrl_c_ends_follow_cleanly(logdir) -> None:
    """SIGINT (Ctrl-C) ends ``--follow`` with exit status 0 and no message, after what was read."""
    import signal

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    p = subprocess.Popen([sys.executable, "-m", "kafkalog", "consume", str(logdir), "-t", "other", "--follow",
                          "--poll-interval", "20", "-f", "%o\\n"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        assert p.stdout is not None
        lines = [p.stdout.readline() for _ in range(40)]  # every record, then it polls
        p.send_signal(signal.SIGINT)
        rest, err = p.communicate(timeout=scaled(30))
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0 and err == b"" and rest == b""
    assert lines == [b"%d\n" % i for i in range(40)]


@pytest.mark.parametrize("args", [
    ["-s", "key=i", "-s", "value=<hBs"], ["-s", "c$"], ["-s", "value=s", "-f", "%s|%k\\n"], ["-s", "key=Q", "-Z"],
    ["-s", "bB bB", "-K", "="], ["-s", "value=iI", "-K", "-"], ["-s", "value=>q$", "-J"], ["-s", "key=i", "-J", "-Z"],
], ids=" ".join)
def test_pack_formats_as_kcat(broker, logdir, args) -> None:
    """kcat's ``-s`` pack formats: the same output and the same error for a record that does not
    unpack. kcat stops there (exit status 1, unless -E); consume goes on with the next record."""
    r = subprocess.run([KCAT, "-b", broker.bootstrap, "-C", "-t", "mix", "-p", "0", "-e", "-q", *args],
                       capture_output=True, timeout=scaled(60), check=False)
    status, out, err = consume(str(logdir), "-t", "mix", "-p", "0", *args)
    expected = r.stdout.replace(b',"broker":0,', b',"broker":-1,')
    kcat_errors = [line.removesuffix(": terminating") for line in r.stderr.decode().splitlines()
                   if line.startswith("% ERROR")]
    if not kcat_errors:
        assert (status, out, err) == (0, expected, "")
        return
    assert r.returncode == 1 and len(kcat_errors) == 1
    assert out.startswith(expected) and len(out) > len(expected)
    assert err.splitlines()[0] == kcat_errors[0] and status == 1
    # the rest is what kcat -E prints (it goes on too)
    r = subprocess.run([KCAT, "-b", broker.bootstrap, "-C", "-t", "mix", "-p", "0", "-e", "-q", "-E", *args],
                       capture_output=True, timeout=scaled(60), check=False)
    assert out == r.stdout.replace(b',"broker":0,', b',"broker":-1,')
    assert err.splitlines() == [line for line in r.stderr.decode().splitlines() if line.startswith("% ERROR")]


def test_pack_format_errors_are_usage_errors(logdir) -> None:
    for spec, message in (("key=", "key pack-format must not be empty"), ("x", "Invalid token 'x' in key pack-format")):
        status, out, err = consume(str(logdir), "-t", "mix", "-s", spec)
        assert status == 2 and out == b"" and message in err


def test_order_timestamp_merges_partitions(tmp_path) -> None:
    """``--order timestamp``: the partitions merged by record timestamp (ties: the first
    partition), each in its offset order; -c counts in that order."""
    import random

    rng = random.Random(7)
    logdir = tmp_path / "logs"
    expected = []
    for partition in range(3):
        log = Log.open(logdir / f"m-{partition}", LogConfig(segment_bytes=2000))
        ts = T0
        for batch in range(30):
            b = RecordBatchBuilder(2, Compression.LZ4 if batch % 2 else Compression.NONE)
            for _ in range(rng.randint(1, 5)):
                ts += rng.randint(0, 20)
                b.append(None, b"x", timestamp=ts)
            log.append(b.build())
        for record in (r for s in log.segments for bt in s.log.batches() for r in bt.records()):
            expected.append((record.timestamp, partition, record.offset))
        log.close()
    expected.sort()
    lines = b"".join(b"%d %d %d\n" % e for e in expected)
    status, out, err = consume(str(logdir), "--order", "timestamp", "-f", "%T %p %o\\n")
    assert (status, err) == (0, "") and out == lines
    status, out, _ = consume(str(logdir), "--order", "timestamp", "-f", "%T %p %o\\n", "-c", "57", "-o", "-40")
    tail = sorted(e for e in expected if e[2] >= max(o for t, p, o in expected if p == e[1]) + 1 - 40)
    assert out == b"".join(b"%d %d %d\n" % e for e in tail[:57])
    status, out, _ = consume(str(logdir), "--order", "timestamp", "-J", "-o", f"e@{T0 + 200}")
    stamps = [int(line.split(b'"ts":')[1].split(b",")[0]) for line in out.splitlines()]
    assert stamps == sorted(stamps) and all(t < T0 + 200 for t in stamps)
