#!/usr/bin/env bash
# `npm run test:e2e:kind`: the end-to-end scenario (test/e2e/scenario.ts) on a kind cluster, the
# same scenario file `npm run test:e2e` runs on the test environment's own node. This script makes
# only the cluster-specific parts: the cluster, the images, a Kafka broker in the cluster and a
# ReadWriteMany deep-storage claim (kind's default StorageClass is ReadWriteOnce only).
#
# Container engine: ENGINE=docker|podman, else Docker when its daemon answers, else podman (kind's
# podman provider, rootful). Images: when a registry answers, kind's own node image,
# apache/kafka:3.9.2 and the Dockerfile built on node:24-bookworm-slim; when none does (or
# STREAMCUBE_KIND_LOCAL_IMAGES=1), every image is built here by images/build.sh, from the test
# environment's cache (`npm run env:install -- --node` fills it; this script runs it).
#
# Everything it starts (the cluster, its containers, volumes and network) is removed at the end,
# also on failure or Ctrl-C; images stay as a cache. KEEP_CLUSTER=1 keeps the cluster to look at.
set -euo pipefail
cd "$(dirname "$0")/../../.."
root=$PWD
here=$root/test/e2e/kind
cluster=${CLUSTER:-streamcube-e2e}
namespace=${STREAMCUBE_E2E_NAMESPACE:-streamcube-e2e}
cache=${STREAMCUBE_CACHE_DIR:-$HOME/.cache/streamcube}
kind_version=v0.33.0
t0=$(date +%s)
step() { printf '\n[e2e-kind %s +%ss] %s\n' "$(date +%T)" "$(($(date +%s) - t0))" "$*"; }
export PATH="$root/node_modules/.bin:$PATH"

# The engine.
if [[ -z ${ENGINE:-} ]]; then
  if command -v docker > /dev/null && docker info > /dev/null 2>&1; then
    ENGINE=docker
  elif command -v podman > /dev/null; then
    ENGINE=podman
  elif [[ $(id -u) == 0 ]] && command -v apt-get > /dev/null; then
    # Its own set-up on a fresh Debian machine, as .ci/run does it: podman (rootful, runc).
    echo 'neither a Docker daemon nor podman: installing podman and runc from Debian' >&2
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q podman runc
    ENGINE=podman
  else
    echo 'neither a Docker daemon nor podman: install one (Debian: apt-get install podman runc)' >&2
    exit 1
  fi
fi
export ENGINE
if [[ $ENGINE == podman ]]; then
  export KIND_EXPERIMENTAL_PROVIDER=podman
  # This machine's sandbox: runc instead of crun, rlimits that it can set (images/containers.conf).
  export CONTAINERS_CONF=${CONTAINERS_CONF:-$here/images/containers.conf}
fi

# Images: from the registries when they answer, else built here.
local_images=${STREAMCUBE_KIND_LOCAL_IMAGES:-}
kafka_image=apache/kafka:3.9.2
if [[ -z $local_images ]]; then
  step "is a registry there? ($ENGINE pull $kafka_image)"
  timeout 120 $ENGINE pull -q "docker.io/$kafka_image" > /dev/null 2>&1 || local_images=1
fi
# The tools: kind from the Go module proxy, kubectl and helm from the test environment's cache.
step "tools (engine: $ENGINE)"
if [[ -n $local_images ]]; then
  # --node: the node's binaries and the streamcube image; Kafka 3.9.2: the broker's jars.
  STREAMCUBE_KAFKA_VERSION=3.9.2 npm run -s env:install -- --node
else
  npm run -s env:install
fi
k8sbin=$(ls -d "$cache"/bin/k8s-v*-etcd-v* | sort | tail -1)
helm=$(ls -d "$cache"/bin/helm-v*/helm | sort | tail -1)
kubectl=$k8sbin/kubectl
kind=$(command -v kind || true)
if [[ -z $kind ]]; then
  kind=$cache/kind/bin/kind-$kind_version
  if [[ ! -x $kind ]]; then
    step "building kind $kind_version (Go module proxy)"
    gobin=$(mktemp -d)
    CGO_ENABLED=0 GOBIN=$gobin go install -p 1 "sigs.k8s.io/kind@$kind_version"
    mkdir -p "$(dirname "$kind")" && mv "$gobin/kind" "$kind" && rm -rf "$gobin"
  fi
fi
kubeconfig=$(mktemp -t "kind-$cluster-kubeconfig.XXXXXX")
export KUBECONFIG=$kubeconfig

