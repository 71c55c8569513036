"""dplus benchmarks: ``python -m benchmarks`` (see benchmarks/README.md).

``benchmarks.workloads.ALL`` lists the workloads, each with ``.primal``,
``.hand_grad``, ``.args()``, ``.wrt`` and ``.select()``.
"""
