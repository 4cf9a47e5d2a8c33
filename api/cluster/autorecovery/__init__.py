"""Autorecovery (docs/cluster.md §4): the auditor, the replication workers and the replica
check that put a cluster's lost copies back without an operator.

    service.py       AutoRecovery: the election, the auditor while elected, one worker
    auditor.py       Auditor: watches membership, marks ledgers of lost bookies
    replica_check.py asks bookies which entries they hold; marks ledgers missing copies
    worker.py        ReplicationWorker: locks a marked ledger, copies and replaces fragments
    throttle.py      a byte-rate limit for the copying
"""
