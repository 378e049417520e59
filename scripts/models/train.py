"""Trains linear heads on sentence embeddings: L2-regularised (multinomial) logistic regression.

Plain numpy, solved with Newton's method, which on a few hundred features converges in a handful
of exact steps and is deterministic — a rebuild gives the same head. The objective follows
scikit-learn's convention so `C` means what people expect:
    C * sum_i cross_entropy(x_i, y_i) + 0.5 * ||W||^2      (bias not penalised)
Binary problems use one weight vector and a sigmoid; they are exported as two logits
(-z/2, +z/2), whose softmax is exactly sigmoid(z).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_STEPS = 50
TOLERANCE = 1e-7


@dataclass
class Head:
    """A linear head: logits = x @ weight + bias, weight [dim, labels]."""

    weight: np.ndarray
    bias: np.ndarray

    def logits(self, x: np.ndarray) -> np.ndarray:
        return x @ self.weight + self.bias

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        z = self.logits(x)
        z = z - z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)


def _with_bias(x: np.ndarray) -> np.ndarray:
    return np.hstack([x.astype(np.float64), np.ones((x.shape[0], 1))])


def _penalty(dim: int) -> np.ndarray:
    """Diagonal of the L2 penalty: every weight, but not the bias (the last column)."""
    p = np.ones(dim + 1)
    p[-1] = 0.0
    return p


def _solve(h: np.ndarray, g: np.ndarray) -> np.ndarray:
    # The bias row has no penalty; a tiny ridge keeps H invertible when classes separate.
    return np.linalg.solve(h + 1e-10 * np.eye(h.shape[0]), g)


def fit_binary(x: np.ndarray, y: np.ndarray, c: float, start: np.ndarray | None = None) -> np.ndarray:
    """Returns the weights (last entry: bias) of a binary logistic regression."""
    xb = _with_bias(x)
    pen = _penalty(x.shape[1])
    w = np.zeros(xb.shape[1]) if start is None else start.copy()
    for _ in range(MAX_STEPS):
        z = xb @ w
        p = 1.0 / (1.0 + np.exp(-z))
        grad = c * xb.T @ (p - y) + pen * w
        hess = c * (xb.T * (p * (1.0 - p))) @ xb + np.diag(pen)
        step = _solve(hess, grad)
        w -= step
        if np.max(np.abs(step)) < TOLERANCE:
            break
    return w


def fit_multinomial(x: np.ndarray, y: np.ndarray, classes: int, c: float) -> np.ndarray:
    """Returns weights [dim + 1, classes] (last row: bias) of a softmax regression.

    Newton steps are solved by conjugate gradients on Hessian-vector products, so no
    (classes * dim)^2 matrix is ever formed; each product costs two passes over the data.
    """
    xb = _with_bias(x)
    d = xb.shape[1]
    pen = _penalty(x.shape[1])[None, :]  # [1, d], broadcast over classes
    onehot = np.eye(classes)[y]
    w = np.zeros((classes, d))
    for _ in range(MAX_STEPS):
        z = xb @ w.T
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        grad = c * (p - onehot).T @ xb + pen * w

        def hess_times(v: np.ndarray, p: np.ndarray = p) -> np.ndarray:
            xv = xb @ v.T
            r = p * (xv - np.sum(p * xv, axis=1, keepdims=True))
            return c * r.T @ xb + pen * v + 1e-10 * v

        step = _conjugate_gradient(hess_times, grad)
        w -= step
        if np.max(np.abs(step)) < TOLERANCE:
            break
    return w.T


def _conjugate_gradient(apply, b: np.ndarray, rel_tol: float = 1e-12, max_iter: int = 2000) -> np.ndarray:
    """Solves apply(s) = b for a symmetric positive definite operator."""
    s = np.zeros_like(b)
    r = b.copy()
    direction = r.copy()
    rr = float(np.sum(r * r))
    stop = rel_tol * rr
    for _ in range(max_iter):
        if rr <= stop:
            break
        ad = apply(direction)
        alpha = rr / float(np.sum(direction * ad))
        s += alpha * direction
        r -= alpha * ad
        rr_next = float(np.sum(r * r))
        direction = r + (rr_next / rr) * direction
        rr = rr_next
    return s


def binary_head(w: np.ndarray) -> Head:
    """Two symmetric logits whose softmax equals sigmoid(x @ w + b)."""
    z_w, z_b = w[:-1], w[-1]
    weight = np.stack([-z_w / 2.0, z_w / 2.0], axis=1)
    bias = np.array([-z_b / 2.0, z_b / 2.0])
    return Head(weight.astype(np.float32), bias.astype(np.float32))


def multinomial_head(w: np.ndarray) -> Head:
    return Head(w[:-1].astype(np.float32), w[-1].astype(np.float32))


def log_loss(probs: np.ndarray, y: np.ndarray) -> float:
    picked = probs[np.arange(len(y)), y]
    return float(-np.mean(np.log(np.clip(picked, 1e-12, 1.0))))


def stratified_folds(y: np.ndarray, folds: int, seed: int) -> list[np.ndarray]:
    """Fold index per row, classes spread evenly; deterministic for a given seed."""
    rng = np.random.default_rng(seed)
    fold_of = np.empty(len(y), dtype=np.int64)
    for label in np.unique(y):
        rows = np.flatnonzero(y == label)
        rng.shuffle(rows)
        fold_of[rows] = np.arange(len(rows)) % folds
    return [np.flatnonzero(fold_of == f) for f in range(folds)]
