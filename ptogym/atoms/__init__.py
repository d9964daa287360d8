"""Kernel-level helpers of the pattern library (atoms): plain functions taking the
``pypto`` namespace first, called inside jit kernels on tiles."""
