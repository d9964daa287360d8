"""pypto 0.2.0's own test suite as a differential corpus (see suite.py)."""
