"""The subspace distance of Inan, Khosravi & Socher (2017), Appendix B (after Björck & Golub 1973)."""

from __future__ import annotations

import numpy as np
import scipy.linalg

from ..errors import UsageError


def _as_matrix(x, name: str) -> np.ndarray:
    if hasattr(x, "detach"):  # a torch tensor
        x = x.detach().float().cpu().numpy()
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 2:
        raise UsageError(f"subspace_distance: {name} must be a 2-D matrix, got shape {a.shape}")
    if not np.isfinite(a).all():
        raise UsageError(f"subspace_distance: {name} has non-finite entries")
    return a


def orthonormal_basis(x: np.ndarray, name: str = "X") -> np.ndarray:
    """Q of the economic QR decomposition of ``x`` (n, c): an orthonormal basis of its column span.

    Columns must be linearly independent (otherwise Q spans more than span(x)); checked via R's diagonal.
    """
    q, r = scipy.linalg.qr(x, mode="economic")
    d = np.abs(np.diag(r))
    if d.size and d.min() <= d.max() * max(x.shape) * np.finfo(np.float64).eps:
        raise UsageError(
            f"subspace_distance: the columns of {name} are linearly dependent (rank < {x.shape[1]}); "
            "pass a matrix of full column rank"
        )
    return q


def subspace_distance(X, Y) -> float:
    """Distance between span(X) and span(Y), Inan et al. (2017) Appendix B.

    With U, V orthonormal bases of span(X), span(Y) (QR), R = V − U Uᵀ V is the residual of projecting V
    onto span(X), and d = sqrt(trace(RᵀR) / C) with C the number of columns of V. d is 0 for equal spans,
    1 for orthogonal ones, symmetric when both have C columns, and independent of the bases chosen;
    d² is the mean of sin²θᵢ over the principal angles θᵢ (Appendix B, "related to principal angles").

    For the paper's use pass the input embedding Lᵀ and the output projection W as (|V|, d) matrices
    (rows = words), e.g. ``subspace_distance(model.input_embeddings, model.output.weight)``.
    X and Y may be NumPy arrays or torch tensors with the same number of rows.
    """
    x, y = _as_matrix(X, "X"), _as_matrix(Y, "Y")
    if x.shape[0] != y.shape[0]:
        raise UsageError(
            f"subspace_distance: X and Y must have the same number of rows (the ambient space), "
            f"got {x.shape[0]} and {y.shape[0]}"
        )
    u, v = orthonormal_basis(x, "X"), orthonormal_basis(y, "Y")
    r = v - u @ (u.T @ v)
    return float(np.sqrt(max(np.trace(r.T @ r), 0.0) / v.shape[1]))
