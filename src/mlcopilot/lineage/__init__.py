"""Graph work over the Catalog protocol, pure: upstream, downstream, coverage, columns."""
