/* Compile-time stand-in for Yammer Metrics 2.2 (not packaged by Debian): Kafka's storage classes
 * create metrics in static initialisers; the benchmarked paths never record into them. */
package com.yammer.metrics.reporting;

import com.yammer.metrics.core.Metric;
import com.yammer.metrics.core.MetricName;
import com.yammer.metrics.core.MetricsRegistry;

public class JmxReporter {
    private final MetricsRegistry registry;

    public JmxReporter(MetricsRegistry registry) { this.registry = registry; }
    public void start() { }
    public void shutdown() { }
    public void onMetricAdded(MetricName name, Metric metric) { }
    public void onMetricRemoved(MetricName name) { }
    protected MetricsRegistry getMetricsRegistry() { return registry; }
}
