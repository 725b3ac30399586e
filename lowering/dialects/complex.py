"""The complex dialect's ops, read by sprue as plain OpViews (see sprue.lowering.dialects)."""
