#!/usr/bin/env bash
# Builds, without any container registry, every image a kind cluster and the e2e need, into the
# local store of ENGINE (podman or docker):
#   localhost/streamcube-kind-base:v0.33.0   kind's base image (images/base of kind v0.33.0)
#   localhost/kind/{kube-apiserver,kube-controller-manager,kube-scheduler,kube-proxy}:v1.35.4,
#   localhost/kind/etcd:3.6.5-0, localhost/kind/coredns:v1.13.1, localhost/kind/pause:3.10
#                                             what kubeadm runs (kind-config.yaml names the repository)
#   localhost/streamcube-kind-node:v1.35.4   the node image: base + kubeadm/kubelet/kubectl + the
#                                             images above imported into its containerd
#   localhost/streamcube-kafka:3.9.2         a KRaft broker from the Kafka distribution in the cache
# Images that exist are kept (the cache); REBUILD=1 rebuilds them all.
#
# Binaries come from the test environment's cache (`npm run env:install -- --node` builds
# kube-apiserver, kubelet, …, containerd and the CNI plugins from the Go module proxy and the pause
# image from a C program); kubeadm and CoreDNS build here from the Go module proxy, and the root
# filesystems from Debian with debootstrap.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ENGINE=${ENGINE:-podman}
cache=${STREAMCUBE_CACHE_DIR:-$HOME/.cache/streamcube}
kindcache=$cache/kind
kind_version=v0.33.0
k8s=v1.35.4
etcd=v3.6.5
coredns=v1.13.1
kafka=3.9.2
k8sbin=$cache/bin/k8s-$k8s-etcd-$etcd
containerdbin=$cache/bin/containerd-v2.4.2
cnibin=$cache/bin/cni-plugins-v1.10.0
mkdir -p "$kindcache/bin"
say() { printf '[kind-images %s] %s\n' "$(date +%T)" "$*" >&2; }
has() { [[ -z ${REBUILD:-} ]] && $ENGINE image inspect "$1" > /dev/null 2>&1; }
build() { # build IMAGE CONTAINERFILE CONTEXT [ARGS…]
  local image=$1 file=$2 context=$3
  shift 3
  say "building $image"
  local isolation=()
  [[ $ENGINE == podman ]] && isolation=(--isolation=chroot)
  $ENGINE build "${isolation[@]}" -q -t "$image" -f "$file" "$@" "$context" > /dev/null
}

for f in "$k8sbin/kubelet" "$containerdbin/containerd" "$cnibin/bridge" "$cache/images/pause.tar"; do
  [[ -e $f ]] || {
    echo "missing $f: run 'npm run env:install -- --node' first" >&2
    exit 1
  }
done

mirror() {
  sed -n 's#^URIs:[[:space:]]*\([^[:space:]]*/debian\)[[:space:]]*$#\1#p' \
    /etc/apt/sources.list.d/debian.sources 2> /dev/null | head -1 | grep . ||
    sed -n 's#^deb[[:space:]]\+\([^[:space:]]*/debian\)[[:space:]].*#\1#p' /etc/apt/sources.list | head -1
}
rootfs() { # rootfs NAME PACKAGES: a bookworm root filesystem as a tar, once
  local tar=$kindcache/rootfs-$1.tar
  if [[ ! -e $tar ]]; then
    say "debootstrap bookworm ($1: $2)"
    local dir=$kindcache/rootfs-$1
    rm -rf "$dir"
    debootstrap --variant=minbase "--include=$2" bookworm "$dir" "$(mirror)" > "$kindcache/debootstrap-$1.log"
    rm -rf "$dir/var/cache/apt/archives" && mkdir -p "$dir/var/cache/apt/archives/partial"
    tar -C "$dir" -cf "$tar.tmp" . && mv "$tar.tmp" "$tar" && rm -rf "$dir"
  fi
  echo "$tar"
}

