"""Shipped test helpers: conformance suites, reference models and fault injection.

* :mod:`tuffdb.testing.conformance` -- ``KVStoreConformance``: subclass it and implement
  ``create_store(path)`` to run the KV contract against any store (needs pytest: ``tuffdb[testing]``);
* :mod:`tuffdb.testing.models` -- ``KVModel``, the dict reference for property tests;
* :mod:`tuffdb.testing.faults` -- failpoint and fsync fault helpers for crash tests;
* :mod:`tuffdb.testing.processes` -- child processes to SIGKILL, SIGSTOP/SIGCONT, restart;
* :mod:`tuffdb.testing.etcd` -- private etcd servers (one or three members) on free ports;
* :mod:`tuffdb.testing.checker` -- a history recorder, a linearizability search for
  registers and a checker for event logs (the cluster fault tests' verdicts).
"""
