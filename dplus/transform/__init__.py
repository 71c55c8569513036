"""The source transformation, one module per pass: source -> inline -> scopes -> normalize
-> scalarize -> reverse (with fused, peephole) -> transformer (compile and bind). Imports the
runtime below it, never the public API (see the layers contract in pyproject.toml)."""
