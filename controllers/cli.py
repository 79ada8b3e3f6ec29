"""``pyextender controllers``: run the Job, CronJob, PodGroup, Queue and Command controllers."""

from __future__ import annotations

import argparse
import os
import socket
from typing import Any

from pyextender.api.names import GANG_BARRIERS, SCHEDULER_NAME
from pyextender.api.process import add_log_level, run_server, setup_logging


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "controllers",
        help="run the Volcano Job/CronJob/PodGroup/Queue/Command controllers",
        description=(
            "Own Volcano's batch.volcano.sh Jobs and CronJobs, bus.volcano.sh Commands and "
            "the status of scheduling.volcano.sh PodGroups and Queues. With --leader-elect "
            "only the holder of a coordination.k8s.io Lease acts. /healthz, /readyz (200 "
            "once every cache is synced) and /metrics on --metrics-port."
        ),
    )
    p.add_argument(
        "--kubeconfig", help="kubeconfig path (default: in-cluster, $KUBECONFIG, ~/.kube/config)"
    )
    p.add_argument(
        "--workers", type=int, default=2, help="concurrent reconciles per controller (default 2)"
    )
    p.add_argument("--leader-elect", action="store_true", help="act only while holding the Lease")
    p.add_argument("--lease-namespace", default="kube-system", help="namespace of the Lease")
    p.add_argument("--lease-name", default="pyextender-controllers", help="name of the Lease")
    p.add_argument(
        "--lease-duration",
        type=float,
        default=15.0,
        help="seconds a standby waits after the last renewal before taking over (default 15)",
    )
    p.add_argument(
        "--renew-deadline",
        type=float,
        default=10.0,
        help="seconds the leader keeps retrying a renewal before it stops acting (default 10)",
    )
    p.add_argument(
        "--retry-period",
        type=float,
        default=2.0,
        help="seconds between acquire/renew attempts (default 2)",
    )
    p.add_argument("--identity", default="", help="holder identity (default: hostname_pid)")
    p.add_argument("--metrics-address", default="127.0.0.1", help="listen address of /metrics")
    p.add_argument(
        "--metrics-port", type=int, default=8899, help="port of /healthz /readyz /metrics"
    )
    p.add_argument(
        "--scheduler-name",
        default=SCHEDULER_NAME,
        help="schedulerName of pods that get their own PodGroup (default %(default)s)",
    )
    p.add_argument(
        "--resync", type=float, default=60.0, help="seconds between full re-queues (default 60)"
    )
    p.add_argument(
        "--default-queue-weight",
        type=int,
        default=1,
        help="weight of the default queue when it is created (default %(default)s)",
    )
    p.add_argument(
        "--default-queue-reclaimable",
        type=_bool,
        default=True,
        metavar="true|false",
        help="whether the default queue is reclaimable when it is created (default true)",
    )
    p.add_argument(
        "--webhook-configuration",
        default="",
        help="MutatingWebhookConfiguration of our webhook: a namespace that leaves its pod "
        "webhooks' namespaceSelector (adoption label removed) has its gated pods released "
        "(default: off)",
    )
    p.add_argument(
        "--gang-barrier",
        choices=GANG_BARRIERS,
        default="gate",
        help="how a Job's gang pods wait until the scheduler admits the gang: gate (a "
        "scheduling gate) or scheduler (the pyextender.io/gang-barrier annotation, held by "
        "the framework shim's PreEnqueue; use with the webhook's --gang-barrier=scheduler). "
        "Default %(default)s",
    )
    # tests only: the CronJob controller's clock runs this many times as fast
    p.add_argument("--cronjob-clock-speed", type=float, default=1.0, help=argparse.SUPPRESS)
    add_log_level(p)
    p.set_defaults(func=run)


def _bool(text: str) -> bool:
    low = text.lower()
    if low not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return low == "true"


def run(args: argparse.Namespace) -> int:
    from controllers.app import Options
    from controllers.app import run as run_app
    from pyextender.api.leader import LeaseConfig

    setup_logging(args.log_level)
    if args.default_queue_weight < 1:
        print("pyextender controllers: --default-queue-weight must be >= 1", flush=True)
        return 2
    if args.workers < 1:
        print("pyextender controllers: --workers must be >= 1", flush=True)
        return 2
    if not 0 < args.renew_deadline < args.lease_duration:
        print("pyextender controllers: need 0 < --renew-deadline < --lease-duration", flush=True)
        return 2
    if args.cronjob_clock_speed <= 0:
        print("pyextender controllers: --cronjob-clock-speed must be > 0", flush=True)
        return 2
    identity = args.identity or f"{socket.gethostname()}_{os.getpid()}"
    opts = Options(
        kubeconfig=args.kubeconfig,
        workers=args.workers,
        leader_elect=args.leader_elect,
        lease=LeaseConfig(
            namespace=args.lease_namespace,
            name=args.lease_name,
            identity=identity,
            lease_duration_s=args.lease_duration,
            renew_deadline_s=args.renew_deadline,
            retry_period_s=args.retry_period,
        ),
        metrics_address=args.metrics_address,
        metrics_port=args.metrics_port,
        scheduler_name=args.scheduler_name,
        resync_s=args.resync,
        default_queue_weight=args.default_queue_weight,
        default_queue_reclaimable=args.default_queue_reclaimable,
        webhook_configuration=args.webhook_configuration,
        gang_barrier=args.gang_barrier == "scheduler",
        cronjob_clock_speed=args.cronjob_clock_speed,
    )
    return run_server("pyextender controllers", run_app(opts))
