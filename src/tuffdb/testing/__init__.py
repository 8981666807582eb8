"""Shipped test helpers: conformance suites, reference models and fault injection.

* :mod:`tuffdb.testing.conformance` -- ``KVStoreConformance``: subclass it and implement
  ``create_store(path)`` to run the KV contract against any store (needs pytest: ``tuffdb[testing]``);
* :mod:`tuffdb.testing.models` -- ``KVModel``, the dict reference for property tests;
* :mod:`tuffdb.testing.faults` -- failpoint and fsync fault helpers for crash tests.
"""
