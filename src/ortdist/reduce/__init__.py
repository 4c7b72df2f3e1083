"""Reduced builds: which operators (and element types) a set of models needs, in ORT's config format."""
