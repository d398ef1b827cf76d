/*
 * kafkalog's JVM anchor: Kafka's own leader-append and decode paths, timed on the files the
 * Python benchmark generates (benchmarks/bench_vs_kafka.py runs this and prints both).
 *
 * Written for kafkalog against Kafka 3.8's classes (clients + storage); it calls them, it copies
 * nothing of theirs. Each mode prints one JSON object on stdout.
 *
 *   append FILE DIR WARMUP ROUNDS  leader append of every batch in FILE, one batch per call:
 *       UnifiedLog.analyzeAndValidateRecords' checks (re-stated here: that method is Scala and
 *       private), LogValidator.validateMessagesAndAssignOffsets, LogSegment.append (offset and
 *       time index entries every index.interval.bytes = 4096) into a fresh segment in DIR;
 *       beside it FileChannel.write of the same buffers (the JVM's raw write).
 *   append-pid FILE DIR WARMUP ROUNDS  the same for batches with producer ids (an idempotent
 *       producer's): between the validator and the segment write, UnifiedLog's
 *       analyzeAndValidateProducerState (duplicate check against the producer's last entry,
 *       ProducerStateManager.prepareUpdate, ProducerAppendInfo.append) and after the write
 *       ProducerStateManager.update and updateMapEndOffset, as UnifiedLog.append does.
 *   decode FILE WARMUP ROUNDS  MemoryRecords over FILE's bytes: every batch's CRC checked, every
 *       record's key and value copied into a byte[].
 *
 * FILE holds v2 batches as a producer sends them (base offset 0 each), uncompressed or each
 * compressed (the topic's compression.type is producer: the producer's codec is kept). Warm-up rounds (same
 * work, untimed) let the JIT compile before timing; every figure is the best of ROUNDS.
 */

import java.io.File;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.errors.CorruptRecordException;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.InvalidRecordException;
import org.apache.kafka.common.record.CompressionType;
import org.apache.kafka.common.record.FileRecords;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.MutableRecordBatch;
import org.apache.kafka.common.record.Record;
import org.apache.kafka.common.record.RecordBatch;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.utils.BufferSupplier;
import org.apache.kafka.common.utils.PrimitiveRef;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.server.common.MetadataVersion;
import org.apache.kafka.storage.internals.log.AppendOrigin;
import org.apache.kafka.storage.internals.log.LazyIndex;
import org.apache.kafka.storage.internals.log.LogSegment;
import org.apache.kafka.storage.internals.log.LogValidator;
import org.apache.kafka.storage.internals.log.ProducerAppendInfo;
import org.apache.kafka.storage.internals.log.ProducerStateEntry;
import org.apache.kafka.storage.internals.log.ProducerStateManager;
import org.apache.kafka.storage.internals.log.ProducerStateManagerConfig;
import org.apache.kafka.storage.internals.log.TransactionIndex;

public final class KafkaLogBench {
    private static final int MAX_MESSAGE_BYTES = 1048588;  // message.max.bytes default
    private static final int INDEX_INTERVAL_BYTES = 4096;  // index.interval.bytes default
    private static final int MAX_INDEX_SIZE = 10 * 1024 * 1024;  // segment.index.bytes default
    private static final TopicPartition TP = new TopicPartition("bench", 0);
    private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();

    private static final LogValidator.MetricsRecorder NO_METRICS = new LogValidator.MetricsRecorder() {
        public void recordInvalidMagic() { }
        public void recordInvalidOffset() { }
        public void recordInvalidSequence() { }
        public void recordInvalidChecksums() { }
        public void recordNoKeyCompactedTopic() { }
    };

    /** The batches of FILE as [position, size] pairs, read from each batch's length field. */
    private static int[][] frame(byte[] bytes) {
        List<int[]> out = new ArrayList<>();
        ByteBuffer b = ByteBuffer.wrap(bytes);
        int pos = 0;
        while (pos + 12 <= bytes.length) {
            int size = 12 + b.getInt(pos + 8);
            if (pos + size > bytes.length) throw new IllegalStateException("torn batch at " + pos);
            out.add(new int[] {pos, size});
            pos += size;
        }
        return out.toArray(new int[0][]);
    }

