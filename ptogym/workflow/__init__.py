"""The module-by-module workflow: ``ptogym new`` (scaffold), ``stage`` (verify the
cumulative module files against golden boundary tensors) and ``bisect`` (find the
first kernel op that diverges from a golden probe)."""
