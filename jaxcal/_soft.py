"""Differentiable calibration objectives: soft-binned ECE, MMCE and smooth ECE.

All three take ``(probs, labels)`` like :func:`jaxcal.ece`: 1-D ``probs`` are the
probability of the positive class against 0/1 labels, 2-D ``probs`` give the top-label
confidence ``max_k p_k`` against correctness ``argmax_k p_k == y``. The correctness
indicator is piecewise constant (no gradient); the gradient flows through the
confidence. Each works under ``jit``, ``vmap`` and ``grad``, with finite gradients for
every valid input, including probabilities of exactly 0 or 1 and empty bins.

Their scalar hyperparameters (``temperature``, ``bandwidth``) may be Python numbers or
0-d arrays; they are traced, not static, so annealing them inside a jitted training
loop does not recompile.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal._checks import (
    check_option,
    check_positive_int,
    check_probs_labels,
    is_concrete,
)
from jaxcal._confidence import scores_and_targets
from jaxcal._numerics import compute_dtype, safe_divide, safe_sqrt, upcast

SOFT_NORMS = ("l1", "l2")
MMCE_VARIANTS = ("unweighted", "weighted")

#: Default soft-binning softness: at a bin centre each adjacent bin gets this fraction
#: of the membership of the bin itself, i.e. T = 1 / (M**2 * log(1 / ratio)).
DEFAULT_ADJACENT_RATIO = 0.01

#: smooth ECE: number of grid intervals on [0, 1] (the kernel is applied on G + 1 nodes)
#: and the bandwidth search interval [SMECE_MIN_BANDWIDTH, 1] (relplot's ``eps``).
SMECE_GRID = 4096
SMECE_MIN_BANDWIDTH = 1e-3
_BISECTION_STEPS = 40


def _scalar_parameter(name: str, value: Any, minimum: float = 0.0) -> Any:
    """Validate a positive scalar hyperparameter given as a number or a 0-d array.

    Python numbers and concrete arrays must be finite and > ``minimum`` (>= when
    ``minimum`` > 0); tracers are only checked for rank. Returns the value as given
    (the kernels cast it to their compute dtype).
    """
    if isinstance(value, bool):
        raise ValueError(f"`{name}` must be a positive number; got {value!r}.")
    if isinstance(value, (int, float, np.integer, np.floating)):
        v = float(value)
    else:
        try:
            arr = jnp.asarray(value)
        except TypeError as err:
            raise ValueError(f"`{name}` must be a positive number; got {value!r}.") from err
        if arr.ndim != 0 or not (
            jnp.issubdtype(arr.dtype, jnp.floating) or jnp.issubdtype(arr.dtype, jnp.integer)
        ):
            raise ValueError(
                f"`{name}` must be a positive scalar; got shape {arr.shape}, dtype {arr.dtype}."
            )
        if not is_concrete(arr):
            return arr
        v = float(arr)
    ok = np.isfinite(v) and (v >= minimum if minimum > 0 else v > 0)
    if not ok:
        bound = f">= {minimum}" if minimum > 0 else "> 0"
        raise ValueError(f"`{name}` must be a finite number {bound}; got {v}.")
    return value


def _scores_targets(probs: jax.Array, labels: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(score, float target) in the compute dtype: positive class, or top-label confidence.

    The target (the label, or correctness) is piecewise constant in ``probs``: no gradient;
    the confidence's gradient is the one-hot of the predicted class
    (:func:`jaxcal._confidence.top_confidence`).
    """
    scores, targets, _ = scores_and_targets(probs, labels)
    scores = upcast(scores)
    return scores, targets.astype(scores.dtype)


# ----------------------------------------------------------------------------------------
# Soft-binned ECE
# ----------------------------------------------------------------------------------------

# Logits below this are exp() == 0 in any float dtype; the clip keeps 0 * logit finite.
_LOGIT_FLOOR = -1e4

# Layout note: the (bins, samples) arrays below are (M, N), samples on the minor axis, and
# every sum over bins is a matrix product (``coef @ e``): XLA:CPU reduces a short minor
# axis of an (N, M) array ~5x slower than it computes the exps, and a major axis of an
# (M, N) array ~20x slower; products with an (M, c) matrix cost about one pass.


