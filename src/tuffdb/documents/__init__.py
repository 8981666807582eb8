"""Face 3: the document database (typed records, queries, indexes, transactions) on KVStore.

``Database.open(path)`` -> ``db.collection(name)`` -> ``insert / get / find / update / delete``.
Design: docs/design/documents.md; on-disk format: docs/format/documents.md.
"""

from tuffdb.documents.collection import Collection
from tuffdb.documents.database import Database
from tuffdb.documents.query import Filter, where
from tuffdb.documents.schema import FieldSpec, Schema
from tuffdb.documents.transactions import ISOLATION_LEVELS, Transaction
from tuffdb.documents.values import Number, Vector

__all__ = [
    "ISOLATION_LEVELS",
    "Collection",
    "Database",
    "FieldSpec",
    "Filter",
    "Number",
    "Schema",
    "Transaction",
    "Vector",
    "where",
]
