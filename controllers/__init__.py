"""The controllers process (``pyextender controllers``): Volcano's Job, PodGroup, Queue and
Command controllers with Lease leader election. Imports only ``pyextender.api`` (and, for
now, the list+watch Informer in ``pyextender.api.informer``; see app.py)."""
