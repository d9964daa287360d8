"""Attention atoms on tiles: scores on the cube (AT-12), the online-softmax update with
P·V on the cube (AT-01, AT-13), and the final normalisation with the log-sum-exp.

The running state of one block of query rows lives in three fp32 workspaces the
calling kernel creates with ``pypto.tensor`` (a loop body is traced once, so a state
carried across ``pypto.loop`` iterations must be written into memory with ``ws[:] =``,
not rebound as a Python name):

    acc [rows, D]    un-normalised output sum_j exp(s_ij - m_i) v_j
    row_sum [rows, 1]  l_i = sum_j exp(s_ij - m_i)
    row_max [rows, 1]  m_i = max_j s_ij (scaled scores)

A kernel whose key blocks are all static (a Python loop, not ``pypto.loop``) keeps
the state as plain values instead: ``standard_softmax`` starts it, ``rescale`` and
``accumulated`` fold each further block, and nothing is written to memory.

When every key fits one block (single-pass attention, SK-02) there is no state:
``standard_softmax`` (AT-02) gives p, m and l at once and ``finish`` takes them as
they are.

``start_state`` fills them (m = ``MASKED``, a finite stand-in for -inf, so that
exp(m_old - m_new) is an exact 0 on the first block and never inf - inf); every key
block then calls ``rescale_state`` and ``accumulate`` (P·V); ``finish`` divides and gives
lse = m + log(l).  Masked scores carry ``MASKED`` too: a row's first block always
holds at least one key it may see (the kernels order their blocks so), so m_new is a
real score and every masked exp underflows to 0.

Tile validity (AT-20): a key block shorter than its tile is a view with a smaller
``valid_shape``; the score tile is re-viewed with the same valid extent, so the row
max, the exp and the row sum see only real keys, and P·V multiplies over the valid
inner extent of both operands (pypto requires them to agree).
"""

MASKED = -1.0e30  # fp32 score of a masked key: exp(MASKED - m) == 0 for any real m
#: the vector tile of ``values``' one sum over a step's P·V products, in elements (32 KB of
#: fp32; paged level2 with 4 cube tasks merged: 39.6 µs, 40.5 at 16384, 44.4 with the
#: step's own [64, 128] tile)
SUM_TILE_ELEMENTS = 8192


def raw_scores(pypto, q, k_tiles, keys):
    """q [rows, D] @ [k_1; ...; k_P]^T in fp32, unscaled (AT-12; the caller scales inside
    its merged vector chain, as upstream does): one score matmul per key tile [tile_keys,
    D], each written into its columns of one workspace, valid [rows, (P - 1) * tile_keys
    + keys] (only the last tile may be partial, with ``keys`` valid rows).  Writing the
    products in place rather than concatenating them saves a copy of every score under
    the cost model (paged level2 with 4 cube tasks merged: 50.0 -> 44.4 µs)."""
    rows, tile_keys = q.shape[0], k_tiles[0].shape[0]
    width = len(k_tiles) * tile_keys
    if len(k_tiles) == 1:
        s = pypto.matmul(q, k_tiles[0], pypto.DT_FP32, b_trans=True)
    else:
        s = pypto.tensor([rows, width], pypto.DT_FP32, "scores")
        for i in range(len(k_tiles)):
            pypto.assemble(pypto.matmul(q, k_tiles[i], pypto.DT_FP32, b_trans=True), [0, i * tile_keys], s)
    return pypto.view(s, [rows, width], [0, 0], valid_shape=[rows, width - tile_keys + keys])


def start_state(pypto, acc, row_sum, row_max):
    """acc = 0, l = 0, m = MASKED."""
    acc[:] = pypto.full(acc.shape, 0.0, pypto.DT_FP32)
    row_sum[:] = pypto.full(row_sum.shape, 0.0, pypto.DT_FP32)
    row_max[:] = pypto.full(row_max.shape, MASKED, pypto.DT_FP32)


def rescale_state(pypto, s, row_sum, row_max):
    """Fold one key block's scores into l and m (AT-01, the vector half of a step);
    returns (p, alpha) for ``accumulate``.

    s [rows, keys] fp32 scaled (and masked) scores:

        m_new = max(m, rowmax(s));  p = exp(s - m_new);  alpha = exp(m - m_new)
        l = alpha * l + rowsum(p);  m = m_new
    """
    p, alpha, new_sum, new_max = rescale(pypto, s, row_sum, row_max)
    row_sum[:] = new_sum
    row_max[:] = new_max
    return p, alpha