# Cleanup, also on failure or interrupt: the cluster (its containers and volumes), kind's network
# when nothing else uses it, the path created for kind's /lib/modules mount. Images are kept.
made_modules=
archive=
child=
# Long steps run through `run`: in the background, waited for. bash acts on a Ctrl-C only once the
# foreground command ends, and not at all when that command caught it and exited normally (as
# `kind create cluster` does); `wait` returns at once instead. The step is then stopped here.
run() {
  "$@" &
  child=$!
  local status=0
  wait "$child" || status=$?
  child=
  return "$status"
}
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  if [[ -n $child ]]; then
    pkill -TERM -P "$child" 2> /dev/null || true
    kill "$child" 2> /dev/null || true
    wait "$child" 2> /dev/null || true
  fi
  if [[ -n ${KEEP_CLUSTER:-} ]]; then
    echo "KEEP_CLUSTER: cluster $cluster kept (KUBECONFIG=$kubeconfig); '$kind delete cluster --name $cluster' removes it"
    exit "$status"
  fi
  step "cleanup"
  "$kind" delete cluster --name "$cluster" || true
  $ENGINE ps -aq --filter "label=io.x-k8s.kind.cluster=$cluster" | xargs -r $ENGINE rm -f -v || true
  $ENGINE rm -f streamcube-kind-node-build > /dev/null 2>&1 || true
  if [[ -z $($ENGINE ps -aq --filter network=kind 2> /dev/null) ]]; then
    $ENGINE network rm kind > /dev/null 2>&1 || true
  fi
  [[ -n $made_modules ]] && rmdir /lib/modules 2> /dev/null || true
  rm -f "$kubeconfig" ${archive:+"$archive"}
  step "done (exit $status)"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# kind mounts the host's /lib/modules into the node read-only; some machines (this sandbox) have none.
if [[ ! -e /lib/modules ]]; then
  mkdir /lib/modules && made_modules=1
fi

create_args=(--name "$cluster" --wait 180s --kubeconfig "$kubeconfig")
image=streamcube:e2e
if [[ -n $local_images ]]; then
  step 'no registry: building the images here (images/build.sh)'
  run bash "$here/images/build.sh"
  kafka_image=localhost/streamcube-kafka:3.9.2
  create_args+=(--config "$here/kind-config.yaml" --image "localhost/streamcube-kind-node:$(basename "$k8sbin" | cut -d- -f2)")
  # `npm run env:install -- --node` built the streamcube image from the Dockerfile, on a Node.js
  # 24 base made from Debian packages, and saved it.
  $ENGINE load -q -i "$cache/images/streamcube.tar" > /dev/null
  image=localhost/streamcube:dev
else
  step "image: $ENGINE build of the Dockerfile"
  $ENGINE build -t "$image" .
  [[ $ENGINE == podman ]] && image=localhost/$image
fi

step "kind cluster $cluster"
"$kind" delete cluster --name "$cluster" > /dev/null 2>&1 || true
run "$kind" create cluster "${create_args[@]}"
node=$cluster-control-plane

step "images into the node"
load() {
  archive=$(mktemp -t kind-image.XXXXXX)
  $ENGINE save -o "$archive" "$1" > /dev/null 2>&1 || { rm -f "$archive" && $ENGINE save -o "$archive" "$1"; }
  run "$kind" load image-archive "$archive" --name "$cluster"
  rm -f "$archive"
}
load "$image"
[[ -n $local_images ]] && load "$kafka_image"

step 'Kafka (namespace default)'
sed "s#image: apache/kafka:3.9.2#image: $kafka_image#" "$here/kafka.yaml" | "$kubectl" -n default apply -f -
run "$kubectl" -n default rollout status statefulset/kafka --timeout=300s

step "deep storage in namespace $namespace"
# A hostPath volume gets no fsGroup ownership: let the receivers (uid 1000) write to it.
$ENGINE exec "$node" sh -c 'mkdir -p /var/lib/streamcube-deep && chmod 777 /var/lib/streamcube-deep'
"$kubectl" create namespace "$namespace" --dry-run=client -o yaml | "$kubectl" apply -f -
"$kubectl" -n "$namespace" apply -f "$here/deep-storage.yaml"

step 'scenario'
# kind runs the control plane and CoreDNS on the node (850m of CPU requests), which the test
# environment's node does not: on a 2-core machine the chart's receivers (4 x 250m) do not all fit,
# so they ask for less here. STREAMCUBE_KIND_HELM_ARGS replaces this.
kind_helm_args=${STREAMCUBE_KIND_HELM_ARGS---set receivers.resources.requests.cpu=100m}
[[ -d node_modules ]] || npm ci --no-audit --no-fund
# The pool's scale steps (2 -> 3 -> 2 sets under a second producer) run on the test environment's
# node (npm run test:e2e), not here: CI's time.
STREAMCUBE_E2E_POOL_SCALE=${STREAMCUBE_E2E_POOL_SCALE-0} \
  STREAMCUBE_E2E_NAMESPACE="$namespace" \
  STREAMCUBE_E2E_KUBECTL="$kubectl" \
  STREAMCUBE_E2E_HELM="$helm" \
  STREAMCUBE_E2E_BROKERS=kafka-0.kafka.default.svc.cluster.local:9092 \
  STREAMCUBE_E2E_IMAGE="$image" \
  STREAMCUBE_E2E_HELM_ARGS="--set deepStorage.existingClaim=streamcube-deep-storage $kind_helm_args" \
  run node test/e2e/scenario.ts