gobuild() { # gobuild OUT: go build with one compile at a time (the machine has 2 cores)
  CGO_ENABLED=0 GOFLAGS=-mod=mod nice go build -p 1 -trimpath "$@"
}
kubeadm=$kindcache/bin/kubeadm-$k8s
if [[ ! -x $kubeadm ]]; then
  say "building kubeadm $k8s (Go module proxy)"
  # The wrapper module of the control plane, copied: kubeadm adds entries to its go.sum.
  mod=$(mktemp -d)
  cp "$here/../../../../src/local/controlplane/go.mod" "$here/../../../../src/local/controlplane/go.sum" "$mod/"
  ld="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=$k8s -X $p.gitMajor=1 -X $p.gitMinor=35"
  done
  (cd "$mod" && gobuild -ldflags "$ld" -o "$kubeadm.tmp" k8s.io/kubernetes/cmd/kubeadm)
  mv "$kubeadm.tmp" "$kubeadm" && rm -rf "$mod"
fi
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT

base=localhost/streamcube-kind-base:$kind_version
if ! has "$base"; then
  # kind's own files for its base image, from its module (the Go module proxy).
  kindsrc=$(go mod download -json "sigs.k8s.io/kind@$kind_version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  mkdir -p "$ctx/base/bin" "$ctx/base/cni"
  cp -r "$kindsrc/images/base/files" "$ctx/base/kind-files"
  chmod -R u+w "$ctx/base/kind-files" && rm -rf "$ctx/base/kind-files/LICENSES"
  cp "$containerdbin"/{containerd,ctr,containerd-shim-runc-v2} "$ctx/base/bin/"
  cp "$cnibin"/* "$ctx/base/cni/"
  ln "$(rootfs node systemd,systemd-sysv,dbus,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,fuse-overlayfs,e2fsprogs,bash,ca-certificates,curl,jq,procps,runc)" "$ctx/base/rootfs.tar" 2> /dev/null ||
    cp "$kindcache/rootfs-node.tar" "$ctx/base/rootfs.tar"
  build "$base" "$here/base.Containerfile" "$ctx/base"
fi

# The images kubeadm runs, under the repository localhost/kind (kind-config.yaml sets it).
mkdir -p "$ctx/bin/skel/tmp" && chmod 1777 "$ctx/bin/skel/tmp"
for pair in kube-apiserver:$k8s kube-controller-manager:$k8s kube-scheduler:$k8s etcd:${etcd#v}-0; do
  name=${pair%%:*}
  has "localhost/kind/$pair" && continue
  cp "$k8sbin/$name" "$ctx/bin/$name"
  build "localhost/kind/$pair" "$here/binary.Containerfile" "$ctx/bin" --build-arg "NAME=$name"
done
if ! has "localhost/kind/coredns:$coredns"; then
  corednsbin=$kindcache/bin/coredns-$coredns
  if [[ ! -x $corednsbin ]]; then
    say "building CoreDNS $coredns (Go module proxy)"
    gobin=$(mktemp -d)
    CGO_ENABLED=0 GOBIN=$gobin nice go install -p 1 -trimpath -ldflags='-s -w' "github.com/coredns/coredns@$coredns"
    mv "$gobin/coredns" "$corednsbin" && rm -rf "$gobin"
  fi
  cp "$corednsbin" "$ctx/bin/coredns"
  build "localhost/kind/coredns:$coredns" "$here/coredns.Containerfile" "$ctx/bin"
fi
if ! has "localhost/kind/kube-proxy:$k8s"; then
  cp "$k8sbin/kube-proxy" "$ctx/bin/kube-proxy"
  build "localhost/kind/kube-proxy:$k8s" "$here/kube-proxy.Containerfile" "$ctx/bin" --build-arg "BASE=$base"
fi
if ! has localhost/kind/pause:3.10; then
  $ENGINE load -q -i "$cache/images/pause.tar" > /dev/null
  $ENGINE tag localhost/pause:3.10 localhost/kind/pause:3.10
fi

kafka_image=localhost/streamcube-kafka:$kafka
if ! has "$kafka_image"; then
  [[ -e $cache/kafka-$kafka/classpath.txt ]] || {
    echo "missing $cache/kafka-$kafka: run 'STREAMCUBE_KAFKA_VERSION=$kafka npm run env:install'" >&2
    exit 1
  }
  mkdir -p "$ctx/kafka"
  ln "$(rootfs kafka openjdk-17-jre-headless,bash,ca-certificates)" "$ctx/kafka/rootfs.tar" 2> /dev/null ||
    cp "$kindcache/rootfs-kafka.tar" "$ctx/kafka/rootfs.tar"
  mkdir -p "$ctx/kafka/libs"
  tr ':' '\n' < "$cache/kafka-$kafka/classpath.txt" | xargs cp -t "$ctx/kafka/libs/"
  cp "$here/kafka-run.sh" "$here/log4j.properties" "$ctx/kafka/"
  build "$kafka_image" "$here/kafka.Containerfile" "$ctx/kafka"
fi

node=localhost/streamcube-kind-node:$k8s
if ! has "$node"; then
  mkdir -p "$ctx/node"
  cp "$kubeadm" "$ctx/node/kubeadm" && cp "$k8sbin"/{kubelet,kubectl} "$ctx/node/"
  cp "$here/10-bridge.conflist" "$ctx/node/"
  {
    cat << 'EOF'
# The default StorageClass of this node image: no provisioner, a pool of hostPath volumes made
# world-writable in the image (hostPath volumes get no fsGroup ownership).
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: kubernetes.io/no-provisioner
reclaimPolicy: Retain
volumeBindingMode: Immediate
EOF
    for i in $(seq -w 0 11); do
      printf -- '---\napiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: local-%s\nspec:\n' "$i"
      printf '  storageClassName: standard\n  capacity: { storage: 100Gi }\n'
      printf '  accessModes: [ReadWriteOnce, ReadWriteMany]\n  persistentVolumeReclaimPolicy: Retain\n'
      printf '  hostPath: { path: /var/local-volumes/local-%s, type: Directory }\n' "$i"
    done
  } > "$ctx/node/default-storage.yaml"
  build "$node-stage1" "$here/node.Containerfile" "$ctx/node" --build-arg "BASE=$base" --build-arg "VERSION=$k8s"
  # Like `kind build node-image`: the images are imported into the node's containerd (content
  # only: it unpacks them when a pod starts) in a running container, which is then committed.
  say "importing the images into the node image's containerd"
  builder=streamcube-kind-node-build
  $ENGINE rm -f "$builder" > /dev/null 2>&1 || true
  $ENGINE run -d --name "$builder" --privileged --entrypoint sleep "$node-stage1" infinity > /dev/null
  $ENGINE exec -d "$builder" containerd
  for _ in $(seq 50); do $ENGINE exec "$builder" ctr version > /dev/null 2>&1 && break || sleep 0.2; done
  for image in "localhost/kind/kube-apiserver:$k8s" "localhost/kind/kube-controller-manager:$k8s" \
    "localhost/kind/kube-scheduler:$k8s" "localhost/kind/kube-proxy:$k8s" "localhost/kind/etcd:${etcd#v}-0" \
    "localhost/kind/coredns:$coredns" localhost/kind/pause:3.10; do
    $ENGINE save "$image" | $ENGINE exec -i "$builder" ctr -n k8s.io images import --no-unpack - > /dev/null
  done
  $ENGINE exec "$builder" ctr -n k8s.io images ls -q | grep -v "^sha256:" | sed "s/^/  imported: /" >&2
  $ENGINE exec "$builder" sh -c 'pkill containerd; sleep 1; rm -rf /var/lib/containerd/io.containerd.snapshotter.* /run/containerd'
  $ENGINE kill "$builder" > /dev/null
  $ENGINE commit --change 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]' "$builder" "$node" > /dev/null
  $ENGINE rm -f "$builder" > /dev/null
  $ENGINE rmi "$node-stage1" > /dev/null
fi
say "images ready: $base $node $kafka_image"
