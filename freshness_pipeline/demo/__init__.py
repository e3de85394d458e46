"""A small docs site shipped in two versions, and the demo that refreshes it twice."""
