/* Compile-time stand-in for Yammer Metrics 2.2 (not packaged by Debian): Kafka's storage classes
 * create metrics in static initialisers; the benchmarked paths never record into them. */
package com.yammer.metrics.core;

public class Histogram implements Metric {
    public void update(int value) { }
    public void update(long value) { }
}
