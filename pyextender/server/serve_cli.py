"""``pyextender serve``: run the extender sidecar."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from pyextender.api.names import SCHEDULER_NAME
from pyextender.api.process import add_log_level, run_server, setup_logging
from pyextender.api.resources import GPU, KNOWN_GPU_RESOURCES, configure_gpu_resources
from pyextender.server.limits import DEFAULT_MAX_BODY_BYTES


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
    p.add_argument(
        "--gpu-resource",
        action="append",
        metavar="NAME",
        help="extended resource counted as a GPU (topology, sharing, supernode, GPU indices "
        "at bind); repeat for several vendors, the first is the primary one, which "
        f"volcano.sh/gpu-number counts as (default {GPU}; known: "
        f"{', '.join(KNOWN_GPU_RESOURCES)})",
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
        "--lease-duration",
        type=float,
        default=15.0,
        help="seconds a standby waits after the last observed renewal before it takes the "
        "Lease (default %(default)s)",
    )
    p.add_argument(
        "--renew-deadline",
        type=float,
        default=10.0,
        help="seconds the leader keeps acting without a successful renewal; must be below "
        "--lease-duration (default %(default)s)",
    )
    p.add_argument(
        "--retry-period",
        type=float,
        default=2.0,
        help="seconds between attempts to acquire or renew the Lease (default %(default)s)",
    )
    p.add_argument(
        "--gang-timeout",
        type=float,
        default=20.0,
        help="extender mode: seconds a gang member's bind waits for minMember members (keep "
        "it below kube-scheduler's extender httpTimeout). Framework mode: the stall window, a "
        "gang waits in Permit while new members keep arriving and is rejected once none has "
        "arrived for this long (default %(default)s)",
    )
    p.add_argument(
        "--gang-max-wait",
        type=float,
        default=600.0,
        help="framework mode: cap on a gang's whole wait in Permit, seconds from its first "
        "waiting member, however steadily members arrive; at least --gang-timeout, at most "
        "kube-scheduler's 900 (default %(default)s)",
    )
    p.add_argument(
        "--filter-picks-node",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="filter picks the feasible node our score plugins (the config's nodeorder, "
        "binpack, GPU topology ...) rank first, so the node is ours, as Volcano's "
        "scheduler would choose it. Extender mode: filter answers only that node, and "
        "kube-scheduler skips its own scoring and the prioritize call. Framework mode: "
        "the shim narrows the cycle to it, so kube-scheduler filters that node alone and "
        "skips scoring (a pick kube-scheduler turns down is not repeated for that pod). "
        "--no-filter-picks-node answers every feasible node and lets kube-scheduler add "
        "its scores to ours; so does a pod with soft preferences (preferred affinity, "
        "ScheduleAnyway spread) or facing a PreferNoSchedule taint it does not tolerate, "
        "always (default: on)",
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
    p.add_argument(
        "--cycle-socket",
        metavar="PATH",
        help="also answer the shim's Filter and Reserve (the Cycle messages) on this Unix "
        "socket without gRPC, for the shim's cycleSocket arg: about a fifth of the CPU and "
        "one thread wake-up per message instead of ten; needs --grpc-socket or "
        "--grpc-address (every other call stays on gRPC); default: off",
    )
    p.add_argument("--grpc-tls-cert", metavar="PEM", help="certificate for --grpc-address")
    p.add_argument("--grpc-tls-key", metavar="PEM", help="private key for --grpc-address")
    p.add_argument(
        "--tls-cert-file",
        metavar="PEM",
        help="serve the extender port over HTTPS with this certificate (kube-scheduler: "
        "extenders[].enableHTTPS and tlsConfig.caFile); default: plain HTTP on loopback",
    )
    p.add_argument("--tls-key-file", metavar="PEM", help="private key for --tls-cert-file")
    p.add_argument(
        "--client-ca-file",
        metavar="PEM",
        help="with --tls-cert-file: require a client certificate signed by this CA "
        "(kube-scheduler: tlsConfig.certFile/keyFile), so only that scheduler can call bind",
    )
    add_log_level(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # first: importing the kernels decides where their cache is, and says so in the log
    setup_logging(args.log_level)
    from pyextender.framework.config import ConfigError
    from pyextender.plugins.defaults import load
    from pyextender.server.app import ServeOptions, serve
    from pyextender.server.grpc_permit import FRAMEWORK_MAX_WAIT_S
    from pyextender.server.grpc_server import GrpcOptions
    from pyextender.server.http import ExtenderTLS

    if not 0 < args.retry_period < args.renew_deadline < args.lease_duration:
        print(
            "pyextender serve: need 0 < --retry-period < --renew-deadline < --lease-duration",
            file=sys.stderr,
        )
        return 2
    if not 0 < args.gang_timeout <= args.gang_max_wait <= FRAMEWORK_MAX_WAIT_S:
        print(
            "pyextender serve: need 0 < --gang-timeout <= --gang-max-wait <= "
            f"{FRAMEWORK_MAX_WAIT_S:g} (kube-scheduler's cap on a Permit wait)",
            file=sys.stderr,
        )
        return 2
    if bool(args.tls_cert_file) != bool(args.tls_key_file):
        print("pyextender serve: --tls-cert-file and --tls-key-file go together", file=sys.stderr)
        return 2
    if args.client_ca_file and not args.tls_cert_file:
        print("pyextender serve: --client-ca-file needs --tls-cert-file", file=sys.stderr)
        return 2
    if bool(args.grpc_tls_cert) != bool(args.grpc_tls_key):
        print("pyextender serve: --grpc-tls-cert and --grpc-tls-key go together", file=sys.stderr)
        return 2
    if args.cycle_socket and not (args.grpc_socket or args.grpc_address):
        print(
            "pyextender serve: --cycle-socket needs --grpc-socket or --grpc-address "
            "(the shim makes its other calls over gRPC)",
            file=sys.stderr,
        )
        return 2
    try:
        configure_gpu_resources(args.gpu_resource or (GPU,))
    except ValueError as exc:
        print(f"pyextender serve: --gpu-resource: {exc}", file=sys.stderr)
        return 2
    logging.getLogger("pyextender.serve").info(
        "GPU resources: %s", ", ".join(args.gpu_resource or (GPU,))
    )
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
        lease_duration_s=args.lease_duration,
        renew_deadline_s=args.renew_deadline,
        retry_period_s=args.retry_period,
        gang_timeout=args.gang_timeout,
        gang_max_wait=args.gang_max_wait,
        filter_picks_node=args.filter_picks_node,
        metrics_address=args.metrics_address,
        metrics_port=args.metrics_port,
        tls=ExtenderTLS(args.tls_cert_file, args.tls_key_file, args.client_ca_file),
        grpc=GrpcOptions(
            socket=args.grpc_socket,
            address=args.grpc_address,
            tls_cert=args.grpc_tls_cert,
            tls_key=args.grpc_tls_key,
            cycle_socket=args.cycle_socket,
        ),
    )
    return run_server("pyextender serve", serve(opts))
