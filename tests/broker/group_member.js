// A kafkajs consumer-group member for tests/broker/test_groups_clients.py (the same JSON-lines protocol
// as group_member.py):  node group_member.js kafkajs BOOTSTRAP TOPIC GROUP SESSION_MS
// stdout: {"assigned": [...]}, {"msg": [partition, offset, value]}, {"committed": true}, {"closed": true}
// stdin:  "commit" (commit what was consumed), "close" (leave the group and exit),
//         "produce START COUNT PARTITIONS" (tests/broker/test_cluster_clients.py: values mSTART.. to
//         partition i % PARTITIONS, acks=all and idempotent, in the background; then
//         {"produced": {"acked": [...], "failed": [...]}}). A commit that fails writes
//         {"commit_failed": "why"}; one that succeeds {"committed": {partition: offset}}.
const { Kafka, logLevel } = require("kafkajs");
const readline = require("readline");

const [, , , bootstrap, topic, group, session] = process.argv;
const emit = (event) => process.stdout.write(JSON.stringify(event) + "\n");
// KAFKAJS_LOG_LEVEL=DEBUG (or INFO, WARN, ERROR) writes kafkajs's log to stderr, to see why a test fails
const logCreator = () => ({ namespace, level, log }) =>
  process.stderr.write(JSON.stringify({ namespace, level, ...log }) + "\n");
const kafka = new Kafka({
  brokers: bootstrap.split(","), clientId: "kafkajs-member", logCreator,
  logLevel: logLevel[process.env.KAFKAJS_LOG_LEVEL || "NOTHING"],
});
const consumer = kafka.consumer({
  groupId: group, sessionTimeout: Number(session), heartbeatInterval: 200, rebalanceTimeout: 30000,
  // kafkajs retries a fetch from a broker that is gone (ECONNREFUSED) without refreshing its metadata
  // until the retries run out, then restarts the consumer (kafkajs issues 132, 1439): short retries
  // make that restart come in seconds rather than minutes
  maxWaitTimeInMs: 50, retry: { retries: 10, initialRetryTime: 100, maxRetryTime: 1000 },
});
const next = new Map(); // partition -> next offset to commit
const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, retry: { retries: 30, initialRetryTime: 100 } });

async function produce(start, count, partitions) {
  const acked = [];
  const failed = [];
  await producer.connect();
  // one send per message: its own retries (NOT_LEADER_OR_FOLLOWER, a broker gone) and its own outcome
  for (let i = start; i < start + count; i++) {
    try {
      await producer.send({ topic, acks: -1, messages: [{ value: `m${i}`, partition: i % partitions }] });
      acked.push(i);
    } catch (e) {
      failed.push(i);
    }
  }
  emit({ produced: { acked, failed } });
}

consumer.on(consumer.events.GROUP_JOIN, (e) => {
  const partitions = (e.payload.memberAssignment[topic] || []).slice().sort((a, b) => a - b);
  emit({ assigned: partitions });
});

async function main() {
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      emit({ msg: [partition, Number(message.offset), message.value.toString()] });
      next.set(partition, (BigInt(message.offset) + 1n).toString());
    },
  });
  const lines = readline.createInterface({ input: process.stdin });
  for await (const line of lines) {
    const words = line.trim().split(/\s+/);
    if (words[0] === "commit") {
      const offsets = Object.fromEntries(next);
      try {
        await consumer.commitOffsets(Object.entries(offsets).map(([partition, offset]) =>
          ({ topic, partition: Number(partition), offset })));
        emit({ committed: Object.fromEntries(Object.entries(offsets).map(([p, o]) => [p, Number(o)])) });
      } catch (e) {
        emit({ commit_failed: String(e) });
      }
    } else if (words[0] === "produce" && words.length === 4) {
      produce(Number(words[1]), Number(words[2]), Number(words[3]))
        .catch((e) => emit({ error: String(e && e.stack ? e.stack : e) }));
    } else if (line.trim() === "close") {
      break;
    }
  }
  await consumer.disconnect();
  await producer.disconnect();
  emit({ closed: true });
  process.exit(0);
}

main().catch((e) => {
  emit({ error: String(e && e.stack ? e.stack : e) });
  process.exit(1);
});
