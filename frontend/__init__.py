"""sprue: an ahead-of-time compiler for numeric Python."""
