"""Soft-binned ECE (Karandikar et al. 2021): a differentiable surrogate of the binned ECE.

Inputs and hyperparameters follow ``jaxcal/metrics/_objectives.py``. The (bins, samples)
memberships are formed chunk by chunk and differentiated by a closed-form JVP rule, not
by autodiff through the (M, N) graph (see ``_soft_ece_core_jvp()``).
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp

from jaxcal._core.checks import check_option, check_positive_int, check_probs_labels
from jaxcal._core.docstrings import shared_doc
from jaxcal._core.numerics import compute_dtype, safe_divide, safe_sqrt
from jaxcal._core.validity import kernel_inputs, run_validated
from jaxcal.metrics._objectives import check_hyperparameter, float_scores_targets, sample_weights

SOFT_NORMS = ("l1", "l2")

#: Default soft-binning softness: at a bin centre each adjacent bin gets this fraction
#: of the membership of the bin itself, i.e. T = 1 / (M**2 * log(1 / ratio)).
DEFAULT_ADJACENT_RATIO = 0.01

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
    derivative formulas of ``_soft_ece_core_jvp()`` stay exact as T -> 0.
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
    # |gap| <= 1: bounded even for near-empty bins. A bin with less than eps of the total
    # mass holds no measurable share of the error (its term is at most its mass) and
    # counts as empty: the memberships of far bins underflow towards 0, and the second
    # derivatives of excess / mass divide by mass**3 (NaN once mass**2 underflows).
    filled = mass > jnp.finfo(mass.dtype).eps * total
    gap = safe_divide(excess, jnp.where(filled, mass, 0))
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
        scale = safe_divide(1, value * total)  # 0 where the value is 0 (no direction)
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


def soft_ece_value(probs, labels, weights, temperature, n_bins, norm, rows=None):
    """The soft ECE of ``(probs, labels, weights)`` (traceable; shared with
    :func:`jaxcal.losses.soft_ece_loss`). ``rows``: the caller's ``input_row_stats``."""
    s, y = float_scores_targets(probs, labels, rows)
    w = sample_weights(weights, s)
    t = jnp.asarray(temperature).astype(s.dtype)
    return _soft_ece_core(s, y, w, t, n_bins, norm)


@partial(jax.jit, static_argnames=("n_bins", "norm"))
def _soft_ece_kernel(probs, labels, weights, temperature, n_bins, norm):
    probs, labels, rows, summary = kernel_inputs(probs, labels, weights)
    return soft_ece_value(probs, labels, weights, temperature, n_bins, norm, rows), summary


@shared_doc
def soft_ece(
    probs: Any,
    labels: Any,
    *,
    n_bins: int = 15,
    temperature: Any = None,
    norm: str = "l1",
    weights: Any = None,
    renormalize: bool = False,
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

    This is the metric. To train with it, use :func:`jaxcal.losses.soft_ece_loss` (on
    logits, with the authors' l2 norm and the temperature chosen in our experiment), and
    see its documentation for what it did there.

    Args:
      {{probs_labels}}
      n_bins: number of bins M >= 1 (anchors at the bin centres).
      temperature: T > 0, a number or 0-d array. Default ``None``:
        ``1 / (M**2 * log(1 / 0.01))`` (adjacent-bin ratio 0.01 at a bin centre;
        0.00205 for M = 15).
      norm: ``"l1"`` (the ECE) or ``"l2"`` (the RMS calibration error, as Eq. (11)).
      weights: optional ``(N,)`` non-negative sample weights; 0 masks padding.
      {{renormalize}}

    Returns:
      0-d array. Zero total weight gives 0.

    {{traced_validation}}

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
    temperature = check_hyperparameter("temperature", temperature)
    probs, labels, weights = check_probs_labels(
        probs, labels, weights, values=False, renormalize=renormalize
    )
    return run_validated(_soft_ece_kernel, probs, labels, weights, temperature, n_bins, norm)
