"""python -m devcluster up|down|status|build"""

from __future__ import annotations

import argparse
import json
import sys

from devcluster.build import ensure_binaries
from devcluster.cluster import CRD_SETS, MODES, Cluster
from devcluster.nodes import NodeShape


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m devcluster",
        description=(
            "A local Kubernetes control plane from upstream Go modules: etcd, "
            "kube-apiserver, two stock kube-schedulers (default-scheduler, and "
            "volcano calling our extender) and kwok with fake GPU nodes."
        ),
    )
    p.add_argument("--name", default="default", help="cluster name (folder under .devcluster)")
    sub = p.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="build (first time) and start a cluster")
    up.add_argument("--nodes", type=int, default=8, help="kwok nodes (default %(default)s)")
    up.add_argument("--gpus-per-node", type=int, default=8, help="GPUs per node")
    up.add_argument(
        "--gpu-resource",
        default="nvidia.com/gpu",
        metavar="NAME",
        help="extended resource the nodes advertise their GPUs as, e.g. amd.com/gpu or "
        "metax-tech.com/gpu; the sidecar (--sidecar) counts it as the GPU "
        "(default %(default)s)",
    )
    up.add_argument("--supernodes", type=int, default=0, help="split nodes into N supernodes")
    up.add_argument("--cpu", default="64", help="CPU cores per node")
    up.add_argument("--memory", default="512Gi", help="memory per node")
    up.add_argument("--extender-port", type=int, default=None, help="port of our extender")
    up.add_argument("--sidecar", action="store_true", help="also run the pyextender sidecar")
    up.add_argument(
        "--mode",
        choices=MODES,
        default="extender",
        help="extender: stock kube-scheduler calling the sidecar's HTTP extender verbs; "
        "framework: kube-scheduler built with our shim plugin, calling the sidecar over gRPC "
        "(gangs wait in Permit) (default %(default)s)",
    )
    up.add_argument(
        "--crds",
        choices=sorted(CRD_SETS),
        default="ours",
        help="CRDs to install: ours (manifests/crds); volcano, stand-ins generated with "
        "Volcano's differences (devcluster/volcano_crds; e.g. PodGroup without a status "
        "subresource); volcano-release, the CRD files of Volcano v1.10.0 itself, fetched "
        "with `go mod download` (default %(default)s)",
    )
    sub.add_parser("down", help="stop every process of the cluster")
    sub.add_parser("status", help="print the cluster's state as JSON")
    bld = sub.add_parser(
        "build",
        help="build the upstream binaries that are missing from the cache",
        description=(
            "Build etcd, kube-apiserver, kube-scheduler, kubectl, "
            "kwok and helm from the wrapper Go modules into the binary cache "
            "($PYEXTENDER_BIN_CACHE, default ~/.cache/pyextender/bin), one folder per "
            "component and version. Each binary is checked to run (its version command) "
            "before it enters the cache. Volcano's own scheduler (vc-scheduler, for "
            "bench/e2e.py --mode volcano) is built only when named: --only vc-scheduler."
        ),
    )
    bld.add_argument(
        "--only", action="append", metavar="NAME", help="build only this binary (repeatable)"
    )
    bld.add_argument("--force", action="store_true", help="rebuild even if cached")
    args = p.parse_args(argv)
    cluster = Cluster(args.name)
    if args.cmd == "build":
        for name, path in ensure_binaries(only=args.only, force=args.force).items():
            print(f"{name}: {path}")
        return 0
    if args.cmd == "up":
        shape = NodeShape(
            cpu=args.cpu,
            memory=args.memory,
            gpus=args.gpus_per_node,
            gpu_resource=args.gpu_resource,
        )
        st = cluster.up(
            args.nodes, shape, args.supernodes, args.extender_port, mode=args.mode, crds=args.crds
        )
        if args.sidecar:
            cluster.start_sidecar(extra_args=["--gpu-resource", args.gpu_resource])
            cluster.wait_sidecar_ready()
        print(f"export KUBECONFIG={st.kubeconfig}")
        return 0
    if args.cmd == "down":
        cluster.down()
        return 0
    json.dump(cluster.status(), sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
