/* Compile-time stand-in for Yammer Metrics 2.2 (not packaged by Debian): Kafka's storage classes
 * create metrics in static initialisers; the benchmarked paths never record into them. */
package com.yammer.metrics.core;

import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;

public class Timer implements Metric {
    public <T> T time(Callable<T> event) throws Exception { return event.call(); }
    public void update(long duration, TimeUnit unit) { }
}
