#!/usr/bin/env bash
# Builds the JVM anchor of benchmarks/bench_vs_kafka.py: KafkaLogBench.java (ours) compiled
# against Kafka's own classes, into benchmarks/jvm/build/ (ignored by git).
#
#   benchmarks/jvm/build.sh --kafka-home DIR      a Kafka installation: its libs/*.jar, nothing built
#   benchmarks/jvm/build.sh --kafka-src DIR       a Kafka 3.8 source tree
#   benchmarks/jvm/build.sh --kafka-git GITDIR [--ref 3.8.0]   a clone of apache/kafka (or a bare
#                                                 git dir, e.g. the one the fetch tool gives)
#
# From source, no Gradle or Maven: Kafka's message generator (generator/) is compiled and run on
# clients' message schemas, then javac compiles KafkaLogBench with the clients, storage,
# server-common and server sources on its source path, so only the classes it reaches are built.
# Third-party jars come from Debian (apt-get install default-jdk-headless liblz4-java
# libsnappy-java libzstd-jni-java libslf4j-java libjackson2-databind-java libargparse4j-java).
# Two stand-ins (standins/) fill what no Debian or PyPI package gives as Java: Yammer Metrics 2.2
# (metrics Kafka creates in static initialisers, never recorded into on these paths) and the one
# method of ClientTelemetryUtils the request classes reach (needs OpenTelemetry's Java protobufs).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="$HERE/build"
JARS="${KAFKALOG_JAVA_JARS:-/usr/share/java}"
kafka_home="" kafka_src="" kafka_git="" ref="3.8.0"
while [ $# -gt 0 ]; do
    case "$1" in
        --kafka-home) kafka_home="$2"; shift 2 ;;
        --kafka-src) kafka_src="$2"; shift 2 ;;
        --kafka-git) kafka_git="$2"; shift 2 ;;
        --ref) ref="$2"; shift 2 ;;
        -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
        *) echo "build.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
command -v javac >/dev/null || { echo "build.sh: no javac (install a JDK, e.g. default-jdk-headless)" >&2; exit 1; }
rm -rf "$OUT" && mkdir -p "$OUT/classes"

if [ -n "$kafka_home" ]; then
    [ -d "$kafka_home/libs" ] || { echo "build.sh: $kafka_home/libs not found: not a Kafka installation" >&2; exit 1; }
    javac -nowarn -d "$OUT/classes" -cp "$kafka_home/libs/*" "$HERE/KafkaLogBench.java"
    echo "$OUT/classes:$kafka_home/libs/*" > "$OUT/classpath"
    echo "built $OUT/classes against $kafka_home/libs"
    exit 0
fi

deps=""
for jar in slf4j-api lz4-java snappy-java zstd-jni jackson-databind jackson-core jackson-annotations argparse4j; do
    [ -f "$JARS/$jar.jar" ] || { echo "build.sh: $JARS/$jar.jar not found (Debian: see the header of this script)" >&2; exit 1; }
    deps="$deps:$JARS/$jar.jar"
done
deps="${deps#:}"

src="$OUT/src"
if [ -n "$kafka_git" ]; then
    mkdir -p "$src"
    git --git-dir="$kafka_git" archive "$ref" clients/src/main storage/src/main/java server-common/src/main/java \
        server/src/main/java generator/src/main | tar -x -C "$src"
elif [ -n "$kafka_src" ]; then
    src="$kafka_src"
else
    echo "build.sh: give --kafka-home, --kafka-src or --kafka-git (see --help)" >&2; exit 2
fi
[ -d "$src/clients/src/main/java" ] || { echo "build.sh: $src is not a Kafka source tree" >&2; exit 1; }

echo "compiling Kafka's message generator"
mkdir -p "$OUT/generator"
javac -nowarn -d "$OUT/generator" -cp "$deps" $(find "$src/generator/src/main/java" -name '*.java')
echo "generating the clients' message classes"
java -cp "$OUT/generator:$deps" org.apache.kafka.message.MessageGenerator -p org.apache.kafka.common.message \
    -o "$OUT/generated/org/apache/kafka/common/message" -i "$src/clients/src/main/resources/common/message" \
    -t ApiMessageTypeGenerator -m MessageDataGenerator JsonConverterGenerator >/dev/null
echo "compiling KafkaLogBench and the Kafka classes it reaches"
srcpath="$HERE/standins:$src/clients/src/main/java:$src/storage/src/main/java:$src/server-common/src/main/java"
srcpath="$srcpath:$src/server/src/main/java:$OUT/generated"
javac -nowarn -implicit:class -d "$OUT/classes" -sourcepath "$srcpath" -cp "$deps" "$HERE/KafkaLogBench.java" 2>&1 \
    | grep -v '^Note: ' || true
[ -f "$OUT/classes/KafkaLogBench.class" ] || { echo "build.sh: javac failed" >&2; exit 1; }
echo "$OUT/classes:$JARS/slf4j-api.jar:$JARS/slf4j-nop.jar:$JARS/lz4-java.jar:$JARS/snappy-java.jar:$JARS/zstd-jni.jar" > "$OUT/classpath"
[ -n "$kafka_git" ] && rm -rf "$src"
echo "built $(find "$OUT/classes" -name '*.class' | wc -l) classes into $OUT/classes (Kafka $ref)"
