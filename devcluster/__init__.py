"""A real local Kubernetes control plane for development and tests.

etcd, kube-apiserver, kube-scheduler and kwok are built from their upstream Go
modules (see ``devcluster/go``), cached outside the repository by version, and
run as plain processes on 127.0.0.1 with free ports. ``python -m devcluster``
is the command line; ``devcluster.cluster.Cluster`` is the Python API.
"""
