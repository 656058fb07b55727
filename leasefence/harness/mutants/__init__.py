"""Planted bugs (mutants) of ``impl/`` and the gate that proves every test layer can catch them:
the catalogue (data) in ``catalogue``, the gate (copy, apply, run layers, table) in ``gate``, and
its rows of ``leasefence verify`` in ``layer``."""
