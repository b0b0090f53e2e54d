#!/usr/bin/env bash
# End-to-end run on a kind cluster, for machines with Docker, kind, kubectl and helm: build the
# image, install the chart, apply a cube, produce events, check the answer, move every partition
# to one replica set and check again. CI, which has no Docker, runs the same scenarios against a
# local etcd + kube-apiserver instead (test/integration/operator-*.test.ts).
set -euo pipefail
cd "$(dirname "$0")/../../.."
cluster=${CLUSTER:-streamcube-e2e}
here=test/e2e/kind
step() { printf '\n[e2e %s] %s\n' "$(date +%T)" "$*"; }

step "kind cluster $cluster"
kind get clusters | grep -qx "$cluster" || kind create cluster --name "$cluster" --wait 120s
kubectl config use-context "kind-$cluster"

step 'image'
docker build -t streamcube:e2e .
kind load docker-image streamcube:e2e --name "$cluster"

step 'Kafka'
kubectl apply -f "$here/kafka.yaml"
kubectl rollout status statefulset/kafka --timeout=300s
kubectl exec kafka-0 -- /opt/kafka/bin/kafka-topics.sh --bootstrap-server localhost:9092 \
  --create --if-not-exists --topic orders --partitions 4

step 'streamcube (helm)'
kubectl apply -f "$here/deep-storage.yaml"
helm upgrade --install sc deploy/helm/streamcube --wait --timeout 5m \
  --set image.repository=streamcube --set image.tag=e2e --set image.pullPolicy=Never \
  --set deepStorage.existingClaim=streamcube-deep-storage \
  --set 'receivers.replicaSets[0].name=rs-a' --set 'receivers.replicaSets[1].name=rs-b'

step 'cube'
kubectl apply -f "$here/cube.yaml"
kubectl wait cube/orders --for=condition=Ready --timeout=180s

step 'produce 4000 events'
node -e '
  for (let i = 0; i < 4000; i++)
    console.log(JSON.stringify({ ts: Date.UTC(2026, 0, 1) + i * 100, country: ["de","fr","jp","us"][i % 4], device: "web", price: 1 }));
' | kubectl exec -i kafka-0 -- /opt/kafka/bin/kafka-console-producer.sh --bootstrap-server localhost:9092 --topic orders

token=$(kubectl get secret sc-admin-token -o jsonpath='{.data.token}' | base64 -d)
count() {
  # One receiver per replica set answers for its partitions; their sum is the whole cube.
  local total=0
  for pod in sc-rs-a-0 sc-rs-b-0; do
    n=$(kubectl exec "$pod" -- node -e "
      fetch('http://127.0.0.1:8080/v1/cubes/orders/query', { method: 'POST', headers: { authorization: 'Bearer $token' }, body: '{}' })
        .then((r) => r.json()).then((a) => console.log(a.rows?.[0]?.[0] ?? 0)).catch(() => console.log(0));")
    total=$((total + n))
  done
  echo "$total"
}
step 'wait for 4000 events across the replica sets'
for _ in $(seq 60); do [ "$(count)" = 4000 ] && break; sleep 2; done
[ "$(count)" = 4000 ] || { echo "expected 4000 events, got $(count)"; kubectl describe cube orders; exit 1; }

step 'move every partition to rs-b'
kubectl patch cube orders --type merge -p '{"spec":{"replicaSets":["rs-b"]}}'
kubectl wait cube/orders --for=jsonpath='{.status.assignment.rs-b}'='[0,1,2,3]' --timeout=180s
kubectl describe cube orders | tail -20

step 'done: the cube is served by rs-b; rs-a handed its segments off to deep storage'
