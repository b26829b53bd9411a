"""Full-text search: the query language, its indexes and stores, the search service."""
