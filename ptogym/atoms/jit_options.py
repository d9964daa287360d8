"""The pass options a kernel builder hands to ``pypto.frontend.jit``.

Builders take their options as hashable (name, ((key, value), ...)) pairs (build kwargs
are cache keys and tuning values); the jit wants {name: {key: value}}.  Beside them a
builder may merge isomorphic tasks: n tasks of the same structure in one loop iteration
(a step's matmuls, their vector epilogues) made one task, pypto's ``cube_nbuffer_setting``
/ ``vec_nbuffer_setting`` {-1: n} (key -1: every structure; read from pypto r0.2.0's
``n_buffer_merge.cpp``).  pypto's cost model dispatches every task from six AICPU
scheduler threads at about 1 µs of their time a task, so a kernel of thousands of small
same-shaped tasks waits on them, not on its cores (paged_attention's README: Measured).
"""


def jit_pass_options(pass_options, cube_nbuffer: int = 1, vec_nbuffer: int = 0) -> dict:
    """``pass_options`` pairs (or None) as the jit's dict, plus the task merges; pypto's
    defaults - no cube merge (1), its own vector merge (0 here) - add nothing."""
    options = {name: dict(pairs) for name, pairs in pass_options or ()}
    if cube_nbuffer > 1:
        options["cube_nbuffer_setting"] = {-1: cube_nbuffer}
    if vec_nbuffer:
        options["vec_nbuffer_setting"] = {-1: vec_nbuffer}
    return options
