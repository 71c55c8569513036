"""What generated code and rules call: results, sensitivities, box maps, the rule registry,
lifting callees and the operations of the reverse pass. Imports neither the transformer nor
the public API (see the layers contract in pyproject.toml)."""
