"""``pypto.experimental``: the options kernels set; recorded, no effect on numbers."""
from .config import get_operation_options, set_operation_options, set_options  # noqa: F401
