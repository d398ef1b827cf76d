/* Compile-time stand-in for the one method of Kafka's ClientTelemetryUtils that the request
 * classes reach (PushTelemetryRequest.metricsData). The real class needs the OpenTelemetry
 * protobuf classes, which no Debian or PyPI package gives as Java; client telemetry (KIP-714) is
 * not on any benchmarked path, so this is never called. Listed first on the source path, it
 * shadows the real class for this build only. */
package org.apache.kafka.common.telemetry.internals;

import java.nio.ByteBuffer;

import org.apache.kafka.common.record.CompressionType;

public final class ClientTelemetryUtils {
    private ClientTelemetryUtils() { }

    public static ByteBuffer decompress(byte[] metrics, CompressionType compressionType) {
        throw new UnsupportedOperationException("client telemetry is not part of kafkalog's JVM benchmark build");
    }
}
