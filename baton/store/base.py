"""The SQL store: one implementation over a small dialect, shared by SQLite and PostgreSQL.

`SqlStore` is the interface every backend implements by supplying only
connections, transaction start and error translation (see `core.StoreCore`)
plus a `Dialect`. All SQL is shared: the record methods live in the mixins
combined here, the schema in `migrations`. Every public method runs in
exactly one transaction. Compare-and-set steps are single conditional
UPDATEs or run under a row lock, and every time that decides ownership comes
from the database clock.
"""

from __future__ import annotations

from baton.store.blobs_sql import BlobsSql
from baton.store.catalog_sql import CatalogSql
from baton.store.checkpoints_sql import CheckpointsSql
from baton.store.core import Row, StoreCore, Tx
from baton.store.handoff_sql import HandoffSql
from baton.store.leases_sql import LeasesSql
from baton.store.operations_sql import OperationsSql

__all__ = ["Row", "SqlStore", "StoreCore", "Tx"]


class SqlStore(CatalogSql, CheckpointsSql, LeasesSql, OperationsSql, BlobsSql, HandoffSql):
    """Runs, checkpoints, events, leases, operations, budget charges, blobs and the catalog in a SQL database.

    Abstract: open a backend with `baton.store.factory.open_store`.
    """