def _soft_logits(s: jax.Array, t: jax.Array, n_bins: int) -> tuple[jax.Array, jax.Array]:
    """Logits ``z_ji = -((s_i - xi_j)**2 - (s_i - xi_near)**2) / T`` and offsets, ``(M, N)``.

    ``delta_ji = xi_j - xi_near(i)`` (multiples of 1/M) centres everything on the nearest
    anchor, the bin holding ``s_i``: the nearest logit is exactly 0, the others are
    ``-delta (delta - 2 (s - xi_near)) / T <= 0`` with no cancellation, and the
    derivative formulas of :func:`_soft_ece_core_jvp` stay exact as T -> 0.
    """
    dtype = s.dtype
    near = jnp.clip(jnp.floor(s * n_bins), 0, n_bins - 1)
    delta = (jnp.arange(n_bins, dtype=dtype)[:, None] - near[None, :]) * (1 / n_bins)
    offset = s - (near + 0.5) * (1 / n_bins)
    z = jnp.maximum(delta * (2 * offset[None, :] - delta) / t, _LOGIT_FLOOR)
    return z, delta


def soft_membership(scores: jax.Array, n_bins: int, temperature: Any) -> jax.Array:
    """Soft-bin membership ``(N, M)``: softmax over bins j of ``-(s - xi_j)**2 / T``.

    Anchors ``xi_j = (j + 1/2) / M`` are the centres of M equal-width bins. As T -> 0 each
    row tends to the one-hot of the uniform bin holding the score.
    """
    s = scores.astype(compute_dtype(scores.dtype))
    z, _ = _soft_logits(s, jnp.asarray(temperature).astype(s.dtype), n_bins)
    e = jnp.exp(z)
    return (e / jnp.ones(n_bins, s.dtype).dot(e)[None, :]).T


# Samples per chunk: the (M, chunk) intermediates stay in cache (4 MB at M = 15). Beyond
# one chunk the sums run over chunks (``lax.map``), so memory is O(M * chunk), not O(M N).
_CHUNK = 65536


