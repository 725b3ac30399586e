"""The transform dialect's ops (the matmul tiling's scripts, parsed from text), read by sprue as plain OpViews (see sprue.lowering.dialects)."""
