"""Dequantisation of an int32 accumulator (AT-06): see op.py."""
