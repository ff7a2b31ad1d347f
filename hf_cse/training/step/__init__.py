"""One training step's machinery: gradient caching, the compiled loss, what a step costs, divergence checks."""
