/* Compile-time stand-in for Yammer Metrics 2.2 (not packaged by Debian): Kafka's storage classes
 * create metrics in static initialisers; the benchmarked paths never record into them. */
package com.yammer.metrics.core;

public class MetricName {
    private final String mBeanName;

    public MetricName(String group, String type, String name, String scope, String mBeanName) {
        this.mBeanName = mBeanName;
    }

    public String getMBeanName() { return mBeanName; }
}
