"""``pyextender release``: lift our scheduling gate from pods (the chart's uninstall hook)."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from pyextender.api.names import GANG_GATE
from pyextender.api.process import add_log_level, setup_logging

log = logging.getLogger("pyextender.release")


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "release",
        help="lift the pyextender gang gate from pods (run before uninstalling)",
        description=(
            "Delete our Mutating- and ValidatingWebhookConfiguration (so no new pod is gated), "
            f"then remove the scheduling gate {GANG_GATE} from every pod that still has it, "
            "in the given namespaces or all of them. The chart runs this as its pre-delete "
            "hook, so `helm uninstall` never strands a gated pod. Idempotent. Where the "
            "chart's hold policy is installed, lifting the gate takes the verb release on "
            "podgroups.scheduling.volcano.sh (cluster admins have it)."
        ),
    )
    p.add_argument(
        "--kubeconfig", help="kubeconfig path (default: in-cluster, $KUBECONFIG, ~/.kube/config)"
    )
    p.add_argument(
        "--webhook-configuration",
        default="",
        help="name of both webhook configurations to delete first (default: delete none)",
    )
    p.add_argument(
        "--hand-over",
        metavar="FROM=TO",
        default="",
        help="also give unbound pods naming scheduler FROM (ours, going away) to scheduler TO, "
        "e.g. volcano=default-scheduler: bare pods are recreated as they were, pods with a "
        "controller are deleted for it to recreate (not those of Volcano Jobs)",
    )
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--all-namespaces", action="store_true", help="release pods everywhere")
    where.add_argument(
        "--namespace", action="append", metavar="NAME", help="release pods here (repeatable)"
    )
    add_log_level(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from controllers.release import gated, hand_over, handover_plan, release_pods
    from pyextender.api.client import ClientConfigError, api_client

    setup_logging(args.log_level)
    try:
        api = api_client(args.kubeconfig)
    except ClientConfigError as exc:
        print(f"pyextender release: {exc}", file=sys.stderr)
        return 2
    if args.webhook_configuration:
        reg = client.AdmissionregistrationV1Api(api)
        for delete in (
            reg.delete_mutating_webhook_configuration,
            reg.delete_validating_webhook_configuration,
        ):
            try:
                delete(args.webhook_configuration)
                log.info("deleted %s %s", delete.__name__, args.webhook_configuration)
            except ApiException as exc:
                if exc.status != 404:
                    raise
    handover: tuple[str, str] | None = None
    if args.hand_over:
        ours, _, to = args.hand_over.partition("=")
        if not ours or not to:
            print(f"pyextender release: --hand-over must be FROM=TO, got {args.hand_over!r}")
            return 2
        handover = (ours, to)
    core = client.CoreV1Api(api)
    total = handed = 0
    for ns in args.namespace or [None]:
        cont: str | None = None
        while True:
            kw: dict[str, Any] = {"limit": 500, "_continue": cont} if cont else {"limit": 500}
            page = (
                core.list_pod_for_all_namespaces(**kw)
                if ns is None
                else core.list_namespaced_pod(ns, **kw)
            )
            pods = [api.sanitize_for_serialization(p) for p in page.items]
            # a pod handed over is recreated (or deleted) without our gate: releasing it
            # first would let our scheduler, still running, bind it in between, and the
            # hand-over then delete a pod that had just started
            handing = [p for p in pods if handover and handover_plan(p, handover[0])]
            ids = {id(p) for p in handing}
            total += release_pods(core, [p for p in pods if gated(p) and id(p) not in ids])
            if handover:
                handed += hand_over(core, handing, *handover)
            cont = page.metadata._continue
            if not cont:
                break
    log.info("released %d gated pod(s), handed over %d", total, handed)
    print(f"released {total} gated pod(s), handed {handed} to another scheduler")
    return 0