def rescale(pypto, s, row_sum, row_max, dim: int = -1):
    """``rescale_state`` on values: (p, alpha, new l, new m), nothing written; ``dim`` is
    the keys' axis of s (0: one query's scores as a [keys, 1] column)."""
    m_new = pypto.maximum(row_max, pypto.amax(s, dim=dim, keepdim=True))
    p = pypto.exp(pypto.sub(s, m_new))
    alpha = pypto.exp(pypto.sub(row_max, m_new))
    return p, alpha, pypto.add(pypto.mul(row_sum, alpha), pypto.sum(p, dim=dim, keepdim=True)), m_new


def values(pypto, p, v_tiles, heads: int = 1, carried=None):
    """p @ [v_1; ...; v_P] in fp32 (AT-13 on the cube), plus ``carried`` [rows, D] when
    given (the rescaled accumulator): p [rows, P * tile_keys] (already in the values'
    dtype) in column slices, one P·V matmul per value tile.

    One head, several tiles: the products and ``carried`` go into one workspace and one
    sum over its P + 1 row blocks adds them, a single read, where a chain of adds reads
    every piece on its own (~1400 cycles a read under the cost model; paged level2 54.8
    -> 46.1 µs, 39.6 with ``SUM_TILE_ELEMENTS`` and 4 cube tasks merged).

    ``heads`` > 1: p holds the rows of that many heads (rows / heads each) and the value
    tiles that many heads side by side ([tile_keys, heads * D]); each product's diagonal
    blocks (head i's rows against head i's columns) are its heads' values, [rows, D],
    taken from each product as it comes and added in a chain (faster there than a
    workspace: level1 86.9 against 102.8 µs, level3 131.2 against 133.7)."""
    tile_keys, count = v_tiles[0].shape[0], len(v_tiles)
    rows, width = p.shape[0], v_tiles[0].shape[1]
    products = []
    for i in range(count):
        part = p if count == 1 else pypto.view(p, [rows, tile_keys], [0, i * tile_keys])
        products.append(pypto.matmul(part, v_tiles[i], pypto.DT_FP32))
    if heads == 1 and count > 1:
        pieces = count + (carried is not None)
        parts = pypto.tensor([pieces * rows, width], pypto.DT_FP32, "pv_parts")
        for i in range(count):
            pypto.assemble(products[i], [i * rows, 0], parts)
        if carried is not None:
            pypto.assemble(carried, [count * rows, 0], parts)
        caller_tiles = pypto.get_vec_tile_shapes()
        columns = max(8, SUM_TILE_ELEMENTS // pieces // 8 * 8)  # 32-byte rows of fp32 (A-TILE-02)
        pypto.set_vec_tile_shapes(pieces, min(rows * width, columns))
        summed = pypto.sum(pypto.reshape(parts, [pieces, rows * width]), dim=0, keepdim=True)
        pypto.set_vec_tile_shapes(*caller_tiles)
        return pypto.reshape(summed, [rows, width])
    total = None
    for product in products:
        term = head_diagonal(pypto, product, heads)
        total = term if total is None else pypto.add(total, term)
    return total if carried is None else pypto.add(carried, total)


def head_diagonal(pypto, product, heads: int):
    """The diagonal blocks of ``product`` [heads * r, heads * D] stacked: [heads * r, D]
    (``product`` itself for one head)."""
    if heads == 1:
        return product
    rows, width = product.shape[0] // heads, product.shape[1] // heads
    blocks = []
    for i in range(heads):
        blocks.append(pypto.view(product, [rows, width], [i * rows, i * width]))
    return pypto.concat(blocks, 0)


def accumulated(pypto, p, v_tiles, acc, alpha, heads: int = 1):
    """alpha * acc + ``values(p, v_tiles, heads)`` (fp32 accumulator), as a value."""
    return values(pypto, p, v_tiles, heads, carried=pypto.mul(acc, alpha))


def accumulate(pypto, p, v_tiles, acc, alpha, heads: int = 1):
    """acc = ``accumulated(...)``, written into the workspace."""
    acc[:] = accumulated(pypto, p, v_tiles, acc, alpha, heads)


def standard_softmax(pypto, s):
    """AT-02 on one whole row block: (p = exp(s - rowmax(s)), rowmax, rowsum(p)), fp32;
    the caller divides after P·V (one [rows, D] division instead of [rows, keys])."""
    row_max = pypto.amax(s, dim=-1, keepdim=True)
    p = pypto.exp(pypto.sub(s, row_max))
    return p, row_max, pypto.sum(p, dim=-1, keepdim=True)


def finish(pypto, acc, row_sum, row_max):
    """(acc / l fp32 [rows, D], lse = m + log(l) fp32 [rows, 1])."""
    return pypto.div(acc, row_sum), pypto.add(row_max, pypto.log(row_sum))