    /** UnifiedLog.analyzeAndValidateRecords' checks for a client append (3.8), returning the
     * source codec (the last compressed batch's, NONE when none is); the offsets are
     * LogValidator's to assign. */
    private static CompressionType analyze(MemoryRecords records) {
        long lastOffset = -1L;
        CompressionType source = CompressionType.NONE;
        for (MutableRecordBatch batch : records.batches()) {
            if (batch.magic() >= RecordBatch.MAGIC_VALUE_V2 && batch.baseOffset() != 0)
                throw new InvalidRecordException("baseOffset should be 0, is " + batch.baseOffset());
            if (lastOffset >= batch.lastOffset())
                throw new IllegalStateException("offsets not monotonic");  // requireOffsetsMonotonic is false for clients; kept cheap
            lastOffset = batch.lastOffset();
            if (batch.sizeInBytes() > MAX_MESSAGE_BYTES)
                throw new RecordTooLargeException("batch of " + batch.sizeInBytes() + " bytes");
            if (!batch.isValid())
                throw new CorruptRecordException("Record is corrupt (stored crc = " + batch.checksum() + ")");
            CompressionType codec = CompressionType.forId(batch.compressionType().id);
            if (codec != CompressionType.NONE)
                source = codec;
        }
        return source;
    }

    private static void deleteDir(File dir) throws IOException {
        File[] files = dir.listFiles();
        if (files != null) for (File f : files) Files.deleteIfExists(f.toPath());
        Files.deleteIfExists(dir.toPath());
    }

    /** One leader-append round into a fresh segment: nanoseconds per batch. */
    private static long[] appendRound(byte[] bytes, int[][] batches, File dir, boolean producers) throws IOException {
        deleteDir(dir);
        dir.mkdirs();
        // UnifiedLog's producer state (transaction.max.timeout.ms and producer.id.expiration.ms defaults).
        ProducerStateManager state = producers
            ? new ProducerStateManager(TP, dir, 900000, new ProducerStateManagerConfig(86400000, false), Time.SYSTEM)
            : null;
        FileRecords log = FileRecords.open(new File(dir, "00000000000000000000.log"));
        LogSegment segment = new LogSegment(log,
            LazyIndex.forOffset(new File(dir, "00000000000000000000.index"), 0L, MAX_INDEX_SIZE),
            LazyIndex.forTime(new File(dir, "00000000000000000000.timeindex"), 0L, MAX_INDEX_SIZE),
            new TransactionIndex(0L, new File(dir, "00000000000000000000.txnindex")),
            0L, INDEX_INTERVAL_BYTES, 0L, Time.SYSTEM);
        // Fresh copies (the validator assigns offsets in place), made before the clock starts.
        ByteBuffer[] buffers = new ByteBuffer[batches.length];
        for (int i = 0; i < batches.length; i++)
            buffers[i] = ByteBuffer.wrap(Arrays.copyOfRange(bytes, batches[i][0], batches[i][0] + batches[i][1]));
        long[] ns = new long[batches.length + 1];  // the last slot: the loop's thread CPU time
        PrimitiveRef.LongRef offsetCounter = PrimitiveRef.ofLong(0L);
        long cpu0 = THREADS.getCurrentThreadCpuTime();
        for (int i = 0; i < batches.length; i++) {
            long t0 = System.nanoTime();
            MemoryRecords records = MemoryRecords.readableRecords(buffers[i]);
            CompressionType source = analyze(records);
            // compression.type=producer (the default): the target codec is the producer's
            // (BrokerCompressionType.targetCompression), so a compressed batch is assigned in place
            LogValidator validator = new LogValidator(records, TP, Time.SYSTEM, source,
                Compression.of(source).build(), false, RecordBatch.MAGIC_VALUE_V2, TimestampType.CREATE_TIME,
                Long.MAX_VALUE, Long.MAX_VALUE, 0, AppendOrigin.CLIENT, MetadataVersion.IBP_3_8_IV0);
            LogValidator.ValidationResult result =
                validator.validateMessagesAndAssignOffsets(offsetCounter, NO_METRICS, BufferSupplier.NO_CACHING);
            Map<Long, ProducerAppendInfo> updated = producers ? analyzeProducers(state, result.validatedRecords) : null;
            if (updated == null && producers) {
                ns[i] = System.nanoTime() - t0;  // a duplicate: nothing written (not in these files)
                continue;
            }
            segment.append(offsetCounter.value - 1, result.maxTimestampMs, result.shallowOffsetOfMaxTimestamp,
                result.validatedRecords);
            if (producers) {
                for (ProducerAppendInfo info : updated.values()) state.update(info);
                state.updateMapEndOffset(offsetCounter.value);
            }
            ns[i] = System.nanoTime() - t0;
        }
        ns[batches.length] = THREADS.getCurrentThreadCpuTime() - cpu0;
        segment.close();
        return ns;
    }

