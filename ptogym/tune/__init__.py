"""``ptogym tune``: a cost-model autotuner for the operators' build parameters.

* ``space`` - how a kernel module declares what can be tuned (``TUNING``: parameters
  with their candidates, constraints between them, the band a call falls in);
* ``table`` - the tuned table an operator reads at run time (``tuned.json`` beside its
  kernel, keyed by band), and the override a trial runs under;
* ``trial`` - one trial in a process of its own: constraints, the golden check on the
  interpreter, the measurement (pypto-sim's cost model by default), with a timeout
  and a memory cap;
* ``engines`` - where trials run: ``local`` (a pool of worker slots on this machine)
  or ``ray`` (one Ray task per trial);
* ``db`` - the SQLite database of every trial (resumable, shared by concurrent sweeps);
* ``sweep`` - Optuna's ask/tell loop over those, and ``cli`` the command.

Only ``space`` and ``table`` are imported by operators; nothing here imports optuna,
ray or torch at module import time.
"""
