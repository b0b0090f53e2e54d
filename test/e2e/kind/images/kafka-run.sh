#!/bin/bash
# Entry point of localhost/streamcube-kafka: a KRaft broker configured like the apache/kafka image,
# from KAFKA_* variables (KAFKA_NODE_ID=1 is node.id=1; '__' stands for '_', '___' for '-').
set -euo pipefail
props=/var/lib/kafka/server.properties
{
  echo "log.dirs=/var/lib/kafka/data"
  env | grep '^KAFKA_' | grep -v '^KAFKA_HEAP_OPTS=' | while IFS='=' read -r name value; do
    key=${name#KAFKA_}
    key=$(echo "$key" | sed -e 's/___/-/g' -e 's/__/@/g' -e 's/_/./g' -e 's/@/_/g' | tr '[:upper:]' '[:lower:]')
    echo "$key=$value"
  done
} > "$props"
cp=$(echo /opt/kafka/libs/*.jar | tr ' ' ':')
java=(java ${KAFKA_HEAP_OPTS:--Xms256m -Xmx512m} -XX:+UseG1GC -Djava.awt.headless=true
  -Dlog4j.configuration=file:/opt/kafka/log4j.properties -cp "$cp")
if [[ ! -e /var/lib/kafka/data/meta.properties ]]; then
  "${java[@]}" kafka.tools.StorageTool format -t "${CLUSTER_ID:-5L6g3nShT-eMCtK--X86sw}" -c "$props"
fi
exec "${java[@]}" kafka.Kafka "$props"
