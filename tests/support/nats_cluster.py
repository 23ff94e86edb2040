"""A 3-server NATS JetStream cluster on 127.0.0.1 (free ports, temp directories), one per test module that
imports the fixture; killed at teardown."""

from __future__ import annotations

import pytest

from cruxsql.cluster.loopback import LoopbackCluster
from cruxsql.errors import CruxsqlError


@pytest.fixture(scope="module")
def nats_cluster(tmp_path_factory: pytest.TempPathFactory):
    for attempt in range(3):  # its free ports are picked before the servers bind them: another process may win one
        cluster = LoopbackCluster(tmp_path_factory.mktemp("nats"), 3)
        try:
            cluster.start()
            break
        except CruxsqlError:
            cluster.stop()
            if attempt == 2:
                raise
    try:
        yield cluster
    finally:
        cluster.stop()
