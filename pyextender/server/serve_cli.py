"""``pyextender serve``: run the extender sidecar."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pyextender.api.names import SCHEDULER_NAME
from pyextender.api.process import add_log_level, run_server, setup_logging
from pyextender.server.http import DEFAULT_MAX_BODY_BYTES


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "serve",
        help="run the kube-scheduler extender sidecar",
        description=(
            "Serve kube-scheduler's extender verbs (filter, prioritize, preempt, bind) "
            "from a cache of nodes and pods kept by list+watch. /readyz turns 200 "
            "after the first full sync; /metrics serves Prometheus metrics."
        ),
    )
    p.add_argument(
        "--kubeconfig", help="kubeconfig path (default: in-cluster, $KUBECONFIG, ~/.kube/config)"
    )
    p.add_argument(
        "--config", help="scheduler config YAML (Volcano actions + tiers); default: built-in"
    )
    p.add_argument("--address", default="127.0.0.1", help="listen address (default %(default)s)")
    p.add_argument("--port", type=int, default=8888, help="listen port (default %(default)s)")
    p.add_argument(
        "--metrics-address",
        default="127.0.0.1",
        help="listen address of a second server with only /healthz /readyz /metrics "
        "(default %(default)s)",
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        default=0,
        help="its port; 0 (default) serves them only beside the verbs on --port",
    )
    p.add_argument(
        "--scheduler-name",
        default=SCHEDULER_NAME,
        help="schedulerName of the pods we schedule (default %(default)s)",
    )
    p.add_argument(
        "--max-body-bytes",
        type=int,
        default=DEFAULT_MAX_BODY_BYTES,
        help="largest request body accepted, bytes (default %(default)s)",
    )
    p.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run the actions (enqueue, preempt, reclaim) only while holding the Lease; "
        "verbs are served by every replica (default: on)",
    )
    p.add_argument("--lease-namespace", default="kube-system", help="namespace of the Lease")
    p.add_argument("--lease-name", default="pyextender-scheduler", help="name of the Lease")
    p.add_argument(
        "--gang-timeout",
        type=float,
        default=20.0,
        help="seconds a gang member's bind waits for minMember members (default %(default)s; "
        "keep it below kube-scheduler's extender httpTimeout)",
    )
    p.add_argument(
        "--grpc-socket",
        metavar="PATH",
        help="also serve the gRPC contract (pyextender.v1.Scheduler) for the framework shim "
        "on this Unix domain socket (shim and sidecar share a Pod); default: off",
    )
    p.add_argument(
        "--grpc-address",
        metavar="HOST:PORT",
        help="also serve gRPC on TCP (TLS with --grpc-tls-cert/--grpc-tls-key); default: off",
    )
    p.add_argument("--grpc-tls-cert", metavar="PEM", help="certificate for --grpc-address")
    p.add_argument("--grpc-tls-key", metavar="PEM", help="private key for --grpc-address")
    add_log_level(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pyextender.framework.config import ConfigError
    from pyextender.plugins.defaults import load
    from pyextender.server.app import ServeOptions, serve
    from pyextender.server.grpc_server import GrpcOptions

    setup_logging(args.log_level)
    if bool(args.grpc_tls_cert) != bool(args.grpc_tls_key):
        print("pyextender serve: --grpc-tls-cert and --grpc-tls-key go together", file=sys.stderr)
        return 2
    try:
        load(args.config)
    except ConfigError as exc:
        print(f"pyextender serve: invalid scheduler config: {exc}", file=sys.stderr)
        return 2
    opts = ServeOptions(
        kubeconfig=args.kubeconfig,
        address=args.address,
        port=args.port,
        scheduler_name=args.scheduler_name,
        config_path=args.config,
        max_body_bytes=args.max_body_bytes,
        leader_elect=args.leader_elect,
        lease_namespace=args.lease_namespace,
        lease_name=args.lease_name,
        gang_timeout=args.gang_timeout,
        metrics_address=args.metrics_address,
        metrics_port=args.metrics_port,
        grpc=GrpcOptions(
            socket=args.grpc_socket,
            address=args.grpc_address,
            tls_cert=args.grpc_tls_cert,
            tls_key=args.grpc_tls_key,
        ),
    )
    return run_server("pyextender serve", serve(opts))