    /** UnifiedLog.analyzeAndValidateProducerState for a client's data batches (3.8, a Scala
     * private method, re-stated here): null for a duplicate, else the producers' append infos. */
    private static Map<Long, ProducerAppendInfo> analyzeProducers(ProducerStateManager state, MemoryRecords records) {
        Map<Long, ProducerAppendInfo> updated = new HashMap<>();
        for (MutableRecordBatch batch : records.batches()) {
            if (!batch.hasProducerId()) continue;
            Optional<ProducerStateEntry> last = state.lastEntry(batch.producerId());
            if (last.isPresent() && last.get().findDuplicateBatch(batch).isPresent()) return null;
            ProducerAppendInfo info = updated.get(batch.producerId());
            if (info == null) {
                info = state.prepareUpdate(batch.producerId(), AppendOrigin.CLIENT);
                updated.put(batch.producerId(), info);
            }
            info.append(batch, Optional.empty());
        }
        return updated;
    }

    /** FileChannel.write of the same buffers, one call per batch: the JVM's raw write. */
    private static long[] writeRound(byte[] bytes, int[][] batches, File dir) throws IOException {
        deleteDir(dir);
        dir.mkdirs();
        ByteBuffer[] buffers = new ByteBuffer[batches.length];
        for (int i = 0; i < batches.length; i++)
            buffers[i] = ByteBuffer.wrap(bytes, batches[i][0], batches[i][1]);
        long[] ns = new long[batches.length + 1];
        long cpu0 = THREADS.getCurrentThreadCpuTime();
        try (FileChannel ch = FileChannel.open(new File(dir, "raw.log").toPath(),
                StandardOpenOption.CREATE, StandardOpenOption.WRITE, StandardOpenOption.APPEND)) {
            for (int i = 0; i < batches.length; i++) {
                long t0 = System.nanoTime();
                while (buffers[i].hasRemaining()) ch.write(buffers[i]);
                ns[i] = System.nanoTime() - t0;
            }
        }
        ns[batches.length] = THREADS.getCurrentThreadCpuTime() - cpu0;
        return ns;
    }

    private static long sum(long[] ns, int from) {
        long s = 0;
        for (int i = from; i < ns.length; i++) s += ns[i];
        return s;
    }

