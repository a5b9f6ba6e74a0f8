"""`bench reproduce`: the seed papers' experiments, their claims, and whether the harness reproduces them."""
