// A kafkajs consumer-group member for tests/broker/test_groups_clients.py (the same JSON-lines protocol
// as group_member.py):  node group_member.js kafkajs BOOTSTRAP TOPIC GROUP SESSION_MS
// stdout: {"assigned": [...]}, {"msg": [partition, offset, value]}, {"committed": true}, {"closed": true}
// stdin:  "commit" (commit what was consumed), "close" (leave the group and exit)
const { Kafka, logLevel } = require("kafkajs");
const readline = require("readline");

const [, , , bootstrap, topic, group, session] = process.argv;
const emit = (event) => process.stdout.write(JSON.stringify(event) + "\n");
const kafka = new Kafka({ brokers: [bootstrap], clientId: "kafkajs-member", logLevel: logLevel.NOTHING });
const consumer = kafka.consumer({
  groupId: group, sessionTimeout: Number(session), heartbeatInterval: 200, rebalanceTimeout: 30000,
  maxWaitTimeInMs: 50, retry: { retries: 10, initialRetryTime: 100 },
});
const next = new Map(); // partition -> next offset to commit

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
    if (line.trim() === "commit") {
      await consumer.commitOffsets([...next].map(([partition, offset]) => ({ topic, partition, offset })));
      emit({ committed: true });
    } else if (line.trim() === "close") {
      break;
    }
  }
  await consumer.disconnect();
  emit({ closed: true });
  process.exit(0);
}

main().catch((e) => {
  emit({ error: String(e && e.stack ? e.stack : e) });
  process.exit(1);
});