def _chunks(x: jax.Array, chunk: int) -> jax.Array:
    """``(N,)`` -> ``(k, size)`` with k = ceil(N / chunk) equal chunks, zero-padded at the end
    (zero weight: no contribution); equal sizes keep the padding below 128 per chunk."""
    k = -(-x.shape[0] // chunk)
    size = -(-x.shape[0] // k)
    size = -(-size // 128) * 128
    return jnp.pad(x, (0, k * size - x.shape[0])).reshape(k, size)


def _map_chunks(fn, n: int, *arrays: jax.Array):
    """``fn`` on the whole ``(N,)`` arrays, or chunk by chunk with outputs stacked."""
    if n <= _CHUNK:
        return jax.tree.map(lambda o: o[None], fn(*arrays))
    return jax.lax.map(lambda xs: fn(*xs), tuple(_chunks(a, _CHUNK) for a in arrays))


def _soft_memberships(s, t, n_bins):
    z, delta = _soft_logits(s, t, n_bins)
    e = jnp.exp(z)  # (M, N) unnormalised memberships; u = e / norm_i
    return z, delta, e, jnp.ones(n_bins, s.dtype).dot(e)


def _soft_sums(s, y, w, t, n_bins):
    """``(M, 2)``: per-bin excess ``sum_i w_i u_ji (y_i - s_i)`` and mass ``sum_i w_i u_ji``."""
    _, _, e, norm_i = _soft_memberships(s, t, n_bins)
    return e.dot(jnp.stack([w * (y - s) / norm_i, w / norm_i], axis=1))


def _soft_ece_forward(s, y, w, t, n_bins, norm):
    """Value of the soft-binned ECE and the per-bin quantities its derivatives need."""
    sums = _map_chunks(lambda *a: _soft_sums(*a, t, n_bins), s.shape[0], s, y, w).sum(axis=0)
    excess, mass = sums[:, 0], sums[:, 1]  # excess_j = S_j (acc_j - conf_j), mass_j = S_j
    total = w.sum()
    if norm == "l1":
        return safe_divide(jnp.abs(excess).sum(), total), (excess, total, None)
    gap = safe_divide(excess, mass)  # |gap| <= 1: bounded even for near-empty bins
    value = safe_sqrt(safe_divide(jnp.sum(gap * excess), total))
    return value, (excess, total, gap)


@partial(jax.custom_jvp, nondiff_argnums=(4, 5))
def _soft_ece_core(s, y, w, t, n_bins, norm):
    return _soft_ece_forward(s, y, w, t, n_bins, norm)[0]


def _soft_grads(s, y, w, t, n_bins, coef, want_s, want_t):
    """Per-sample ``(dL/ds, A, B)`` and the chunk's share of ``dL/dT`` (see the JVP)."""
    z, delta, e, norm_i = _soft_memberships(s, t, n_bins)
    r = w * (y - s)
    a, b = coef[1:].dot(e) / norm_i[None, :]
    gs = gt = jnp.zeros((), s.dtype)
    if want_s:
        mu, ad, bd = coef.dot(e * delta) / norm_i[None, :]
        gs = -w * a + (2 / t) * (r * (ad - a * mu) + w * (bd - b * mu))
    if want_t:
        zeta, az, bz = coef.dot(e * z) / norm_i[None, :]
        gt = -jnp.sum(r * (az - a * zeta) + w * (bz - b * zeta)) / t
    return gs, a, b, gt


@partial(_soft_ece_core.defjvp, symbolic_zeros=True)
def _soft_ece_core_jvp(n_bins, norm, primals, tangents):
    """Closed-form derivatives (autodiff of the (M, N) graph costs ~10x the forward).

    With alpha_j = dL/dexcess_j, beta_j = dL/dmass_j, gamma = dL/dW and
    du_ji/ds_i = (2/T) u_ji (delta_ji - mu_i), mu_i = sum_j u_ji delta_ji,
    du_ji/dT = -(1/T) u_ji (z_ji - zeta_i), zeta_i = sum_j u_ji z_ji:

      dL/ds_i = -w_i A_i + (2/T) [r_i (A^d_i - A_i mu_i) + w_i (B^d_i - B_i mu_i)]
      dL/dy_i = w_i A_i,   dL/dw_i = (y_i - s_i) A_i + B_i + gamma
      dL/dT   = -(1/T) sum_i [r_i (A^z_i - A_i zeta_i) + w_i (B^z_i - B_i zeta_i)]

    where A_i = sum_j alpha_j u_ji, A^d_i = sum_j alpha_j u_ji delta_ji, A^z_i likewise with
    z, B the same with beta, and r_i = w_i (y_i - s_i). Each line is one small
    (c, M) x (M, N) product. Only the derivatives whose tangent is nonzero are formed.
    """
    s, y, w, t = primals
    ds, dy, dw, dt = tangents
    n = s.shape[0]
    value, (excess, total, gap) = _soft_ece_forward(s, y, w, t, n_bins, norm)
    if norm == "l1":
        alpha = safe_divide(jnp.sign(excess), total)
        beta = jnp.zeros_like(alpha)
        gamma = -safe_divide(value, total)
    else:
        live = value > 0
        scale = jnp.where(live, 1 / jnp.where(live, value * total, 1), 0)
        alpha = gap * scale
        beta = -0.5 * gap**2 * scale
        gamma = -0.5 * safe_divide(value, total)
    coef = jnp.stack([jnp.ones_like(alpha), alpha, beta])  # (3, M)
    zero = jax.custom_derivatives.SymbolicZero
    want_s, want_t = not isinstance(ds, zero), not isinstance(dt, zero)
    gs, a, b, gt = _map_chunks(
        lambda *x: _soft_grads(*x, t, n_bins, coef, want_s, want_t), n, s, y, w
    )
    a, b = a.reshape(-1)[:n], b.reshape(-1)[:n]
    out = jnp.zeros((), s.dtype)
    if want_s:
        out = out + jnp.vdot(gs.reshape(-1)[:n], ds)
    if not isinstance(dy, zero):
        out = out + jnp.vdot(w * a, dy)
    if not isinstance(dw, zero):
        out = out + jnp.vdot((y - s) * a + b + gamma, dw)
    if want_t:
        out = out + gt.sum() * dt
    return value, out


@partial(jax.jit, static_argnames=("n_bins", "norm"))
def _soft_ece_kernel(probs, labels, weights, temperature, n_bins, norm):
    s, y = _scores_targets(probs, labels)
    w = jnp.ones_like(s) if weights is None else weights.astype(s.dtype)
    t = jnp.asarray(temperature).astype(s.dtype)
    return _soft_ece_core(s, y, w, t, n_bins, norm)


def soft_ece(
    probs: Any,
    labels: Any,
    *,
    n_bins: int = 15,
    temperature: Any = None,
    norm: str = "l1",
    weights: Any = None,
) -> jax.Array:
    """Soft-binned ECE (SB-ECE), a differentiable surrogate of the binned ECE.

    Karandikar et al. (2021), Eq. (11): each score ``s_i`` (positive-class probability,
    or top-label confidence for 2-D ``probs``) belongs to every bin j with the soft
    membership

    .. math::
       u_j(s) = \\frac{\\exp(-(s - \\xi_j)^2 / T)}{\\sum_k \\exp(-(s - \\xi_k)^2 / T)},
       \\qquad \\xi_j = \\frac{j + 1/2}{M},

    giving soft bin masses ``S_j = sum_i w_i u_ij``, confidences and accuracies
    ``conf_j = sum_i w_i u_ij s_i / S_j``, ``acc_j = sum_i w_i u_ij y_i / S_j``, and

    .. math::
       \\mathrm{SB\\text{-}ECE}_{l1} = \\sum_j \\frac{S_j}{W} |acc_j - conf_j|
       = \\frac1W \\sum_j \\Big|\\sum_i w_i u_{ij} (y_i - s_i)\\Big|, \\qquad
       \\mathrm{SB\\text{-}ECE}_{l2} = \\Big(\\sum_j \\frac{S_j}{W} (acc_j - conf_j)^2\\Big)^{1/2}.

    The temperature T > 0 is used directly. The reference code's ``decay`` form sets
    ``T = 1 / (log(decay) M**2)``, which is negative for ``decay < 1`` and sends the mass to
    the *farthest* bins; the intended relation is ``T = 1 / (M**2 * log(1 / ratio))``,
    with which a score at a bin centre gives each adjacent bin ``ratio`` times its own
    bin's membership. As T -> 0 the membership becomes the hard uniform binning and
    SB-ECE tends to :func:`jaxcal.ece` (same ``n_bins``, same norm) for scores away from
    the bin edges; as T -> infinity it tends to ``|sum_i w_i (y_i - s_i)| / W``.

    The (M, N) memberships are formed 65,536 samples at a time, so memory is
    O(N + M * 65536), and derivatives (with respect to ``probs``, ``weights`` and
    ``temperature``, forward or reverse mode) come from a closed-form rule costing about
    one more pass, not from autodiff through the (M, N) graph. The gradient is finite
    everywhere, including scores of exactly 0 or 1 and bins with no mass (their gap is
    bounded by 1 and weighted by their mass). ``temperature`` is traced, not static:
    changing it does not recompile.

    Args:
      probs: ``(N,)`` positive-class probabilities or ``(N, K)`` rows on the simplex.
      labels: ``(N,)`` int (or bool) labels: 0/1 for 1-D probs, in ``[0, K)`` for 2-D.
      n_bins: number of bins M >= 1 (anchors at the bin centres).
      temperature: T > 0, a number or 0-d array. Default ``None``:
        ``1 / (M**2 * log(1 / 0.01))`` (adjacent-bin ratio 0.01 at a bin centre;
        0.00205 for M = 15).
      norm: ``"l1"`` (the ECE) or ``"l2"`` (the RMS calibration error, as Eq. (11)).
      weights: optional ``(N,)`` non-negative sample weights; 0 masks padding.

    Returns:
      0-d array. Zero total weight gives 0.

    Validation runs only on concrete inputs; under ``jit``/``vmap``/``grad`` the value
    checks are skipped and the kernel trusts its input.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> p, y = jnp.array([0.1, 0.4, 0.8, 0.9]), jnp.array([0, 1, 1, 1])
      >>> round(float(soft_ece(p, y, n_bins=2, temperature=1e-4)), 4)  # ~ hard ECE
      0.2
      >>> g = jax.grad(lambda q: soft_ece(q, y, n_bins=2))(p)
      >>> bool(jnp.all(jnp.isfinite(g)))
      True

    References:
      Karandikar, Cain, Tran, Lakshminarayanan, Shlens, Mozer & Roelofs (2021), "Soft
      Calibration Objectives for Neural Networks", NeurIPS, Eq. (11).
    """
    n_bins = check_positive_int("n_bins", n_bins)
    check_option("norm", norm, SOFT_NORMS)
    if temperature is None:
        temperature = 1.0 / (n_bins**2 * math.log(1.0 / DEFAULT_ADJACENT_RATIO))
    temperature = _scalar_parameter("temperature", temperature)
    probs, labels, weights = check_probs_labels(probs, labels, weights)
    return _soft_ece_kernel(probs, labels, weights, temperature, n_bins, norm)


# ----------------------------------------------------------------------------------------
# MMCE
# ----------------------------------------------------------------------------------------


#: MMCE: scores are split into this many equal-width segments of [0, 1] for the sorted
#: prefix sums (see :func:`laplace_quadratic_form`), and the kernel width must be at least
#: MMCE_MIN_BANDWIDTH, so that no rescaling factor exceeds exp(1 / (128 * 1e-3)) ~ 2.4e3.
_LAPLACE_SEGMENTS = 128
MMCE_MIN_BANDWIDTH = 1e-3


def laplace_quadratic_form(x: jax.Array, a: jax.Array, bandwidth: jax.Array) -> jax.Array:
    """``sum_ij a_i a_j exp(-|x_i - x_j| / h)`` exactly, in O(N log N) time, O(N) memory.

    For x in [0, 1] (up to round-off) and h >= 1e-3. The Laplacian kernel factorises:
    over x sorted ascending, ``L_i = sum_{j <= i} a_j exp(-(x_i - x_j) / h)`` is a prefix
    sum of ``a_j exp(x_j / h)`` rescaled by ``exp(-x_i / h)``, and the double sum is
    ``sum_i a_i (2 L_i - a_i)``. So that no factor overflows, [0, 1] is cut into
    G = 128 segments: each prefix sum is rescaled at its segment's right edge (all
    factors in [exp(-1/(G h)), 1]), and the segments' totals are carried forward by an
    exact (G, G) lower-triangular kernel product. This replaces the (N, N) kernel matrix
    (or its blocks) of the reference implementation; it is exact up to round-off.
    """
    order = jnp.argsort(x)
    xs, as_ = x[order], a[order]
    dtype = xs.dtype
    g = _LAPLACE_SEGMENTS
    seg = jnp.clip(jnp.floor(xs * g).astype(jnp.int32), 0, g - 1)
    left = seg.astype(dtype) / g
    right = left + 1 / g
    terms = as_ * jnp.exp((xs - right) / bandwidth)
    totals = jax.ops.segment_sum(terms, seg, g)
    within = jnp.cumsum(terms) - (jnp.cumsum(totals) - totals)[seg]
    # carried_k = sum over segments <= k of their points, at the right edge of segment k
    lag = (jnp.arange(g)[:, None] - jnp.arange(g)[None, :]).astype(dtype)
    decay = jnp.where(lag >= 0, jnp.exp(-jnp.maximum(lag, 0) / (g * bandwidth)), 0)
    carried = decay.dot(totals)
    before = jnp.concatenate([jnp.zeros((1,), dtype), carried[:-1]])[seg]
    cum = jnp.exp((right - xs) / bandwidth) * within + jnp.exp((left - xs) / bandwidth) * before
    return jnp.sum(as_ * (2 * cum - as_))


@partial(jax.jit, static_argnames=("variant",))
def _mmce_kernel(probs, labels, weights, bandwidth, variant):
    r, c = _scores_targets(probs, labels)
    dtype = r.dtype
    w = jnp.ones_like(r) if weights is None else weights.astype(dtype)
    h = jnp.asarray(bandwidth).astype(dtype)
    if variant == "unweighted":
        a = safe_divide(w * (c - r), w.sum())
        live = w.sum() > 0
    else:
        m_correct = jnp.sum(w * c)
        m_wrong = jnp.sum(w * (1 - c))
        a = w * (c * safe_divide(1 - r, m_correct) - (1 - c) * safe_divide(r, m_wrong))
        live = (m_correct > 0) & (m_wrong > 0)
    q = laplace_quadratic_form(r, a, h)
    return jnp.where(live, safe_sqrt(q), 0)


def mmce(
    probs: Any,
    labels: Any,
    *,
    bandwidth: Any = 0.4,
    variant: str = "unweighted",
    weights: Any = None,
) -> jax.Array:
    """Maximum mean calibration error (MMCE), a kernel calibration error.

    Kumar, Sarawagi & Jain (2018): with confidences ``r_i`` (positive-class probability
    for 1-D ``probs``, top-label confidence for 2-D), correctness ``c_i`` (the 0/1 label,
    or ``argmax == y``) and the Laplacian kernel ``k(r, r') = exp(-|r - r'| / h)``,

    .. math::
       \\mathrm{MMCE} = \\Big(\\sum_{i,j} a_i a_j k(r_i, r_j)\\Big)^{1/2}, \\qquad
       a_i = \\frac{w_i (c_i - r_i)}{W}  \\quad (\\texttt{variant="unweighted"}),

    the paper's Eq. (2) (with sample weights ``w_i``, W their sum). ``variant="weighted"``
    is the paper's MMCE_w (Section 4), which gives correct and incorrect samples equal
    total weight so that the measure does not vanish as accuracy grows:

    .. math::
       a_i = w_i \\Big(c_i \\frac{1 - r_i}{m} - (1 - c_i) \\frac{r_i}{n - m}\\Big),\\qquad
       m = \\sum_i w_i c_i,\\ n - m = \\sum_i w_i (1 - c_i).

    MMCE_w is 0 when every sample is correct or every sample is wrong (as the reference
    code, whose kernel ``exp(-|r - r'| / (2 * 0.2))`` is the default ``bandwidth=0.4``).

    The double sum is computed exactly in O(N log N) time and O(N) memory (sorting and
    segment-rescaled prefix sums, see :func:`laplace_quadratic_form`) instead of the
    reference implementation's O(N^2) kernel matrix, so N = 10**6 fits anywhere. The square root is
    taken of ``max(q, 0)`` with a zero gradient at 0 (the reference adds 1e-10 instead).

    Args:
      probs: ``(N,)`` positive-class probabilities or ``(N, K)`` rows on the simplex.
      labels: ``(N,)`` int (or bool) labels: 0/1 for 1-D probs, in ``[0, K)`` for 2-D.
      bandwidth: the kernel width h >= 1e-3 (number or 0-d array; traced, not static).
      variant: ``"unweighted"`` (MMCE) or ``"weighted"`` (MMCE_w).
      weights: optional ``(N,)`` non-negative sample weights; 0 masks padding.

    Returns:
      0-d array. Zero total weight gives 0.

    Validation runs only on concrete inputs; under ``jit``/``vmap``/``grad`` the value
    checks are skipped and the kernel trusts its input.

    Example:
      >>> import jax.numpy as jnp
      >>> p, y = jnp.array([0.1, 0.4, 0.8, 0.9]), jnp.array([0, 1, 1, 1])
      >>> round(float(mmce(p, y)), 4)
      0.1781

    References:
      Kumar, Sarawagi & Jain (2018), "Trainable Calibration Measures for Neural Networks
      from Kernel Mean Embeddings", ICML, Eq. (2) and Section 4 (MMCE_w).
    """
    check_option("variant", variant, MMCE_VARIANTS)
    bandwidth = _scalar_parameter("bandwidth", bandwidth, minimum=MMCE_MIN_BANDWIDTH)
    probs, labels, weights = check_probs_labels(probs, labels, weights)
    return _mmce_kernel(probs, labels, weights, bandwidth, variant)


# ----------------------------------------------------------------------------------------
# Smooth ECE
# ----------------------------------------------------------------------------------------


def _dct1(v: jax.Array) -> jax.Array:
    """DCT-I: ``out_m = sum_{j=0}^{G} v_j cos(pi m j / G)`` for m = 0..G, by one real FFT."""
    ext = jnp.concatenate([v, v[-2:0:-1]])
    sign = jnp.where(jnp.arange(v.shape[0]) % 2 == 0, 1, -1).astype(v.dtype)
    return (jnp.fft.rfft(ext).real.astype(v.dtype) + v[0] + sign * v[-1]) / 2


def _smece_moments(scores, residuals, weights, grid):
    """Cosine moments ``a_m = sum_j v_j cos(pi m j / G) / W`` of the weighted residuals.

    Residuals are first assigned to the G + 1 nodes j/G by linear interpolation (as
    relplot does); this widens the kernel by a triangle of variance h**2 / 6, a relative
    bandwidth change of h**2 / (12 sigma**2) <= 0.5% at sigma = 1e-3, h = 1/4096.
    """
    x = scores * grid
    lo = jnp.clip(jnp.floor(x).astype(jnp.int32), 0, grid - 1)
    frac = x - lo.astype(x.dtype)
    v = weights * residuals
    nodes = jax.ops.segment_sum(
        jnp.concatenate([v * (1 - frac), v * frac]), jnp.concatenate([lo, lo + 1]), grid + 1
    )
    return safe_divide(_dct1(nodes), weights.sum())


def _smece_at(moments: jax.Array, sigma: jax.Array) -> jax.Array:
    """``integral_0^1 |r_sigma(t)| dt`` from the cosine moments, trapezoid rule on the nodes.

    The reflected Gaussian kernel on [0, 1] (the sum over all mirror images) has the
    cosine expansion ``K(t, x) = 1 + 2 sum_{m>=1} exp(-(pi m sigma)**2 / 2) cos(pi m t)
    cos(pi m x)``: smoothing is a diagonal scaling of the moments, evaluated back on the
    nodes by a second DCT-I. Modes above G are below exp(-80) for sigma >= 1e-3.
    """
    grid = moments.shape[0] - 1
    m = jnp.arange(grid + 1, dtype=moments.dtype)
    gain = jnp.exp(-0.5 * (jnp.pi * m * sigma) ** 2) * jnp.where(m > 0, 2, 1).astype(m.dtype)
    smooth = _dct1(moments * gain)
    trap = jnp.ones(grid + 1, moments.dtype).at[jnp.array([0, grid])].set(0.5)
    return jnp.sum(trap * jnp.abs(smooth)) / grid


def _smece_fixed_point(moments: jax.Array) -> jax.Array:
    """The bandwidth with smECE_sigma = sigma, by bisection on [1e-3, 1] (clamped there).

    smECE_sigma is non-increasing in sigma (the heat semigroup contracts the L1 norm),
    so sigma - smECE_sigma has a single root.
    """
    dtype = moments.dtype
    lo0 = jnp.asarray(SMECE_MIN_BANDWIDTH, dtype)
    hi0 = jnp.asarray(1.0, dtype)

    def body(_, bounds):
        lo, hi = bounds
        mid = 0.5 * (lo + hi)
        above = _smece_at(moments, mid) <= mid  # mid is at or past the fixed point
        return jnp.where(above, lo, mid), jnp.where(above, mid, hi)

    lo, hi = jax.lax.fori_loop(0, _BISECTION_STEPS, body, (lo0, hi0))
    sigma = 0.5 * (lo + hi)
    sigma = jnp.where(_smece_at(moments, lo0) <= lo0, lo0, sigma)
    return jnp.where(_smece_at(moments, hi0) >= hi0, hi0, sigma)


@partial(jax.jit, static_argnames=("auto",))
def _smooth_ece_kernel(probs, labels, weights, bandwidth, auto):
    s, y = _scores_targets(probs, labels)
    dtype = s.dtype
    w = jnp.ones_like(s) if weights is None else weights.astype(dtype)
    moments = _smece_moments(s, y - s, w, SMECE_GRID)
    if not auto:
        return _smece_at(moments, jnp.asarray(bandwidth).astype(dtype))
    frozen = jax.lax.stop_gradient(moments)
    sigma = jax.lax.stop_gradient(_smece_fixed_point(frozen))
    value = _smece_at(moments, sigma)
    # d sigma*/d theta = dS/d theta / (1 - dS/d sigma) at the fixed point (implicit
    # function theorem); the returned value is S(sigma*) with that total derivative.
    _, slope = jax.jvp(lambda sg: _smece_at(frozen, sg), (sigma,), (jnp.ones_like(sigma),))
    interior = (sigma > SMECE_MIN_BANDWIDTH) & (sigma < 1)
    factor = jax.lax.stop_gradient(jnp.where(interior, slope / (1 - slope), 0))
    return value + factor * (value - jax.lax.stop_gradient(value))


def smooth_ece(
    probs: Any,
    labels: Any,
    *,
    bandwidth: Any = None,
    weights: Any = None,
) -> jax.Array:
    """Smooth ECE (smECE): the calibration error of a kernel-smoothed reliability diagram.

    Błasiok & Nakkiran (2023), the metric behind ``relplot``. With scores ``s_i``
    (positive-class probability, or top-label confidence for 2-D ``probs``), targets
    ``y_i`` (label, or correctness) and the reflected Gaussian kernel ``K_sigma`` on
    [0, 1] (the Gaussian of width sigma summed over its mirror images at 0 and 1, so that
    ``integral_0^1 K_sigma(t, s) dt = 1``),

    .. math::
       \\mathrm{smECE}_\\sigma = \\int_0^1 \\Big|\\frac1W \\sum_i w_i (y_i - s_i)
       K_\\sigma(t, s_i)\\Big|\\, dt.

    With ``bandwidth=None`` sigma is the fixed point ``sigma* = smECE_{sigma*}`` (unique:
    smECE_sigma is non-increasing in sigma), searched on [1e-3, 1] as relplot's ``smECE``
    does (its ``eps=0.001`` floor; the answer is clamped to that interval), and the
    result is ``smECE_{sigma*}``. relplot stops its bisection after 10 halvings and
    reports the value at the upper end; here it runs to float precision, so the two agree
    to about 1e-3 times the slope of smECE_sigma in sigma. (relplot also truncates its
    kernel at +-0.5 and keeps one mirror image per side, which shows for sigma above
    ~0.15; here all images are summed.)

    Numerics: residuals are assigned to a grid of 4097 nodes by linear interpolation and
    smoothed exactly in the cosine basis of the reflected kernel (two FFTs of length
    8192), so the cost is O(N) plus O(G log G) per bandwidth evaluation, independent of
    N in the fixed-point search. Differentiable: with ``bandwidth=None`` the gradient
    includes the bandwidth's own dependence on the data (implicit function theorem).

    Args:
      probs: ``(N,)`` positive-class probabilities or ``(N, K)`` rows on the simplex.
      labels: ``(N,)`` int (or bool) labels: 0/1 for 1-D probs, in ``[0, K)`` for 2-D.
      bandwidth: ``None`` (the fixed point) or sigma >= 1e-3 (number or 0-d array; traced,
        not static).
      weights: optional ``(N,)`` non-negative sample weights; 0 masks padding.

    Returns:
      0-d array. Zero total weight gives 0.

    Validation runs only on concrete inputs; under ``jit``/``vmap``/``grad`` the value
    checks are skipped and the kernel trusts its input.

    Example:
      >>> import jax.numpy as jnp
      >>> p = jnp.linspace(0.05, 0.95, 10)
      >>> y = jnp.array([0, 0, 0, 1, 0, 1, 1, 1, 1, 1])
      >>> round(float(smooth_ece(p, y, bandwidth=0.1)), 4)
      0.1413

    References:
      Błasiok & Nakkiran (2023), "Smooth ECE: Principled Reliability Diagrams via Kernel
      Smoothing", ICLR 2024; the ``relplot`` package (``relplot.smECE``).
    """
    auto = bandwidth is None
    if not auto:
        bandwidth = _scalar_parameter("bandwidth", bandwidth, minimum=SMECE_MIN_BANDWIDTH)
    probs, labels, weights = check_probs_labels(probs, labels, weights)
    return _smooth_ece_kernel(probs, labels, weights, None if auto else bandwidth, auto)
