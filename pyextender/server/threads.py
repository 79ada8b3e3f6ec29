"""The thread pool for blocking Kubernetes API calls.

asyncio's default executor has min(32, cores + 4) threads: 6 on a 2-core
machine, which made 300 gate lifts take seconds behind one another. API calls
mostly wait on the network, so they get a pool of their own.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from pyextender.api.process import name_os_thread

API_THREADS = ThreadPoolExecutor(
    max_workers=32, thread_name_prefix="kube-api", initializer=name_os_thread
)