    /** Per-batch microseconds of the best round: over all batches and from the 3rd on (wall
     * clock), and the thread's CPU time a batch (user + system: what a loaded machine does not
     * inflate), from each round's last slot. */
    private static String perBatch(String name, List<long[]> rounds) {
        long bestAll = Long.MAX_VALUE, bestFrom3 = Long.MAX_VALUE, bestCpu = Long.MAX_VALUE;
        int n = rounds.get(0).length - 1;
        for (long[] slots : rounds) {
            long[] ns = Arrays.copyOf(slots, n);
            bestAll = Math.min(bestAll, sum(ns, 0));
            bestFrom3 = Math.min(bestFrom3, sum(ns, Math.min(2, n)));
            bestCpu = Math.min(bestCpu, slots[n]);
        }
        return String.format("\"%s\": {\"us_per_batch\": %.3f, \"us_per_batch_from_3rd\": %.3f, \"seconds\": %.6f, "
            + "\"cpu_us_per_batch\": %.3f}", name, bestAll / 1e3 / n, bestFrom3 / 1e3 / Math.max(1, n - 2), bestAll / 1e9,
            bestCpu / 1e3 / n);
    }

    private static void append(String file, String dirName, int warmup, int rounds, boolean producers) throws IOException {
        byte[] bytes = Files.readAllBytes(Path.of(file));
        int[][] batches = frame(bytes);
        File dir = new File(dirName);
        for (int r = 0; r < warmup; r++) { appendRound(bytes, batches, dir, producers); writeRound(bytes, batches, dir); }
        List<long[]> appends = new ArrayList<>(), writes = new ArrayList<>();
        for (int r = 0; r < rounds; r++) {  // interleaved, as the Python side does
            appends.add(appendRound(bytes, batches, dir, producers));
            writes.add(writeRound(bytes, batches, dir));
        }
        deleteDir(dir);
        System.out.println("{\"mode\": \"" + (producers ? "append-pid" : "append") + "\", \"batches\": " + batches.length + ", \"bytes\": " + bytes.length
            + ", " + perBatch("kafka_append", appends) + ", " + perBatch("jvm_write", writes) + "}");
    }

    private static long decodeRound(byte[] bytes, long[] count) {
        MemoryRecords records = MemoryRecords.readableRecords(ByteBuffer.wrap(bytes));
        long checksum = 0, n = 0;
        for (MutableRecordBatch batch : records.batches()) {
            batch.ensureValid();
            for (Record record : batch) {
                if (record.hasKey()) {
                    byte[] key = new byte[record.keySize()];
                    record.key().get(key);
                    checksum += key.length;
                }
                if (record.hasValue()) {
                    byte[] value = new byte[record.valueSize()];
                    record.value().get(value);
                    checksum += value.length == 0 ? 0 : value[value.length - 1];
                }
                n++;
            }
        }
        count[0] = n;
        return checksum;
    }

    private static void decode(String file, int warmup, int rounds) throws IOException {
        byte[] bytes = Files.readAllBytes(Path.of(file));
        long[] count = new long[1];
        long sink = 0;
        for (int r = 0; r < warmup; r++) sink += decodeRound(bytes, count);
        long best = Long.MAX_VALUE;
        for (int r = 0; r < rounds; r++) {
            long t0 = System.nanoTime();
            sink += decodeRound(bytes, count);
            best = Math.min(best, System.nanoTime() - t0);
        }
        System.out.println(String.format("{\"mode\": \"decode\", \"records\": %d, \"bytes\": %d, \"seconds\": %.6f, "
            + "\"records_per_s\": %.1f, \"sink\": %d}", count[0], bytes.length, best / 1e9, count[0] / (best / 1e9), sink));
    }

    public static void main(String[] args) throws Exception {
        if (args.length >= 5 && (args[0].equals("append") || args[0].equals("append-pid"))) {
            append(args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]), args[0].equals("append-pid"));
        } else if (args.length >= 4 && args[0].equals("decode")) {
            decode(args[1], Integer.parseInt(args[2]), Integer.parseInt(args[3]));
        } else {
            System.err.println("usage: KafkaLogBench append|append-pid FILE DIR WARMUP ROUNDS | decode FILE WARMUP ROUNDS");
            System.exit(2);
        }
    }
}
