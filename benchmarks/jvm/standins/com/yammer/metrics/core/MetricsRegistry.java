/* Compile-time stand-in for Yammer Metrics 2.2 (not packaged by Debian): Kafka's storage classes
 * create metrics in static initialisers; the benchmarked paths never record into them. */
package com.yammer.metrics.core;

import java.util.Collections;
import java.util.Map;
import java.util.concurrent.TimeUnit;

public class MetricsRegistry {
    public <T> Gauge<T> newGauge(MetricName name, Gauge<T> metric) { return metric; }
    public Meter newMeter(MetricName name, String eventType, TimeUnit unit) { return new Meter(); }
    public Histogram newHistogram(MetricName name, boolean biased) { return new Histogram(); }
    public Timer newTimer(MetricName name, TimeUnit durationUnit, TimeUnit rateUnit) { return new Timer(); }
    public void removeMetric(MetricName name) { }
    public Map<MetricName, Metric> allMetrics() { return Collections.emptyMap(); }
}
