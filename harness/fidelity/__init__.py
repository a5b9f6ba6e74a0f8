"""`bench fidelity`: the same cells on `local` and `sim`, and how far apart they land."""
